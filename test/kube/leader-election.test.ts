// Leader election on a Lease (src/kube/leader-election.ts), against a small in-process HTTP server
// that keeps Leases as the API server does (a resourceVersion per write, 409 on a stale one):
// the first replica creates the lease and leads; another waits until the lease has stood still for
// its duration, then takes it over; a leader that cannot renew no longer leads from its renew
// deadline; stop() and release() hand the lease on at once. The end-to-end suite runs it on a real
// API server (test/e2e/reliability-ha.test.ts).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { LeaderElector, type LeaderElectionOptions } from '../../src/kube/leader-election.ts';
import { capturingLogger } from '../support/logger.ts';
import { waitFor } from '../support/wait.ts';

const LEASES = '/apis/coordination.k8s.io/v1/namespaces/ns/leases';

/** Polls often: the terms here last a few hundred milliseconds. */
const until = (what: string, probe: () => boolean, timeoutMs: number) => waitFor(what, probe, { timeoutMs, intervalMs: 10 });

/** The Leases of namespace ns over HTTP; `failing` answers every request with a 500. */
async function leaseServer(t: Test) {
  const leases = new Map<string, V1Lease>();
  let version = 0;
  const state = { failing: false, requests: 0 };
  const send = (response: ServerResponse, code: number, body: object) => {
    response.writeHead(code, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  };
  const status = (response: ServerResponse, code: number, reason: string) => send(response, code, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, code });
  const stored = (lease: V1Lease) => {
    const kept = { ...lease, apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { ...lease.metadata, resourceVersion: String(++version) } };
    leases.set(kept.metadata.name!, kept);
    return kept;
  };
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    state.requests++;
    let text = '';
    for await (const chunk of request) text += chunk;
    if (state.failing) return status(response, 500, 'InternalError');
    const name = request.url?.startsWith(`${LEASES}/`) ? decodeURIComponent(request.url.slice(LEASES.length + 1).split('?')[0]!) : undefined;
    const existing = name ? leases.get(name) : undefined;
    if (request.method === 'GET') return existing ? send(response, 200, existing) : status(response, 404, 'NotFound');
    const body = JSON.parse(text) as V1Lease;
    if (request.method === 'POST') return leases.has(body.metadata!.name!) ? status(response, 409, 'AlreadyExists') : send(response, 201, stored(body));
    if (request.method === 'PUT') {
      if (!existing) return status(response, 404, 'NotFound');
      if (body.metadata?.resourceVersion !== existing.metadata?.resourceVersion) return status(response, 409, 'Conflict');
      return send(response, 200, stored(body));
    }
    return status(response, 405, 'MethodNotAllowed');
  };
  const server = createServer((request, response) => void handle(request, response));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'test', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'test' }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test' }],
    currentContext: 'test',
  });
  return { kubeConfig, leases, state };
}

/** A replica campaigning for lease `lease`, with what it told its caller. */
function replica(t: Test, kubeConfig: KubeConfig, identity: string, options: Partial<LeaderElectionOptions> = {}) {
  const { logger, lines } = capturingLogger();
  const elector = new LeaderElector({ kubeConfig, namespace: 'ns', name: 'lease', identity, leaseDurationMs: 1000, renewDeadlineMs: 400, retryPeriodMs: 50, logger, ...options });
  const told: string[] = [];
  elector.run(() => told.push('started'), () => told.push('stopped'));
  t.teardown(() => elector.stop());
  return { elector, told, lines };
}

