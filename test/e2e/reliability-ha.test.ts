// High availability. Watcher replicas elect a leader on a Lease: exactly one acts, a leader
// killed outright is replaced once its lease runs out, a leader stopped gracefully hands the
// lease over at once, and no pod is acted on twice. Webhook replicas share the certificate
// Secret behind a round-robin TCP proxy (standing for the Service): one replica killed,
// admission goes on through the other.
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { MANAGED_LABEL } from '../../src/policy/index.ts';
import { expectStoppedBy } from '../support/endings.ts';
import { simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { httpStatus } from '../support/net.ts';
import { registeringWebhooks, servedCertificate, startServe, startWatcherProcess, type ServeProcess } from '../support/serve-process.ts';
import { actedOnceEach, startCluster, tryApply, waitForJobsComplete, waitForWebhooksInEffect } from '../support/stack.ts';
import { jobYaml, killSidecar, main, sidecarMarked } from '../support/pods.ts';
import { startTcpBalancer } from '../support/tcp-balancer.ts';

const { cp, core, batch, custom } = await startCluster(t, { sim: { restartDelayMs: 200 } });
const leases = cp.kubeConfig.makeApiClient(CoordinationV1Api);
const addonNamespace = await cp.createNamespace('st-system');

const goodJob = (name: string, exitAfter = '1s') => jobYaml(name, { annotations: { [simAnnotations.exitAfter('main')]: exitAfter }, containers: [main(), killSidecar()] });
const badJob = (name: string) => jobYaml(name, { containers: [main(), sidecarMarked('yes')] });
const apply = (namespace: string, yaml: string) => tryApply(cp, namespace, yaml);

// One webhook (failurePolicy Fail) labels the pods for the watcher tests.
const watcherTestsWebhook = await startServe((port) => [
  '--kubeconfig', cp.kubeconfigPath, '--namespace', addonNamespace, '--tls-secret', 'ha-watcher-tls', '--no-watcher',
  ...registeringWebhooks(port, 'Fail', 'ha-watcher'),
]);
t.teardown(() => watcherTestsWebhook.stop());
await waitForWebhooksInEffect(cp, await cp.createNamespace());

const becameLeader = (replica: ServeProcess) => replica.logs().find((line) => line.msg === 'became leader');
const actedOn = (replica: ServeProcess) => replica.logs().filter((line) => line.msg === 'stopping sidecars').map((line) => String(line.pod));

/** The named Jobs of the namespace complete (others there not counted): a burst of them may take minutes. */
const waitForJobs = (t: Test, namespace: string, names: string[]) => waitForJobsComplete(t, { core, batch }, namespace, names, undefined, 180_000);

t.test('two watcher replicas: one leads, a killed leader is replaced, no pod is acted on twice', async (t) => {
  const namespace = await cp.createNamespace();
  const replicaArgs = ['--kubeconfig', cp.kubeconfigPath, '--namespace', addonNamespace, '--leader-elect', '--leader-election-duration', '5s', '--kill-mechanism', 'signal'];
  const replicas = await Promise.all([startWatcherProcess(replicaArgs), startWatcherProcess(replicaArgs)]);
  t.teardown(() => Promise.all(replicas.map((replica) => replica.stop())));
  const leader = await waitFor('a leader', () => replicas.find(becameLeader));
  const standby = replicas.find((replica) => replica !== leader)!;
  await sleep(3000); // a few retry periods of the standby
  t.notOk(becameLeader(standby), 'exactly one replica became leader');
  const lease = await leases.readNamespacedLease({ namespace: addonNamespace, name: 'sidecar-terminator-watcher' });
  t.equal(lease.spec?.holderIdentity, becameLeader(leader)?.identity, 'the Lease names the leader');

  const first = Array.from({ length: 5 }, (_, i) => `first-${i}`);
  for (const name of first) t.equal((await apply(namespace, goodJob(name))).code, 0, `${name} applied`);
  await waitForJobs(t, namespace, first);
  t.ok(first.every((name) => actedOn(leader).some((pod) => pod.startsWith(`${namespace}/${name}-`))), 'the leader acted on every pod');
  t.same(actedOn(standby), [], 'the standby did nothing');
  t.notOk(standby.logs().some((line) => line.msg === 'watcher starting'), 'the standby did not even start its watcher');

  // A burst finishing over several seconds; the leader is killed in its middle.
  const burst = Array.from({ length: 20 }, (_, i) => `burst-${i}`);
  t.equal((await apply(namespace, burst.map((name, i) => goodJob(name, `${2 + (i % 8)}s`)).join('\n---\n'))).code, 0, 'the burst applied');
  await waitFor('the leader to act on the burst', () => actedOn(leader).some((pod) => pod.includes('/burst-')), { timeoutMs: 120_000 });
  process.kill(leader.pid, 'SIGKILL');
  await leader.exited;
  t.comment(`leader killed after acting on ${actedOn(leader).filter((pod) => pod.includes('/burst-')).length} of ${burst.length} pods of the burst`);

  const takeover = await waitFor('the standby to take over', () => becameLeader(standby), { timeoutMs: 60_000 });
  t.not(takeover.identity, becameLeader(leader)?.identity, 'the standby became leader under its own identity');
  const after = Array.from({ length: 5 }, (_, i) => `after-${i}`);
  for (const name of after) t.equal((await apply(namespace, goodJob(name))).code, 0, `${name} applied`);
  await waitForJobs(t, namespace, [...burst, ...after]);
  const byNewLeader = actedOn(standby);
  t.ok(after.every((name) => byNewLeader.some((pod) => pod.startsWith(`${namespace}/${name}-`))), 'the new leader acted on the Jobs created after the takeover');

  const pods = await actedOnceEach(t, { core }, namespace);
  t.equal(pods.length, first.length + burst.length + after.length, 'one pod per Job');
  t.same(pods.filter((pod) => pod.status?.phase !== 'Succeeded').map((pod) => pod.metadata?.name), [], 'every pod succeeded');
  for (const pod of pods) await expectStoppedBy(t, { core, batch, custom }, pod, { proxy: 'signal' });
  const leaseNow = await leases.readNamespacedLease({ namespace: addonNamespace, name: 'sidecar-terminator-watcher' });
  t.equal(leaseNow.spec?.holderIdentity, takeover.identity, 'the Lease names the new leader');
  t.ok((leaseNow.spec?.leaseTransitions ?? 0) >= 1, 'one more lease transition');
});

t.test('a leader stopped with SIGTERM releases the lease and the other replica takes over before it would expire', async (t) => {
  const namespace = await cp.createNamespace();
  // A lease of 90 s: a takeover well within that can only come from the release.
  const replicaArgs = ['--kubeconfig', cp.kubeconfigPath, '--namespace', addonNamespace, '--leader-elect', '--leader-election-lease', 'graceful', '--leader-election-duration', '90s', '--kill-mechanism', 'signal'];
  const replicas = await Promise.all([startWatcherProcess(replicaArgs), startWatcherProcess(replicaArgs)]);
  t.teardown(() => Promise.all(replicas.map((replica) => replica.stop())));
  const leader = await waitFor('a leader', () => replicas.find(becameLeader));
  const standby = replicas.find((replica) => replica !== leader)!;
  t.equal((await apply(namespace, goodJob('before'))).code, 0, 'applied');
  await waitForJobs(t, namespace, ['before']);

  const held = await leases.readNamespacedLease({ namespace: addonNamespace, name: 'graceful' });
  const exit = await leader.stop();
  t.same(exit, { code: 0, signal: null }, 'the leader exits 0');
  t.ok(leader.logs().some((line) => line.msg === 'lease released'), 'it logged the release');
  const released = await leases.readNamespacedLease({ namespace: addonNamespace, name: 'graceful' });
  t.not(released.spec?.holderIdentity, becameLeader(leader)?.identity, 'the Lease no longer names it');

  const takeover = await waitFor('the standby to take over', () => becameLeader(standby), { timeoutMs: 45_000, intervalMs: 250 });
  const taken = await leases.readNamespacedLease({ namespace: addonNamespace, name: 'graceful' });
  t.equal(taken.spec?.holderIdentity, takeover.identity, 'the Lease names the standby');
  // The API server's own timestamps: the old lease would have run until its last renewal plus 90 s.
  const expiry = new Date(held.spec!.renewTime!).getTime() + 90_000;
  t.ok(new Date(taken.spec!.acquireTime!).getTime() < expiry, 'the standby acquired the Lease before the released one would have expired');
  t.equal((await apply(namespace, goodJob('after'))).code, 0, 'applied');
  await waitForJobs(t, namespace, ['after']);
  t.ok(actedOn(standby).some((pod) => pod.startsWith(`${namespace}/after-`)), 'the new leader acts');
  for (const pod of await actedOnceEach(t, { core }, namespace)) await expectStoppedBy(t, { core, batch, custom }, pod, { proxy: 'signal' });
});

t.test('two webhook replicas sharing the certificate Secret behind a round-robin proxy: one killed, admission goes on', async (t) => {
  // The watcher tests' webhook goes first, so that only the replicas below can answer.
  await watcherTestsWebhook.stop();
  const deleted = await cp.kubectl(['delete', 'mutatingwebhookconfiguration,validatingwebhookconfiguration', 'ha-watcher']);
  t.equal(deleted.code, 0, 'the other webhook configurations are gone', { stderr: deleted.stderr });

  const namespace = await cp.createNamespace();
  const balancer = await startTcpBalancer();
  t.teardown(() => balancer.stop());
  const replicaArgs = ['--kubeconfig', cp.kubeconfigPath, '--namespace', addonNamespace, '--tls-secret', 'ha-webhook-tls', '--no-watcher', '--webhook-config-name', 'ha-webhook'];
  // The first replica registers the webhooks at the proxy's address; the second only serves.
  const a = await startServe([...replicaArgs, ...registeringWebhooks(balancer.port, 'Fail')]);
  const b = await startServe(replicaArgs);
  const replicas = [a, b];
  t.teardown(() => Promise.all(replicas.map((replica) => replica.stop())));
  for (const replica of replicas) balancer.add({ host: '127.0.0.1', port: replica.port });
  t.equal((await servedCertificate(a.port)).serialNumber, (await servedCertificate(b.port)).serialNumber, 'both replicas serve the certificate of the Secret');
  await waitForWebhooksInEffect(cp, namespace);

  const decisions = (replica: ServeProcess) => replica.logs().filter((line) => line.msg === 'admission decision').length;
  // Several rounds, so both replicas get connections.
  for (let i = 0; i < 4; i++) {
    const denied = await apply(namespace, badJob(`bad-before-${i}`));
    t.match(denied.stderr, /denied the request: .*Invalid value: "yes"/, `bad Job ${i} denied`);
  }
  t.comment(`decisions before the kill: A ${decisions(a)}, B ${decisions(b)}; proxy ${JSON.stringify(balancer.stats())}`);

  // Kill the replica that answered last: it holds the API server's kept-alive connection.
  const lastTime = (replica: ServeProcess) => Math.max(0, ...replica.logs().filter((line) => line.msg === 'admission decision').map((line) => Number(line.time)));
  const [victim, survivor] = lastTime(a) >= lastTime(b) ? [a, b] : [b, a];
  process.kill(victim.pid, 'SIGKILL');
  await victim.exited;
  const survivorBefore = decisions(survivor);

  for (let i = 0; i < 4; i++) {
    const denied = await apply(namespace, badJob(`bad-after-${i}`));
    t.match(denied.stderr, /denied the request: .*Invalid value: "yes"/, `bad Job ${i} still denied`);
    t.notMatch(denied.stderr, /failed calling webhook/, 'not a webhook failure');
  }
  t.equal((await apply(namespace, goodJob('good-after'))).code, 0, 'a good Job is admitted');
  const pod = await waitFor('the pod of good-after', async () => (await core.listNamespacedPod({ namespace, labelSelector: 'job-name=good-after' })).items[0]);
  t.equal(pod.metadata?.labels?.[MANAGED_LABEL], 'true', 'its pod is labelled');
  t.ok(decisions(survivor) >= survivorBefore + 6, `the surviving replica answered them (${decisions(survivor) - survivorBefore} decisions)`);
  t.same((await batch.listNamespacedJob({ namespace })).items.map((job) => job.metadata?.name), ['good-after'], 'no bad Job slipped through');

  // New connections through the proxy, as a fresh API server would open: round robin offers
  // the dead replica in turn, and the proxy skips it (refused, then left out for a while).
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push(await httpStatus(`https://127.0.0.1:${balancer.port}/readyz`));
  t.same(statuses, [200, 200, 200, 200], 'every new connection through the proxy reaches the surviving replica');
  t.ok(balancer.stats().refused >= 1, 'the proxy skipped the dead replica after it refused a connection');
  t.comment(`proxy: ${JSON.stringify(balancer.stats())}`);
});
