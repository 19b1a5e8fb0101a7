// reuseConnections: one pooled dispatcher for every API request while the TLS settings stay the
// same; cacheCredentials: the kubeconfig's files read once per period; requestJson: plain JSON.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ApiException, HttpMethod, KubeConfig, PatchStrategy, RequestContext, setHeaderOptions } from '@kubernetes/client-node';
import { isApiError } from '../../src/kube/api-errors.ts';
import { CREDENTIALS_REFRESH_MS, cacheCredentials, latestDispatcher, requestJson, reuseConnections, withRequestSignal, type Dispatcher } from '../../src/kube/client.ts';
import { issueWithNewCa } from '../../src/tls/certificates.ts';
import { recordingServer } from '../support/recording-api-server.ts';

const ISSUE = { hosts: ['localhost'], validityMs: 24 * 3600_000, now: new Date() };

function kubeConfigWith(caPem: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from(caPem).toString('base64'), skipTLSVerify: false }],
    users: [{ name: 'u', token: 'not-a-real-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kubeConfig;
}

async function dispatcherOf(kubeConfig: KubeConfig): Promise<unknown> {
  const context = new RequestContext('https://127.0.0.1:6443/api/v1/pods', HttpMethod.GET);
  await kubeConfig.applySecurityAuthentication(context);
  return context.getDispatcher();
}

t.test('requests share one dispatcher while the TLS settings stay the same', async (t) => {
  const { caBundle } = await issueWithNewCa(ISSUE);
  const plain = kubeConfigWith(caBundle);
  t.not(await dispatcherOf(plain), await dispatcherOf(plain), "client-node alone builds a dispatcher per request (the reason for reuseConnections)");

  const pooled = reuseConnections(kubeConfigWith(caBundle));
  const first = await dispatcherOf(pooled);
  t.ok(first, 'a dispatcher is set');
  t.equal(await dispatcherOf(pooled), first, 'the second request gets the same dispatcher');
});

t.test('a changed CA gets a new dispatcher', async (t) => {
  const { caBundle } = await issueWithNewCa(ISSUE);
  const { caBundle: other } = await issueWithNewCa(ISSUE);
  const kubeConfig = reuseConnections(kubeConfigWith(caBundle));
  const first = await dispatcherOf(kubeConfig);
  // As when the CA file of a service account is rotated: the next request reads the new one.
  (kubeConfig.getCurrentCluster() as { caData?: string }).caData = Buffer.from(other).toString('base64');
  const second = await dispatcherOf(kubeConfig);
  t.not(second, first, 'new TLS settings, new dispatcher');
  t.notOk((first as { closed: boolean }).closed, 'the previous one still open, for a request handed it just before (latestDispatcher closes it later)');
  t.equal(await dispatcherOf(kubeConfig), second, 'then reused again');
});

t.test('latestDispatcher: a dispatcher per options; one replaced is closed after the delay, not at once', async (t) => {
  const built: Array<{ closed: boolean; close(): Promise<void> }> = [];
  const build = () => {
    const dispatcher = { closed: false, close: async () => void (dispatcher.closed = true) };
    built.push(dispatcher);
    return dispatcher as unknown as Dispatcher;
  };
  const latest = latestDispatcher(50);
  const options = (ca: string) => ({ type: 'agent' as const, connect: { ca: Buffer.from(ca) } });
  const first = latest(options('a'), build);
  t.equal(latest(options('a'), build), first, 'the same options (equal by content): the same dispatcher');
  const second = latest(options('b'), build);
  t.not(second, first, 'new options: a new dispatcher');
  t.same(built.map((dispatcher) => dispatcher.closed), [false, false], 'the replaced one still open at once');
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.same(built.map((dispatcher) => dispatcher.closed), [true, false], 'and closed after the delay; the current one open');
});

t.test('cacheCredentials reads the CA file once per period, and again after it', async (t) => {
  const { caBundle } = await issueWithNewCa(ISSUE);
  const { caBundle: rotated } = await issueWithNewCa(ISSUE);
  const dir = mkdtempSync(join(tmpdir(), 'st-credentials-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const caFile = join(dir, 'ca.crt');
  writeFileSync(caFile, caBundle);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caFile, skipTLSVerify: false }],
    users: [{ name: 'u', token: 'first-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  let now = 1_000_000;
  reuseConnections(cacheCredentials(kubeConfig, CREDENTIALS_REFRESH_MS, () => now));
  const first = await dispatcherOf(kubeConfig);
  writeFileSync(caFile, rotated);
  now += CREDENTIALS_REFRESH_MS - 1;
  t.equal(await dispatcherOf(kubeConfig), first, 'within the period the file is not read again: the same TLS settings, the same pool');
  now += 1;
  const second = await dispatcherOf(kubeConfig);
  t.not(second, first, 'after the period the rotated CA is read, and gets a pool of its own');
  t.equal(await dispatcherOf(kubeConfig), second, 'then reused again');
});

t.test('cacheCredentials leaves each request its own headers, and reads again for another user', async (t) => {
  const { caBundle } = await issueWithNewCa(ISSUE);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from(caBundle).toString('base64'), skipTLSVerify: false }],
    users: [
      { name: 'u', token: 'token-u', impersonateUser: 'alice' },
      { name: 'v', token: 'token-v' },
    ],
    contexts: [
      { name: 'x', cluster: 'c', user: 'u' },
      { name: 'y', cluster: 'c', user: 'v' },
    ],
    currentContext: 'x',
  });
  cacheCredentials(kubeConfig);
  const headersOf = async () => {
    const context = new RequestContext('https://127.0.0.1:6443/api/v1/pods', HttpMethod.GET);
    await kubeConfig.applySecurityAuthentication(context);
    return context.getHeaders();
  };
  t.match(await headersOf(), { Authorization: 'Bearer token-u', 'Impersonate-User': 'alice' }, 'the cached headers and the token');
  t.match(await headersOf(), { Authorization: 'Bearer token-u', 'Impersonate-User': 'alice' }, 'the same on the next request');
  kubeConfig.setCurrentContext('y');
  const other = await headersOf();
  t.equal(other.Authorization, 'Bearer token-v', "the other user's token");
  t.notOk('Impersonate-User' in other, "nothing of the first user's headers");
});

