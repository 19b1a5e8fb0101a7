// Leader election cannot split, proven with a real fault: the leader's connection to the API
// server goes through a TCP proxy that stops carrying data (a black hole: nothing is closed, the
// bytes wait, as on a network path that died), while a standby runs. The leader's Lease calls
// time out well inside the renew deadline, its term ends at that deadline (its requests in
// progress aborted, its connections reset), and only after the lease duration does the standby
// take over; when the path heals, nothing the old leader had sent arrives any more. The API
// server's audit log, of every write each replica makes (its own client certificate), shows the
// two never acting in the same period, while Jobs keep finishing throughout.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { auditFlags, readAuditLog, type AuditEvent } from '../support/audit.ts';
import { expectStoppedBy } from '../support/endings.ts';
import { simAnnotations } from '../support/kubelet-simulator.ts';
import { httpStatus } from '../support/net.ts';
import { registeringWebhooks, startServe, startWatcherProcess, type ServeProcess } from '../support/serve-process.ts';
import { jobYaml, killSidecar, main } from '../support/pods.ts';
import { actedOnceEach, startCluster } from '../support/stack.ts';
import { startTcpBalancer } from '../support/tcp-balancer.ts';
import { waitFor } from '../support/wait.ts';

const REPLICAS = 'st:replicas';
const LEASE_SECONDS = 6;
const dir = mkdtempSync(join(tmpdir(), 'st-split-brain-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const audit = auditFlags(dir, REPLICAS);
const cluster = await startCluster(t, { sim: { restartDelayMs: 200 }, controlPlane: { apiServerArgs: audit.apiServerArgs } });
const { cp, batch } = cluster;
const addonNamespace = await cp.createNamespace('st-system');

// A webhook labels the Jobs' pods; its requests are not audited.
const webhook = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--namespace', addonNamespace, '--no-watcher', ...registeringWebhooks(port, 'Fail')]);
t.teardown(() => webhook.stop());

/** A kubeconfig for `user` (audited), reaching the API server at `server`. */
async function replicaKubeconfig(user: string, server = cp.serverUrl): Promise<string> {
  const path = await cp.clientKubeconfig(user, ['system:masters', REPLICAS]);
  const config = JSON.parse(readFileSync(path, 'utf8')) as { clusters: Array<{ cluster: { server: string } }> };
  config.clusters[0]!.cluster.server = server;
  const rewritten = join(dir, `${user}.kubeconfig`);
  writeFileSync(rewritten, JSON.stringify(config));
  return rewritten;
}

const logTime = (replica: ServeProcess, msg: string) => replica.logs().filter((line) => line.msg === msg).map((line) => Number(line.time));
const actedOn = (replica: ServeProcess) => replica.logs().filter((line) => line.msg === 'stopping sidecars').map((line) => String(line.pod));
/** Microseconds since the epoch of an audit timestamp (RFC 3339 with six fractional digits). */
const micros = (timestamp: string) => Date.parse(`${timestamp.slice(0, 23)}Z`) * 1000 + Number(timestamp.slice(23, 26).padEnd(3, '0'));
const WRITES = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);
const LOST = 'lost leadership: the lease could not be renewed within the renew deadline; stopping before another replica may take over';
/** Whether the replica leads now, by its log: it became leader after its last term ended. */
const leading = (replica: ServeProcess) => Math.max(0, ...logTime(replica, 'became leader')) > Math.max(0, ...logTime(replica, LOST), ...logTime(replica, 'lease released'));

t.test("the leader's path to the API server is black-holed while a standby runs: no two replicas ever act in the same period", async (t) => {
  const namespace = await cp.createNamespace();
  const apiServer = new URL(cp.serverUrl);
  const path = await startTcpBalancer([{ host: apiServer.hostname, port: Number(apiServer.port) }]);
  t.teardown(() => path.stop());
  const args = (kubeconfig: string) => ['--kubeconfig', kubeconfig, '--namespace', addonNamespace, '--leader-elect', '--leader-election-duration', `${LEASE_SECONDS}s`, '--kill-mechanism', 'signal'];
  const leader = await startWatcherProcess(args(await replicaKubeconfig('replica-a', `https://127.0.0.1:${path.port}`)));
  t.teardown(() => leader.stop());
  await waitFor('replica A to lead', () => logTime(leader, 'became leader').length > 0);

  // Jobs whose main containers finish one after the other, half a second apart, for half a minute.
  const jobs = Array.from({ length: 60 }, (_, i) => `job-${i}`);
  const manifests = jobs.map((name, i) => jobYaml(name, { annotations: { [simAnnotations.exitAfter('main')]: `${1 + i * 0.5}s` }, containers: [main(), killSidecar()] }));
  const applied = await cp.kubectl(['apply', '-f', '-'], { namespace, input: manifests.join('\n---\n') });
  t.equal(applied.code, 0, 'the Jobs applied', { stderr: applied.stderr });
  try {
    await waitFor('the leader to act on a few pods', () => actedOn(leader).length >= 5, { timeoutMs: 120_000 });
  } catch (error) {
    // What the pods and the leader were doing, for a run that could not start.
    const pods = (await cluster.core.listNamespacedPod({ namespace })).items;
    const states = pods.map((pod) => `${pod.metadata?.name} ${pod.status?.phase} labels=${JSON.stringify(pod.metadata?.labels ?? {})} ${JSON.stringify(pod.status?.containerStatuses?.map((s) => [s.name, Object.keys(s.state ?? {})[0]]) ?? [])}`);
    t.comment(`${pods.length} pods:\n${states.slice(0, 10).join('\n')}`);
    const failedCreates = (await cluster.core.listNamespacedEvent({ namespace, fieldSelector: 'reason=FailedCreate' })).items.map((e) => `${e.involvedObject.name}: ${e.message}`);
    t.comment(`the Job controller's FailedCreate events (${failedCreates.length}):\n${failedCreates.slice(0, 5).join('\n')}`);
    t.comment(`leader's last log lines:\n${leader.output().split('\n').slice(-30).join('\n')}`);
    throw error;
  }

  // The standby starts only now: until then A is the only replica, so a renewal a loaded machine
  // delays past the renew deadline hands the Lease back to A, not to another replica.
  const standby = await startWatcherProcess(args(await replicaKubeconfig('replica-b')));
  t.teardown(() => standby.stop());
  await waitFor('replica A to lead, the standby started', () => leading(leader));
  path.blackhole();
  const blackholedAt = Date.now();
  t.comment(`black hole after the leader acted on ${actedOn(leader).length} pods`);
  await waitFor('replica B to take over', () => logTime(standby, 'became leader').length > 0, { timeoutMs: 60_000, intervalMs: 100 });
  // Long enough for anything the old leader still had under way to show, had it not been stopped.
  await sleep(Math.max(0, blackholedAt + 4 * LEASE_SECONDS * 1000 - Date.now()));
  path.heal();
  const healedAt = Date.now();

  await waitFor('every Job to complete', async () => {
    const list = (await batch.listNamespacedJob({ namespace })).items;
    return list.filter((job) => job.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True')).length === jobs.length;
  }, { timeoutMs: 180_000, intervalMs: 1000 });
  await sleep(2000); // what the healed path would still carry

  // Each replica's terms, as its log says them (a busy machine may end one early and hand the Lease back later).
  const terms = (replica: ServeProcess) => {
    const starts = logTime(replica, 'became leader');
    const ends = [...logTime(replica, LOST), ...logTime(replica, 'lease released')].sort((a, b) => a - b);
    return starts.map((start) => ({ start, end: ends.find((end) => end >= start) ?? Infinity }));
  };
  const [termsOfA, termsOfB] = [terms(leader), terms(standby)];
  // A's term under way when the path died (or its last one before, if the machine ended it earlier).
  const lost = termsOfA.filter((term) => term.start <= blackholedAt).at(-1)?.end;
  const [tookOver] = logTime(standby, 'became leader');
  t.ok(lost !== undefined && Number.isFinite(lost) && logTime(leader, LOST).includes(lost), 'A saw it could not renew, and ended its term');
  t.ok(lost! - blackholedAt < LEASE_SECONDS * 1000, `within the lease duration of the black hole (${lost! - blackholedAt} ms)`);
  t.ok(tookOver! - lost! > 0, `B took over ${tookOver! - lost!} ms after A stopped`);

  // Every write of either replica, as the API server received it; the Lease is the election itself.
  const writes = (events: AuditEvent[], user: string) =>
    events.filter((event) => event.user?.username === user && WRITES.has(event.verb) && event.objectRef?.resource !== 'leases').map((event) => micros(event.requestReceivedTimestamp!));
  const events = readAuditLog(audit.logPath);
  const [byA, byB] = [writes(events, 'replica-a'), writes(events, 'replica-b')];
  t.ok(byA.length > 0 && byB.length > 0, `both acted: A ${byA.length} writes, B ${byB.length}`);
  // A's writes up to the black hole's term: those before it led again, if a busy machine handed the Lease back later.
  const aLedAgainAt = termsOfA.find((term) => term.start > blackholedAt)?.start ?? Infinity;
  const lastA = Math.max(...byA.filter((at) => at / 1000 < aLedAgainAt));
  const firstB = Math.min(...byB);
  t.ok(lastA < firstB, `A's last write was received ${((firstB - lastA) / 1000).toFixed(0)} ms before B's first`);
  t.ok(lastA / 1000 < blackholedAt + 1000, "no write of A's arrived after the black hole began, healed or not");
  t.comment(`black hole ${healedAt - blackholedAt} ms; A stopped ${lost! - blackholedAt} ms in, B led ${tookOver! - blackholedAt} ms in; writes: A ${byA.length}, B ${byB.length}`);

  // Whatever happened later (a busy machine may hand the Lease over again): each replica wrote
  // only within its own terms, and no two terms overlap.
  t.ok(termsOfA.every((a) => termsOfB.every((b) => a.end <= b.start || b.end <= a.start)), `no two terms overlap: A ${JSON.stringify(termsOfA)}, B ${JSON.stringify(termsOfB)}`);
  // A request sent within its term reaches the API server a moment later.
  const withinTerms = (writes: number[], own: Array<{ start: number; end: number }>) => writes.filter((at) => !own.some((term) => at / 1000 >= term.start && at / 1000 <= term.end + 1000));
  t.same(withinTerms(byA, termsOfA), [], "every write of A's was received within one of its terms");
  t.same(withinTerms(byB, termsOfB), [], "every write of B's within one of its terms");

  const pods = await actedOnceEach(t, cluster, namespace);
  // Who gave each pod its signal container, as the API server recorded it: a write of A's may have
  // been received with its answer lost in the black hole, so A's log need not say it.
  const signalledBy = new Map(
    events
      .filter((event) => event.objectRef?.namespace === namespace && event.objectRef.subresource === 'ephemeralcontainers' && WRITES.has(event.verb) && (event.responseStatus?.code ?? 0) < 300)
      .map((event) => [event.objectRef!.name!, event.user?.username]),
  );
  t.same(pods.map((pod) => pod.metadata!.name!).filter((name) => !['replica-a', 'replica-b'].includes(signalledBy.get(name) ?? '')), [], 'every pod was signalled by one replica or the other');
  for (const pod of pods) await expectStoppedBy(t, cluster, pod, { proxy: 'signal' });
  t.equal(await httpStatus(`${leader.url}/readyz`), 200, 'A, back on a healed path, is ready (a standby, or leading again once B could not renew)');
});
