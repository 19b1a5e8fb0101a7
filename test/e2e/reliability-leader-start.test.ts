// A leader is working, or gives the Lease up. Discovery fails at the moment a replica wins the
// Lease: its API requests go through `kubectl proxy --reject-paths` refusing the discovery
// documents, as an API server that restarts or a Kruise being upgraded refuses them. The leader
// retries starting its watcher with backoff, discovering the kill mechanism anew each time, and
// works once discovery answers; a leader whose discovery keeps failing releases the Lease after
// --leader-start-timeout, and a replica that can reach it takes over. Meanwhile /readyz and
// sidecar_terminator_leader say which replica acts.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { expectJobStoppedBy } from '../support/endings.ts';
import { httpStatus, PortLease } from '../support/net.ts';
import { simAnnotations } from '../support/kubelet-simulator.ts';
import { jobYaml, killSidecar, main } from '../support/pods.ts';
import { registeringWebhooks, startServe, startWatcherProcess, type ServeProcess } from '../support/serve-process.ts';
import { installCrrCrd, startCluster, waitForJob } from '../support/stack.ts';
import { waitFor } from '../support/wait.ts';
import type { ControlPlane } from '../support/control-plane.ts';

const { cp, core, batch, custom } = await startCluster(t, { sim: { restartDelayMs: 200 } });
const leases = cp.kubeConfig.makeApiClient(CoordinationV1Api);
const addonNamespace = await cp.createNamespace('st-system');

// A webhook labels the Jobs' pods for the watchers below.
const webhook = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--namespace', addonNamespace, '--no-watcher', ...registeringWebhooks(port, 'Fail')]);
t.teardown(() => webhook.stop());

/** The discovery documents a watcher reads to choose its kill mechanism (/apis, /apis/GROUP/VERSION). */
const DISCOVERY = '^/apis/?$,^/apis/[^/]+/[^/]+/?$';

interface Proxy {
  kubeconfig: string;
  /** Starts `kubectl proxy` on the same port again, refusing `rejectPaths` (none: everything passes). */
  restart(rejectPaths?: string): Promise<void>;
  stop(): Promise<void>;
}

/** `kubectl proxy` on a leased port with the admin's credentials, and a kubeconfig for it. */
async function kubectlProxy(cp: ControlPlane, rejectPaths: string | undefined): Promise<Proxy> {
  // Held for the whole test file: the proxy restarts on the same port.
  const port = await new PortLease().take();
  let child: ReturnType<typeof spawn> | undefined;
  const start = async (reject: string | undefined) => {
    const args = ['--kubeconfig', cp.kubeconfigPath, 'proxy', '--address', '127.0.0.1', '--port', String(port), ...(reject ? ['--reject-paths', reject] : [])];
    child = spawn(join(cp.binDir, 'kubectl'), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    await waitFor(`kubectl proxy on ${port}`, async () => (await httpStatus(`http://127.0.0.1:${port}/version`)) === 200, { intervalMs: 50 });
  };
  const stop = async () => {
    const running = child;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolveExit) => running.once('exit', resolveExit));
    running.kill('SIGTERM');
    await exited;
  };
  await start(rejectPaths);
  const kubeconfig = join(cp.dir, `proxy-${port}.kubeconfig`);
  writeFileSync(kubeconfig, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    // client-node speaks plain HTTP only when told to skip TLS verification: kubectl proxy has no TLS.
    clusters: [{ name: 'proxy', cluster: { server: `http://127.0.0.1:${port}`, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'proxy', user: {} }],
    contexts: [{ name: 'proxy', context: { cluster: 'proxy', user: 'proxy' } }],
    'current-context': 'proxy',
  }));
  return {
    kubeconfig,
    async restart(reject) {
      await stop();
      await start(reject);
    },
    stop,
  };
}

const logged = (replica: ServeProcess, msg: string) => replica.logs().filter((line) => line.msg === msg);
const firstTime = (replica: ServeProcess, msg: string) => Number(logged(replica, msg)[0]?.time);

async function leaderGauge(replica: ServeProcess): Promise<number | undefined> {
  const response = await fetch(`${replica.url}/metrics`);
  const match = /^sidecar_terminator_leader (\S+)$/m.exec(await response.text());
  return match ? Number(match[1]) : undefined;
}

const goodJob = (name: string) => jobYaml(name, { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers: [main(), killSidecar()] });

