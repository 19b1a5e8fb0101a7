// The webhook's HTTPS server gives up on a TLS handshake or a request when the API server does
// (the registered timeoutSeconds), and leaves idle connections, used or not yet, for the client
// to close.
import { createConnection, type AddressInfo } from 'node:net';
import { connect, type TLSSocket } from 'node:tls';
import t, { type Test } from 'tap';
import { WEBHOOK_TIMEOUT_SECONDS } from '../../src/config.ts';
import { desiredWebhookConfigurations } from '../../src/kube/webhook-configurations.ts';
import { issueWithNewCa, servingHosts } from '../../src/tls/certificates.ts';
import { buildApp } from '../../src/webhook/app.ts';
import { connectionsOf } from '../../src/webhook/connections.ts';
import { waitFor } from '../support/wait.ts';
import { DEFAULT_OPTIONS } from './support.ts';

const bundle = await issueWithNewCa({ hosts: servingHosts('svc', 'ns'), validityMs: 3_600_000, now: new Date() });
const https = { key: bundle.key, cert: bundle.cert };

t.test('by default the server uses the timeoutSeconds the webhooks are registered with', async (t) => {
  const registered = desiredWebhookConfigurations({ name: 'x', namespace: 'ns', serviceName: 'svc', url: '', failurePolicy: 'Fail', excludedNamespaces: [] }, 'CA');
  const timeouts = [...registered.mutating.webhooks!, ...registered.validating.webhooks!].map((webhook) => webhook.timeoutSeconds);
  t.strictSame(new Set(timeouts), new Set([WEBHOOK_TIMEOUT_SECONDS]));
  const app = buildApp({ ...DEFAULT_OPTIONS, https });
  t.teardown(() => app.close());
  await app.ready();
  t.ok(app.server.keepAliveTimeout > 90_000, `an idle kept-alive connection outlives the 90 s of Go's client (${app.server.keepAliveTimeout} ms)`);
  t.ok(app.server.timeout > 90_000, `and so does one that has not sent a request yet (${app.server.timeout} ms)`);
  // Node counts a connection's first request from the connection's start: its limits are the idle time too.
  t.ok(app.server.headersTimeout > 90_000 && app.server.requestTimeout > 90_000, `Node's own request limits too (${app.server.headersTimeout} and ${app.server.requestTimeout} ms)`);
  t.equal(connectionsOf(app.server).deadlineMs, WEBHOOK_TIMEOUT_SECONDS * 1000, 'a request has timeoutSeconds from its first byte to its last');
});

t.test('timeoutSeconds follows --webhook-timeout-seconds, 3 s by default; workload templates are sent only when asked', async (t) => {
  t.equal(WEBHOOK_TIMEOUT_SECONDS, 3, 'a silent replica holds a pod creation 3 s at most, not the 10 s of the API server default');
  const target = { name: 'x', namespace: 'ns', serviceName: 'svc', url: '', failurePolicy: 'Fail', excludedNamespaces: [] };
  const registered = desiredWebhookConfigurations({ ...target, timeoutSeconds: 2 }, 'CA');
  t.strictSame(new Set([...registered.mutating.webhooks!, ...registered.validating.webhooks!].map((webhook) => webhook.timeoutSeconds)), new Set([2]));
  const app = buildApp({ ...DEFAULT_OPTIONS, https, timeoutSeconds: 2 });
  t.teardown(() => app.close());
  await app.ready();
  t.equal(connectionsOf(app.server).deadlineMs, 2000, 'and the server gives up on a request when the API server does');

  const groups = (validateWorkloads?: boolean) => desiredWebhookConfigurations({ ...target, ...(validateWorkloads === undefined ? {} : { validateWorkloads }) }, 'CA').validating.webhooks![0]!.rules!.map((rule) => `${rule.apiGroups?.[0] ?? ''}:${rule.resources?.join(',') ?? ''}`);
  t.same(groups(), [':pods', 'batch:jobs,cronjobs'], 'Deployments, StatefulSets and DaemonSets are not sent by default');
  t.same(groups(true), [':pods', 'batch:jobs,cronjobs', 'apps:deployments,statefulsets,daemonsets'], '--validate-workloads sends them for warnings');
});

// One second, so that the server's limits pass quickly; each wait below is bounded generously.
const app = buildApp({ ...DEFAULT_OPTIONS, https, timeoutSeconds: 1 });
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const { port } = app.server.address() as AddressInfo;

/** A raw TLS connection that records what the server sends and whether it closed the connection. */
async function open(to = port): Promise<{ socket: TLSSocket; received: () => string; closed: Promise<void> }> {
  const socket = connect({ host: '127.0.0.1', port: to, rejectUnauthorized: false });
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  let received = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  t.teardown(() => socket.destroy());
  return { socket, received: () => received, closed };
}

/** Resolves with `closed` unless it takes longer than 30 s, far more than the 1 s limits. */
async function closedByServer(closed: Promise<void>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), 30_000)));
  const result = await Promise.race([closed.then(() => true as const), gaveUp]);
  clearTimeout(timer);
  return result;
}

