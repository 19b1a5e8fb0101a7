// The harness's fault hooks hold on real processes: a signal reaches the command itself (setpriv
// execs it), etcd stopped by SIGSTOP holds a write until SIGCONT, etcd and kube-apiserver killed
// and started again keep the cluster's data and serve it, the API server reconnecting to etcd on
// its own. On a real node: a kubelet restarted leaves its containers running, a killed
// kruise-daemon starts again, and OpenKruise uninstalled leaves pods and requests admitted and can
// be installed again.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { isApiError } from '../../src/kube/api-errors.ts';
import { readKruiseDaemonNodes } from '../../src/kube/kruise-daemons.ts';
import { startControlPlane } from '../support/control-plane.ts';
import { kruiseDaemonName, KRUISE_NAMESPACE, startKruise, type Kruise } from '../support/kruise.ts';
import { ManagedProcess } from '../support/managed-process.ts';
import { barePod } from '../support/pods.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { containerStatus, startRealCluster, testContainer } from '../support/real-stack.ts';
import { waitFor } from '../support/wait.ts';

t.test('a managed process: its pid is the command\'s, and a signal reaches it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'st-fault-hooks-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sleeper = new ManagedProcess('sleep', ['sleep', '60'], join(dir, 'sleep.log'));
  t.teardown(() => sleeper.stop());
  await waitFor('setpriv to exec sleep', () => readFileSync(`/proc/${sleeper.pid}/comm`, 'utf8').trim() === 'sleep');
  t.ok(sleeper.running(), 'running');
  t.equal(await sleeper.waitExit(300), false, 'no exit within 300 ms');
  sleeper.signal('SIGKILL');
  t.equal(await sleeper.waitExit(5000), true, 'exited on the SIGKILL sent to its pid');
  t.equal(sleeper.exitStatus, 'SIGKILL', 'ended by the signal itself, not by a setpriv in between');
  t.notOk(sleeper.running(), 'no longer running');
});

t.test('control plane faults', async (t) => {
  const cp = await startControlPlane();
  t.teardown(() => cp.stop());
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  const namespace = await cp.createNamespace();
  const write = (name: string) => core.createNamespacedConfigMap({ namespace, body: { metadata: { name }, data: { written: name } } });
  const read = async (name: string) => (await core.readNamespacedConfigMap({ namespace, name })).data?.written;

  t.test('etcd SIGSTOP holds a write; SIGCONT lets it through', async (t) => {
    cp.signal('etcd', 'SIGSTOP');
    let settled = false;
    const held = write('held').finally(() => (settled = true));
    await sleep(3000);
    t.notOk(settled, 'the write has no answer while etcd is stopped');
    t.ok(cp.running('etcd'), 'a stopped etcd still runs');
    cp.signal('etcd', 'SIGCONT');
    await held;
    t.equal(await read('held'), 'held', 'the write is stored once etcd goes on');
  });

  t.test('etcd SIGKILLed and started again on its data: the data is there, the API server reconnects on its own', async (t) => {
    await write('before-etcd-kill');
    cp.signal('etcd', 'SIGKILL');
    await waitFor('etcd to exit', () => !cp.running('etcd'), { timeoutMs: 5000 });
    await t.rejects(cp.startComponent('kube-apiserver'), /kube-apiserver is running/, 'a running component is not started twice');
    await cp.startComponent('etcd');
    t.ok(cp.running('kube-apiserver'), 'the API server was not restarted');
    t.equal(await read('before-etcd-kill'), 'before-etcd-kill', 'what was written before is still there');
    await write('after-etcd-kill');
    t.equal(await read('after-etcd-kill'), 'after-etcd-kill', 'and the API server writes again');
  });

  t.test('kube-apiserver SIGKILLed and started again on its port', async (t) => {
    cp.signal('kube-apiserver', 'SIGKILL');
    // Not waited for: startComponent waits for the exit itself.
    await cp.startComponent('kube-apiserver');
    t.equal(await read('before-etcd-kill'), 'before-etcd-kill', 'the data is served again, on the same address');
    await write('after-apiserver-kill');
    t.equal(await read('after-apiserver-kill'), 'after-apiserver-kill', 'and written');
    // What the outage tests do: stopApiServer, then startApiServer, the same start.
    await cp.restartApiServer();
    t.equal(await read('after-apiserver-kill'), 'after-apiserver-kill', 'and served after a graceful restart too');
  });
});