t.test('requestJson sends and answers plain JSON', async (t) => {
  const { seen, kubeConfig } = await recordingServer(t, 201, { kind: 'Event', metadata: { creationTimestamp: '2026-11-29T17:00:00Z' } });
  const answer = await requestJson<{ metadata: { creationTimestamp: unknown } }>(kubeConfig, 'POST', '/api/v1/namespaces/a/events', { body: { firstTimestamp: new Date('2026-11-29T17:00:00.000Z') } });
  t.equal(answer.metadata.creationTimestamp, '2026-11-29T17:00:00Z', 'the answer as the server wrote it: no model class, no Date');
  t.match(seen[0], { method: 'POST', url: '/api/v1/namespaces/a/events', contentType: 'application/json', accept: 'application/json' });
  t.same(JSON.parse(seen[0]!.body), { firstTimestamp: '2026-11-29T17:00:00.000Z' }, 'the body as JSON');

  await requestJson(kubeConfig, 'PATCH', '/api/v1/namespaces/a/pods/p/status', { body: [{ op: 'test', path: '/metadata/uid', value: 'u' }] });
  t.equal(seen[1]!.contentType, 'application/json-patch+json', 'a PATCH is a JSON patch by default, as the generated API sends it');
  await requestJson(kubeConfig, 'PATCH', '/api/v1/namespaces/a/pods/p', { body: { metadata: {} }, options: setHeaderOptions('Content-Type', PatchStrategy.MergePatch) });
  t.equal(seen[2]!.contentType, 'application/merge-patch+json', "the options' middleware is applied");

  await requestJson(kubeConfig, 'GET', '/api/v1/pods', { query: { labelSelector: 'a=b', limit: 5, continue: '' } });
  t.equal(seen[3]!.url, '/api/v1/pods?labelSelector=a%3Db&limit=5', 'the query, empty values left out');
});

/**
 * The two ways requestJson sends: on the pooled dispatcher client-node gives (every kubeconfig
 * with a CA, a client certificate or insecure-skip-tls-verify), or, given none (a server trusted
 * by the system's roots), through client-node's fetch: here a plain HTTP server, with the
 * dispatcher taken away.
 */
const SENDS = [
  { name: 'on the dispatcher', plainHttp: false, viaFetch: (kubeConfig: KubeConfig) => kubeConfig },
  {
    name: "through client-node's fetch",
    plainHttp: true,
    viaFetch: (kubeConfig: KubeConfig) => Object.assign(kubeConfig, { createDispatcher: () => undefined }),
  },
];

for (const { name, plainHttp, viaFetch } of SENDS) {
  t.test(`requestJson ${name}: the request's signal aborts it where it hangs`, async (t) => {
    const controller = new AbortController();
    const { seen, kubeConfig } = await recordingServer(t, 200, {}, { plainHttp, hang: () => controller.abort() });
    const bounded = withRequestSignal(viaFetch(kubeConfig), () => controller.signal);
    await t.rejects(requestJson(bounded, 'GET', '/api/v1/namespaces/a/pods/p'), { name: 'AbortError' }, "rejected with the signal's reason, aborted once the request had arrived");
    t.equal(seen.length, 1, 'the request had arrived');
  });

  t.test(`requestJson ${name}: a PATCH's body and content type`, async (t) => {
    const { seen, kubeConfig } = await recordingServer(t, 200, { kind: 'Pod' }, { plainHttp });
    t.same(await requestJson(viaFetch(kubeConfig), 'PATCH', '/api/v1/namespaces/a/pods/p', { body: [] }), { kind: 'Pod' });
    t.match(seen[0], { method: 'PATCH', url: '/api/v1/namespaces/a/pods/p', contentType: 'application/json-patch+json', body: '[]' });
  });

  t.test(`requestJson ${name}: an answer other than 2xx is an ApiException with its code and body`, async (t) => {
    const { kubeConfig } = await recordingServer(t, 409, { kind: 'Status', reason: 'AlreadyExists' }, { plainHttp });
    const error = await requestJson(viaFetch(kubeConfig), 'POST', '/api/v1/namespaces/a/events', { body: {} }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    t.ok(error instanceof ApiException, 'an ApiException');
    t.ok(isApiError(error, 409), 'its code, as isApiError reads it');
    t.match(String((error as ApiException<string>).body), /AlreadyExists/, "the server's Status in its body");
  });
}
