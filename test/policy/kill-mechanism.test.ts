// Which kill mechanism a pod gets when the cluster's changes (src/policy/kill-mechanism.ts): the one
// its stop began with, else the cluster's now; a ContainerRecreateRequest gone with its API is
// replaced by a signal, never added to one.
import t from 'tap';
import { killMechanismFor, type ClusterKillMechanism } from '../../src/policy/index.ts';
import { jobPod, killSidecar, main } from '../support/pods.ts';

const crr: ClusterKillMechanism = { mechanism: 'crr', crrVersion: 'v1alpha1' };
const signal: ClusterKillMechanism = { mechanism: 'signal' };
const fresh = () => jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
const signalled = () => jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }, { spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] } });

t.test('a pod not told to stop yet gets the cluster mechanism of now', async (t) => {
  t.equal(killMechanismFor(fresh(), undefined, crr), 'crr');
  t.equal(killMechanismFor(fresh(), undefined, signal), 'signal');
});

t.test('a pod signalled already keeps the signal when Kruise arrives, whoever sent it', async (t) => {
  t.equal(killMechanismFor(signalled(), undefined, crr), 'signal', 'its signal container says so (a watcher before this one sent it)');
  t.equal(killMechanismFor(fresh(), 'signal', crr), 'signal', 'this watcher says so (its write not in the watch yet)');
});

t.test('a pod stopped by a ContainerRecreateRequest keeps it while the API is served, and is signalled once it is gone', async (t) => {
  t.equal(killMechanismFor(fresh(), 'crr', crr), 'crr');
  t.equal(killMechanismFor(fresh(), 'crr', signal), 'signal', 'deleting the CRD deleted its request: nothing else would stop the sidecar');
});

t.test('a signal container for another container than a sidecar does not count', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }, { spec: { ephemeralContainers: [{ name: 'debugger', image: 'busybox', targetContainerName: 'main' }] } });
  t.equal(killMechanismFor(pod, undefined, crr), 'crr');
});

t.test('a signal container for a sidecar with an HTTP stop method does not count: it gets one with either mechanism', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy'), killSidecar('sql')], { main: 0, proxy: 'running', sql: 'running' }, {
    metadata: { annotations: { 'stop.sidecar-terminator.io/proxy': 'istio-proxy' } },
    spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] },
  });
  t.equal(killMechanismFor(pod, undefined, crr), 'crr', 'sql, stopped by SIGTERM, still gets the ContainerRecreateRequest');
  t.equal(killMechanismFor(pod, 'crr', crr), 'crr');
  const sqlSignalled = { ...pod, spec: { ...pod.spec!, ephemeralContainers: [...pod.spec!.ephemeralContainers!, { name: 'stop-sql', image: 'st:1', targetContainerName: 'sql' }] } };
  t.equal(killMechanismFor(sqlSignalled, undefined, crr), 'signal', 'a signal container for sql does count');
});

t.test('with auto, a pod on a node no kruise-daemon serves is signalled: a ContainerRecreateRequest there is never acted on', async (t) => {
  const served: ClusterKillMechanism = { mechanism: 'crr', crrVersion: 'v1beta1', daemons: { nodes: new Set(['node-a']) } };
  const elsewhere: ClusterKillMechanism = { mechanism: 'crr', crrVersion: 'v1beta1', daemons: { nodes: new Set(['node-b']) } };
  const none: ClusterKillMechanism = { mechanism: 'crr', crrVersion: 'v1beta1', daemons: { nodes: new Set() } };
  t.equal(killMechanismFor(fresh(), undefined, served), 'crr', "the pod's node, node-a, has a ready daemon");
  t.equal(killMechanismFor(fresh(), undefined, elsewhere), 'signal', 'only node-b has one');
  t.equal(killMechanismFor(fresh(), undefined, none), 'signal', 'no node has one (the KruiseDaemon gate off, or the daemon not yet ready)');
  t.equal(killMechanismFor(fresh(), 'crr', none), 'crr', 'a pod whose request was made keeps it: a daemon gone since is covered by the crr-not-done deadline, not a second stop');
  const unscheduled = fresh();
  delete unscheduled.spec!.nodeName;
  t.equal(killMechanismFor(unscheduled, undefined, elsewhere), 'crr', 'a pod without a node is not judged by its node');
});