t.test('the first replica creates the lease and leads; it renews it while the other waits', async (t) => {
  const { kubeConfig, leases } = await leaseServer(t);
  const first = replica(t, kubeConfig, 'replica-a');
  await until('replica-a leads', () => first.elector.isLeader(), 5000);
  t.same(first.told, ['started']);
  t.match(leases.get('lease')?.spec, { holderIdentity: 'replica-a', leaseDurationSeconds: 1, leaseTransitions: 0 });
  const second = replica(t, kubeConfig, 'replica-b');
  const renewedFrom = leases.get('lease')!.metadata!.resourceVersion;
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.not(leases.get('lease')!.metadata!.resourceVersion, renewedFrom, 'renewed meanwhile');
  t.equal(leases.get('lease')?.spec?.holderIdentity, 'replica-a');
  t.notOk(second.elector.isLeader(), 'the other does not lead');
  t.same(second.told, []);
});

t.test('stop() hands the lease on: the other replica takes it over at once, one transition later', async (t) => {
  const { kubeConfig, leases } = await leaseServer(t);
  const first = replica(t, kubeConfig, 'replica-a');
  await until('replica-a leads', () => first.elector.isLeader(), 5000);
  const second = replica(t, kubeConfig, 'replica-b');
  await first.elector.stop();
  t.notOk(first.elector.isLeader());
  t.ok(first.lines.some((line) => line.message === 'lease released'));
  await until('replica-b leads', () => second.elector.isLeader(), 900);
  t.match(leases.get('lease')?.spec, { holderIdentity: 'replica-b', leaseTransitions: 1 });
  t.same(first.told, ['started'], 'stop() calls no onStopped: the caller knows');
});

t.test('a leader gone without a word: the other takes over once the lease has stood still for its duration', async (t) => {
  const { kubeConfig, leases } = await leaseServer(t);
  leases.set('lease', { metadata: { name: 'lease', namespace: 'ns', resourceVersion: '1' }, spec: { holderIdentity: 'gone', leaseDurationSeconds: 1, renewTime: new Date(), leaseTransitions: 3 } });
  const started = Date.now();
  const next = replica(t, kubeConfig, 'replica-b');
  await until('replica-b leads', () => next.elector.isLeader(), 5000);
  t.ok(Date.now() - started >= 1000, `not before the lease duration (${Date.now() - started} ms)`);
  t.match(leases.get('lease')?.spec, { holderIdentity: 'replica-b', leaseTransitions: 4 });
});

t.test('a leader that cannot renew no longer leads from its renew deadline, before the lease expires for others', async (t) => {
  const { kubeConfig, state } = await leaseServer(t);
  const leader = replica(t, kubeConfig, 'replica-a', { leaseDurationMs: 2000 });
  await until('replica-a leads', () => leader.elector.isLeader(), 5000);
  state.failing = true;
  await until('replica-a no longer leads', () => !leader.elector.isLeader(), 5000);
  // The timer that ends the term may fire a moment early by Date.now(): it is armed again, and the term ends.
  await until('replica-a is told it stopped leading', () => leader.told.includes('stopped'), 10_000);
  t.same(leader.told, ['started', 'stopped'], 'onStopped, once');
  t.ok(leader.lines.some((line) => line.message.startsWith('lost leadership: the lease could not be renewed within the renew deadline')), 'said in the log');
  t.ok(leader.lines.some((line) => line.message === 'lease update failed'), 'each failed renewal logged');
});

t.test('release(): the lease given up and no campaign while standing back; then leading again', async (t) => {
  const { kubeConfig, leases } = await leaseServer(t);
  const leader = replica(t, kubeConfig, 'replica-a');
  await until('replica-a leads', () => leader.elector.isLeader(), 5000);
  await leader.elector.release(2000);
  t.notOk(leader.elector.isLeader());
  t.match(leases.get('lease')?.spec, { holderIdentity: '', leaseDurationSeconds: 1 });
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.equal(leases.get('lease')?.spec?.holderIdentity, '', 'not taken again while standing back');
  await until('replica-a leads', () => leader.elector.isLeader(), 5000);
  t.equal(leases.get('lease')?.spec?.holderIdentity, 'replica-a', 'campaigning again afterwards');
  t.same(leader.told, ['started', 'started'], 'onStopped is not called by release()');
});
