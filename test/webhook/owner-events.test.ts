// The events on the owners of objects admitted despite errors: in the background, once per owner
// and problem, bounded in time and in number, and only about an owner read back by name and uid.
// Against a local HTTP server that answers like the API server's Job, CronJob and event endpoints
// (200, 404; 201, 409) or not at all; test/e2e/webhook-controllers.test.ts checks the events a
// real API server records, test/e2e/forged-reviews.test.ts what a forged review gets there.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BatchV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import t from 'tap';
import { OWNER_EVENT_REASON } from '../../src/policy/index.ts';
import type { OwnerNotice } from '../../src/webhook/admission.ts';
import { OwnerEventRecorder, ownerEventMessage } from '../../src/webhook/owner-events.ts';

type Behaviour = 'created' | 'conflict' | 'invalid' | 'silent';

/**
 * An HTTP server for POST /api/v1/namespaces/NS/events, and GET of the Jobs and CronJobs in
 * `owners` (by namespace/name, answering their uid; 404 for any other); returns the events it
 * received and the owners read.
 */
async function eventEndpoint(t: { teardown(fn: () => unknown): void }, behaviour: () => Behaviour, owners: Record<string, string> = OWNER_UIDS) {
  const received: Array<{ path: string; body: any }> = [];
  const reads: string[] = [];
  const waiting: ServerResponse[] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let text = '';
    request.on('data', (chunk) => (text += chunk));
    request.on('end', () => {
      const owner = /^\/apis\/batch\/v1\/namespaces\/([^/]+)\/(jobs|cronjobs)\/([^/?]+)$/.exec(request.url ?? '');
      if (request.method === 'GET' && owner) {
        const [, namespace, plural, name] = owner as unknown as [string, string, string, string];
        reads.push(`${plural}/${namespace}/${name}`);
        const uid = owners[`${plural}/${namespace}/${name}`];
        response.writeHead(uid ? 200 : 404, { 'content-type': 'application/json' });
        const kind = plural === 'jobs' ? 'Job' : 'CronJob';
        return void response.end(JSON.stringify(uid ? { apiVersion: 'batch/v1', kind, metadata: { name, namespace, uid } } : { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 404, reason: 'NotFound' }));
      }
      received.push({ path: request.url ?? '', body: JSON.parse(text) });
      const mode = behaviour();
      if (mode === 'silent') return void waiting.push(response);
      const status = { created: 201, conflict: 409, invalid: 422 }[mode];
      const refusal = { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: status, reason: mode === 'conflict' ? 'AlreadyExists' : 'Invalid', message: `quoting the event: ${text}`.repeat(100) };
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(mode === 'created' ? JSON.parse(text) : refusal));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const response of waiting) response.destroy();
    server.closeAllConnections();
    server.close();
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    // Plain HTTP: client-node allows it only with skipTLSVerify.
    clusters: [{ name: 'local', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'test' }],
    contexts: [{ name: 'c', cluster: 'local', user: 'u' }],
    currentContext: 'c',
  });
  return { apis: { core: kubeConfig.makeApiClient(CoreV1Api), batch: kubeConfig.makeApiClient(BatchV1Api) }, received, reads };
}

type Apis = { core: CoreV1Api; batch: BatchV1Api };

function recorder({ core, batch }: Apis, options: { timeoutMs?: number; maxInFlight?: number; ratePerSecond?: number; burst?: number; excludedNamespaces?: string[] } = {}) {
  const metrics = new Registry();
  const warnings: Array<Record<string, unknown>> = [];
  const events = new OwnerEventRecorder({ core, batch, metrics, logger: { warn: (object) => warnings.push(object as Record<string, unknown>) }, ...options });
  const counts = async () => Object.fromEntries((await metrics.getSingleMetric('sidecar_terminator_admission_owner_events_total')!.get()).values.map((v) => [v.labels.result, v.value]));
  return { events, warnings, counts };
}