/** Sends `start`, then `piece` every 200 ms; passes when the server answers 408 and closes the connection. */
async function trickleGets408(t: Test, start: string, piece: string): Promise<void> {
  const { socket, received, closed } = await open();
  socket.write(start);
  const trickle = setInterval(() => socket.writable && socket.write(piece), 200);
  t.teardown(() => clearInterval(trickle));
  t.ok(await closedByServer(closed), 'the server closed the connection');
  t.match(received(), /^HTTP\/1\.1 408 /, 'with 408 Request Timeout');
}

t.test('a body that trickles in slower than the timeout gets 408 and the connection is closed', (t) =>
  trickleGets408(t, 'POST /validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{', ' '));

t.test('headers that trickle in slower than the timeout get 408 and the connection is closed', (t) =>
  trickleGets408(t, 'POST /validate HTTP/1.1\r\nHost: webhook\r\n', 'X-Slow: 1\r\n'));

t.test('a request begun after the connection was idle longer than the timeout has the whole timeout', async (t) => {
  // Two seconds, checked every second: counted from the connection's start (idle 2.5 s), the
  // stalled request would be closed at the first check, within a second of its first byte.
  const slow = buildApp({ ...DEFAULT_OPTIONS, https, timeoutSeconds: 2 });
  await slow.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => slow.close());
  const { socket, received, closed } = await open((slow.server.address() as AddressInfo).port);
  await new Promise((resolve) => setTimeout(resolve, 2500));
  socket.write('POST /validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{');
  const started = Date.now();
  t.ok(await closedByServer(closed), 'the stalled request is closed');
  const waited = Date.now() - started;
  t.ok(waited >= 1500, `not before its own 2 s, counted from its first byte (${waited} ms)`);
  t.match(received(), /^HTTP\/1\.1 408 /, 'with 408 Request Timeout');
});

t.test('a second request that stalls on a kept-alive connection gets 408 too', async (t) => {
  const { socket, received, closed } = await open();
  socket.write('GET /healthz HTTP/1.1\r\nHost: webhook\r\n\r\n');
  await waitFor('the first answer', () => received().includes('\r\n\r\nok'), { intervalMs: 50, timeoutMs: 30_000 });
  socket.write('POST /validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{');
  t.ok(await closedByServer(closed), 'the server closed the connection');
  t.match(received(), /HTTP\/1\.1 408 /, 'with 408 Request Timeout after the first answer');
});

t.test('the drain closes the idle connections, used or not yet, and any made after', async (t) => {
  const draining = buildApp({ ...DEFAULT_OPTIONS, https, timeoutSeconds: 1 });
  await draining.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => draining.close());
  const port = (draining.server.address() as AddressInfo).port;
  const unused = await open(port);
  const used = await open(port);
  used.socket.write('GET /healthz HTTP/1.1\r\nHost: webhook\r\n\r\n');
  await waitFor('the answer', () => used.received().includes('\r\n\r\nok'), { intervalMs: 50, timeoutMs: 30_000 });
  connectionsOf(draining.server).closeIdle();
  t.ok(await closedByServer(unused.closed), 'the connection not used yet is closed');
  t.ok(await closedByServer(used.closed), 'and the kept-alive one');
  const late = await open(port).catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
  if (late instanceof Error) t.pass(`a connection made after is refused (${late.message})`);
  else t.ok(await closedByServer(late.closed), 'a connection made after is closed at once');
});

t.test('a connection that never finishes a TLS handshake is closed after the timeout', async (t) => {
  const socket = createConnection({ host: '127.0.0.1', port });
  t.teardown(() => socket.destroy());
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => {});
  t.ok(await closedByServer(closed), 'the server closed the connection');
});

// Go's HTTP client (the API server's) pools a connection it dialed for a request that another
// connection served first, and may send its first request on it much later. A server that closed
// it after timeoutSeconds raced that request: the API server got EOF, and a pod was admitted
// without the mutating webhook (failurePolicy Ignore) during a robustness run
// (bench/robustness, seed 1129003).
t.test('a connection that has sent no request yet stays open past the timeout, and its first request is answered', async (t) => {
  const { socket, received } = await open();
  // Three times the request and connection timeouts, idle from the handshake on.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  t.ok(!socket.destroyed, 'still connected after 3 s without a request');
  socket.write('GET /healthz HTTP/1.1\r\nHost: webhook\r\n\r\n');
  await waitFor('the answer', () => received().includes('\r\n\r\nok'), { intervalMs: 50, timeoutMs: 30_000 });
  t.match(received(), /^HTTP\/1\.1 200 /, 'the first request on the connection is answered');
});

t.test('an idle kept-alive connection stays open past the request timeout', async (t) => {
  const { socket, received } = await open();
  const get = 'GET /healthz HTTP/1.1\r\nHost: webhook\r\n\r\n';
  socket.write(get);
  await waitFor('the answer', () => received().includes('\r\n\r\nok'), { intervalMs: 50, timeoutMs: 30_000 });
  // Three times the request and connection timeouts, idle.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  t.ok(!socket.destroyed, 'still connected after 3 s idle');
  socket.write(get);
  await waitFor('the second answer', () => received().split('HTTP/1.1 200 OK').length === 3, { intervalMs: 50, timeoutMs: 30_000 });
  t.equal(received().split('HTTP/1.1 200 OK').length - 1, 2, 'the second request on the connection is answered');
});