t.test('real node faults', async (t) => {
  if (!canRunRealNode(t)) return;
  const cluster = await startRealCluster(t, { node: { images: ['test-container'] } });
  const { cp, node, core } = cluster;
  const namespace = await cp.createNamespace();
  const runningPod = async (name: string) => {
    await core.createNamespacedPod({ namespace, body: barePod(name, [testContainer('main', ['sidecar'])], { spec: { terminationGracePeriodSeconds: 1 } }) });
    return containerStatus(cluster, namespace, name, 'main', (s) => s.state?.running !== undefined);
  };

  t.test('the kubelet restarted: its pod runs on in the same container, and the node is Ready', async (t) => {
    const before = await runningPod('through-restart');
    const kubeletStarts = () => readFileSync(join(node.dir, 'kubelet.log'), 'utf8').split('\n').filter((line) => line.includes('"Started kubelet"')).length;
    t.equal(kubeletStarts(), 1, 'one kubelet start in its log');
    await node.restartKubelet();
    t.equal(kubeletStarts(), 2, 'and a second one');
    const after = await containerStatus(cluster, namespace, 'through-restart', 'main', () => true);
    t.ok(after.state?.running, 'the container runs');
    t.equal(after.containerID, before.containerID, 'the same container, not a new one');
    t.equal(after.restartCount, 0, 'never restarted');
    const containerId = before.containerID!.replace(/^containerd:\/\//, '');
    t.match(JSON.parse(await node.crictl(['inspect', containerId])), { status: { state: 'CONTAINER_RUNNING' } }, 'containerd runs it');
    const ready = (await core.readNode({ name: node.name })).status?.conditions?.find((c) => c.type === 'Ready');
    t.equal(ready?.status, 'True', 'the node is Ready');
  });

  t.test('OpenKruise: a daemon killed and restarted; uninstalled, then installed again', async (t) => {
    let kruise: Kruise = await startKruise(cp, { nodes: [node] });
    t.teardown(() => kruise.stop());
    // As the add-on reads which nodes a kruise-daemon serves.
    const daemonPodReady = async () => {
      const read = await readKruiseDaemonNodes(core, KRUISE_NAMESPACE);
      return 'nodes' in read && read.nodes.has(node.name);
    };
    kruise.killDaemon(node.name);
    await waitFor('the killed daemon\'s pod to turn unready', async () => !(await daemonPodReady()), { timeoutMs: 30_000 });
    await kruise.restartDaemon(node.name);
    t.ok(await daemonPodReady(), 'the restarted daemon\'s pod is ready');

    // A request for a pod that does not exist: Kruise's webhook refuses it; with no webhook, nothing does.
    const crrDryRun = () => cp.kubectl(['create', '--dry-run=server', '-f', '-'], {
      namespace,
      input: JSON.stringify({ apiVersion: 'apps.kruise.io/v1alpha1', kind: 'ContainerRecreateRequest', metadata: { name: 'probe' }, spec: { podName: 'no-such-pod', containers: [{ name: 'main' }] } }),
    });
    t.match((await crrDryRun()).stderr, /no found Pod named no-such-pod/, 'installed: Kruise\'s webhook judges ContainerRecreateRequests');

    await kruise.uninstall();
    const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    const gone = (read: Promise<unknown>) => read.then(() => false, (err: unknown) => isApiError(err, 404));
    t.ok(await gone(admission.readMutatingWebhookConfiguration({ name: 'kruise-mutating-webhook-configuration' })), 'the mutating webhook configuration is deleted');
    t.ok(await gone(admission.readValidatingWebhookConfiguration({ name: 'kruise-validating-webhook-configuration' })), 'the validating one too');
    const uninstalledCrr = await crrDryRun();
    t.equal(uninstalledCrr.code, 0, `uninstalled: no webhook of a stopped manager refuses a ContainerRecreateRequest (${uninstalledCrr.stderr.trim()})`);
    await waitFor('the daemon\'s pod to be deleted', () => gone(core.readNamespacedPod({ namespace: KRUISE_NAMESPACE, name: kruiseDaemonName(node.name) })), { timeoutMs: 30_000 });
    const created = await runningPod('after-uninstall');
    t.ok(created.state?.running, 'a pod is created and runs');

    kruise = await startKruise(cp, { nodes: [node] });
    t.match((await crrDryRun()).stderr, /no found Pod named no-such-pod/, 'installed again: its webhook judges ContainerRecreateRequests again');
    t.ok(await daemonPodReady(), 'its daemon\'s pod is ready');
  });
});