const notice = (owner = 'nightly-29120', errors = ['spec.containers[1].env[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE]: Invalid value: the quick-exit image is the sidecar\'s own image']): OwnerNotice => ({
  namespace: 'batch',
  owner: { apiVersion: 'batch/v1', kind: 'Job', name: owner, uid: `uid-${owner}` },
  kind: 'Pod',
  errors,
  errorCount: errors.length,
});

/** The Jobs the fake API server has: the owners the notices above name, with the uid they claim. */
const OWNER_UIDS = Object.fromEntries(['nightly-29120', 'nightly-29121', 'a', 'b', 'c', ...Array.from({ length: 10 }, (_, i) => `job-${i}`)].map((name) => [`jobs/batch/${name}`, `uid-${name}`]));

t.test('written in the background, on the owner, once per owner and problem', async (t) => {
  const { apis, received } = await eventEndpoint(t, () => 'created');
  const { events, counts } = recorder(apis);
  events.record(notice());
  t.equal(received.length, 0, 'record() returns before anything is sent');
  await events.idle();
  t.equal(received.length, 1);
  const [{ path, body }] = received as [{ path: string; body: any }];
  t.equal(path, '/api/v1/namespaces/batch/events');
  t.match(body, {
    metadata: { name: /^nightly-29120\.[0-9a-f]{16}$/, namespace: 'batch' },
    involvedObject: { apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-29120', uid: 'uid-nightly-29120', namespace: 'batch' },
    type: 'Warning',
    reason: OWNER_EVENT_REASON,
    message: ownerEventMessage(notice()),
    source: { component: 'sidecar-terminator' },
  });
  t.match(body.message, /^A Pod created by this Job was admitted with 1 sidecar configuration error, .*own image\. It was not denied because this Job created it .*Fix the pod template it was created from\.$/);

  // The next pod of the same Job, with the same problem: nothing sent.
  events.record(notice());
  await events.idle();
  t.equal(received.length, 1, 'a sibling with the same problem: no second event');
  events.record(notice('nightly-29121'));
  events.record(notice('nightly-29120', ['another error']));
  await events.idle();
  t.equal(received.length, 3, 'another owner, or another problem: an event each');
  t.same(await counts(), { created: 3, duplicate: 1, dropped: 0, unverified: 0, error: 0 });
});

t.test('an event another replica wrote already (409) is a duplicate, not an error', async (t) => {
  const { apis } = await eventEndpoint(t, () => 'conflict');
  const { events, counts, warnings } = recorder(apis);
  events.record(notice());
  await events.idle();
  t.same(await counts(), { created: 0, duplicate: 1, dropped: 0, unverified: 0, error: 0 });
  t.same(warnings, []);
});

t.test('bounded: a write with no answer is abandoned after the timeout, and too many at once are dropped', async (t) => {
  let mode: Behaviour = 'silent';
  const { apis, received } = await eventEndpoint(t, () => mode);
  const { events, counts, warnings } = recorder(apis, { timeoutMs: 300, maxInFlight: 2 });
  events.record(notice('a'));
  events.record(notice('b'));
  events.record(notice('c'));
  await events.idle();
  t.equal(received.length, 2, 'two sent, the third dropped');
  t.same(await counts(), { created: 0, duplicate: 0, dropped: 1, unverified: 0, error: 2 });
  t.match(warnings, [{ owner: 'Job/a', error: 'no answer within 300 ms' }, { owner: 'Job/b', error: 'no answer within 300 ms' }]);

  mode = 'created';
  events.record(notice('a'));
  await events.idle();
  t.equal(received.length, 3, 'a failed write is not remembered: the next object with the problem tries again');
  t.equal((await counts()).created, 1);
});

t.test('bounded in rate, and never sent with names the API server refuses: what a caller other than the API server can make it write', async (t) => {
  const { apis, received } = await eventEndpoint(t, () => 'created');
  const { events, counts, warnings } = recorder(apis, { ratePerSecond: 0.001, burst: 3 });
  for (let index = 0; index < 10; index++) events.record(notice(`job-${index}`));
  events.record({ ...notice(), owner: { ...notice().owner, name: 'x'.repeat(100_000) } });
  events.record({ ...notice(), namespace: 'Not A Namespace' });
  await events.idle();
  t.equal(received.length, 3, 'a burst of 3, then nothing until the bucket refills');
  t.same(await counts(), { created: 3, duplicate: 0, dropped: 9, unverified: 0, error: 0 });
  t.same(warnings, []);
});

t.test('a refused write is logged in a few words, whatever the API server quoted', async (t) => {
  const { apis } = await eventEndpoint(t, () => 'invalid');
  const { events, warnings, counts } = recorder(apis);
  events.record(notice());
  await events.idle();
  t.same(warnings, [{ namespace: 'batch', owner: 'Job/nightly-29120', event: warnings[0]?.event, error: 'the API server answered 422' }]);
  t.equal((await counts()).error, 1);
});

t.test('the message stays readable when there are many errors', async (t) => {
  const message = ownerEventMessage({ ...notice('n', Array.from({ length: 40 }, (_, i) => `spec.containers[${i}].env[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT]: Invalid value: must be "true" or "false" (any case)`)), errorCount: 4000 });
  t.ok(message.length <= 2048, `${message.length} characters`);
  t.match(message, /\.\.\.$/);
  t.match(message, /^A Pod created by this Job was admitted with 4000 sidecar configuration errors, /);
});

t.test('only about an owner read back: a Job or CronJob of that name and uid, in a namespace the webhooks serve', async (t) => {
  const owners = { 'jobs/batch/real': 'uid-real', 'cronjobs/batch/nightly': 'uid-nightly' };
  const { apis, received, reads } = await eventEndpoint(t, () => 'created', owners);
  const { events, counts, warnings } = recorder(apis, { excludedNamespaces: ['kube-system', 'sidecar-terminator'] });
  const claim = (owner: Partial<OwnerNotice['owner']>, namespace = 'batch'): OwnerNotice => ({ ...notice(), namespace, owner: { apiVersion: 'batch/v1', kind: 'Job', name: 'real', uid: 'uid-real', ...owner } });
  events.record(claim({ name: 'missing', uid: 'uid-missing' }));
  events.record(claim({ uid: 'uid-of-another-job' }));
  events.record(claim({ kind: 'Deployment', apiVersion: 'apps/v1', name: 'coredns' }));
  events.record(claim({ kind: 'Workflow', apiVersion: 'argoproj.io/v1alpha1' }));
  events.record(claim({}, 'kube-system'));
  // The true owner's name and uid, claimed in another namespace or as another kind: not found
  // there, and remembered apart from the true claim, which they cannot hold back.
  events.record(claim({}, 'elsewhere'));
  events.record(claim({ kind: 'CronJob' }));
  await events.idle();
  t.same(received, [], 'no event: a Job that does not exist, one of another uid, kinds the webhook cannot read, an excluded namespace');
  t.same(reads.sort(), ['cronjobs/batch/real', 'jobs/batch/missing', 'jobs/batch/real', 'jobs/elsewhere/real'], 'the Jobs were read; the other kinds and the excluded namespace not even that');
  t.same(await counts(), { created: 0, duplicate: 0, dropped: 1, unverified: 6, error: 0 });
  t.same(warnings, []);

  events.record(claim({}));
  events.record(claim({ kind: 'CronJob', name: 'nightly', uid: 'uid-nightly' }));
  await events.idle();
  t.same(received.map(({ body }) => `${body.involvedObject.kind}/${body.involvedObject.name}/${body.involvedObject.uid}`), ['Job/real/uid-real', 'CronJob/nightly/uid-nightly'], 'the Job and the CronJob that exist, with the uid the review named');
});