t.test('discovery fails as the replica wins the Lease: it retries, finds the kill mechanism anew, and works', async (t) => {
  const proxy = await kubectlProxy(cp, DISCOVERY);
  t.teardown(() => proxy.stop());
  const args = ['--kubeconfig', proxy.kubeconfig, '--namespace', addonNamespace, '--leader-elect', '--leader-election-lease', 'recovering', '--leader-election-duration', '6s', '--leader-start-timeout', '2m'];
  const replica = await startWatcherProcess(args, { waitReady: false });
  t.teardown(() => replica.stop());

  await waitFor('the start to fail twice', () => logged(replica, 'failed to start after becoming leader; retrying').length >= 2, { timeoutMs: 60_000 });
  const [failure] = logged(replica, 'failed to start after becoming leader; retrying');
  t.match(failure, { level: 50, attempt: 1, retryInMs: 1000 }, 'an error, retried after a second');
  const lease = await leases.readNamespacedLease({ name: 'recovering', namespace: addonNamespace });
  t.equal(lease.spec?.holderIdentity, logged(replica, 'became leader')[0]?.identity, 'it holds the Lease meanwhile');
  t.equal(await httpStatus(`${replica.url}/readyz`), 503, '/readyz: a leader that does not work is not ready');
  t.equal(await leaderGauge(replica), 0, 'sidecar_terminator_leader 0: its watcher does not run');

  // Kruise is installed meanwhile, and discovery answers again.
  await installCrrCrd(cp);
  await proxy.restart();
  const started = await waitFor('the watcher to start', () => logged(replica, 'watcher starting')[0], { timeoutMs: 60_000 });
  t.equal(started.killMechanism, 'crr', 'the kill mechanism was discovered anew: ContainerRecreateRequests, served now');
  await waitFor('/readyz to answer 200', async () => (await httpStatus(`${replica.url}/readyz`)) === 200);
  t.equal(await leaderGauge(replica), 1, 'sidecar_terminator_leader 1');
  const fromFailureMs = firstTime(replica, 'watcher starting') - Number(failure?.time);
  t.comment(`from the first failed start to a working leader: ${fromFailureMs} ms, ${logged(replica, 'failed to start after becoming leader; retrying').length} failed attempts (discovery refused until the proxy let it through)`);
  t.ok(logged(replica, 'started after becoming leader, at a retry').length === 1, 'it says it started at a retry');

  const namespace = await cp.createNamespace();
  t.equal((await cp.kubectl(['apply', '-f', '-'], { namespace, input: goodJob('after-recovery') })).code, 0);
  await waitForJob({ core, batch }, namespace, 'after-recovery', 'Complete');
  t.ok(logged(replica, 'stopping sidecars').some((line) => String(line.pod).startsWith(`${namespace}/`)), 'the recovered leader stopped the sidecars');
  await expectJobStoppedBy(t, { core, batch, custom }, namespace, 'after-recovery', { proxy: 'crr' });
});

t.test('discovery keeps failing for the leader: it releases the Lease after --leader-start-timeout, and another replica takes over', async (t) => {
  const proxy = await kubectlProxy(cp, DISCOVERY);
  t.teardown(() => proxy.stop());
  const common = ['--namespace', addonNamespace, '--leader-elect', '--leader-election-lease', 'handover', '--leader-election-duration', '6s', '--leader-start-timeout', '5s'];
  const cutOff = await startWatcherProcess(['--kubeconfig', proxy.kubeconfig, ...common], { waitReady: false });
  t.teardown(() => cutOff.stop());
  await waitFor('the first replica to lead and fail', () => logged(cutOff, 'failed to start after becoming leader; retrying')[0], { timeoutMs: 60_000 });
  const healthy = await startWatcherProcess(['--kubeconfig', cp.kubeconfigPath, ...common]);
  t.teardown(() => healthy.stop());

  const gaveUp = await waitFor('the first replica to give the Lease up', () => logged(cutOff, 'could not start after becoming leader; releasing the Lease for another replica')[0], { timeoutMs: 60_000 });
  // Whether the second replica was up before that depends on how fast it starts (a loaded machine
  // can take the whole --leader-start-timeout): what must hold is that it led only after.
  const led = await waitFor('the second replica to lead', () => logged(healthy, 'became leader')[0], { timeoutMs: 60_000 });
  t.ok(Number(led.time) >= Number(gaveUp.time), `the second replica led only once the first gave the Lease up (${Number(led.time) - Number(gaveUp.time)} ms after; its first log line came ${Number(healthy.logs()[0]?.time) < Number(gaveUp.time) ? 'before: it waited on standby' : 'after: it started too late to wait'})`);
  t.match(gaveUp, { level: 50, standBackMs: 6000 }, 'an error, saying how long it stands back');
  t.ok(Number(gaveUp.failingForMs) <= 5000, `it gave up within --leader-start-timeout (after ${String(gaveUp.failingForMs)} ms of failures)`);
  await waitFor('the second replica to start its watcher', () => logged(healthy, 'watcher starting')[0], { timeoutMs: 60_000 });
  const handoverMs = firstTime(healthy, 'watcher starting') - firstTime(cutOff, 'failed to start after becoming leader; retrying');
  t.comment(`from the first failed start to a working leader on the other replica: ${handoverMs} ms (--leader-start-timeout 5s, retry period ${Math.round(6000 / 7)} ms)`);
  const lease = await leases.readNamespacedLease({ name: 'handover', namespace: addonNamespace });
  t.equal(lease.spec?.holderIdentity, logged(healthy, 'became leader')[0]?.identity, 'the Lease names the replica that works');

  await waitFor('/readyz of the new leader', async () => (await httpStatus(`${healthy.url}/readyz`)) === 200);
  t.equal(await leaderGauge(healthy), 1, 'sidecar_terminator_leader: 1 on the replica that acts');
  t.equal(await leaderGauge(cutOff), 0, 'and 0 on the one that gave up');
  t.equal(await httpStatus(`${cutOff.url}/readyz`), 200, 'which is a ready standby again');
  await sleep(7000); // past its stand-back: it campaigns again, and finds the Lease held
  t.equal(logged(cutOff, 'became leader').length, 1, 'it did not take the Lease back from a working leader');

  const namespace = await cp.createNamespace();
  t.equal((await cp.kubectl(['apply', '-f', '-'], { namespace, input: goodJob('after-handover') })).code, 0);
  await waitForJob({ core, batch }, namespace, 'after-handover', 'Complete');
  t.ok(logged(healthy, 'stopping sidecars').some((line) => String(line.pod).startsWith(`${namespace}/`)), 'the new leader stopped the sidecars');
  // The CRD the test above installed is still served: --kill-mechanism auto chose crr.
  await expectJobStoppedBy(t, { core, batch, custom }, namespace, 'after-handover', { proxy: 'crr' });
});
