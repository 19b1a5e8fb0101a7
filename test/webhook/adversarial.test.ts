// The webhook against an attacker: the bodies, connections and handshakes that anyone who may
// create a pod (even with --dry-run=server), or who reaches the webhook port, can send. Each is
// answered with a small, well-formed AdmissionReview, never holds the event loop (probes and
// ordinary reviews are answered meanwhile), and leaves log lines under 16 KiB; connections
// are bounded in number and in how long they may take to say anything. In-process with
// inject(), and over real TLS where the transport is the point (test/webhook/tls.test.ts: the
// cipher suites). The figures are printed.
// test/webhook/growth.test.ts checks that time grows linearly with every shape of body;
// test/e2e/forged-reviews.test.ts what a forged review can make the webhook write on a real
// API server.
import { connect as tcpConnect, type Socket } from 'node:net';
import { Agent, request } from 'node:https';
import t from 'tap';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, MAX_LISTED_FINDINGS, POD_ANNOTATIONS } from '../../src/policy/index.ts';
import { issueWithNewCa } from '../../src/tls/certificates.ts';
import type { AdmissionReview } from '../../src/webhook/admission.ts';
import { buildApp, type AppOptions } from '../../src/webhook/app.ts';
import { OFFLOAD_BODY_BYTES } from '../../src/webhook/offload.ts';
import { HANDLERS, judge, review } from '../../src/webhook/review.ts';
import { HOSTILE_SHAPES, countWithin, hostileBody } from '../support/hostile-reviews.ts';
import { podReview } from '../support/reviews.ts';
import { DEFAULT_OPTIONS, loadReview } from './support.ts';

const LOG_LINE_LIMIT = 16 * 1024;
const main = { name: 'main', image: 'registry.example.com/batch/worker:1.0' };
const repeat = <T>(count: number, make: (index: number) => T): T[] => Array.from({ length: count }, (_, index) => make(index));
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`;

/** An app whose log lines are kept, with the default body limit (8 MiB). */
function loggedApp(options: Partial<AppOptions> = {}) {
  const lines: string[] = [];
  const app = buildApp({ ...DEFAULT_OPTIONS, nativeSidecars: true, ...options, logger: { level: 'info', stream: { write: (line: string) => lines.push(line) } } });
  return { app, lines };
}

async function inject(app: ReturnType<typeof buildApp>, endpoint: string, body: string) {
  const started = performance.now();
  const response = await app.inject({ method: 'POST', url: `/${endpoint}`, headers: { 'content-type': 'application/json' }, payload: body });
  return { status: response.statusCode, ms: performance.now() - started, bytes: response.body.length, review: JSON.parse(response.body) as AdmissionReview };
}

const duplicates = (count: number) => JSON.stringify(podReview({ containers: [main, { name: 'proxy', image: 'envoy:1', env: repeat(count, () => ({ name: ENV_WHEN_JOB_EXIT, value: 'true' })) }] }));

t.test('the same marker 46,000 and 120,000 times in one container: answered at once, on every endpoint', async (t) => {
  const { app, lines } = loggedApp();
  t.teardown(() => app.close());
  for (const count of [46_000, 120_000]) {
    const body = duplicates(count);
    for (const endpoint of ['validate', 'mutate', 'native-sidecars']) {
      const answer = await inject(app, endpoint, body);
      t.equal(answer.status, 200, `${count}, /${endpoint}: answered`);
      t.match(answer.review.response, { allowed: true }, `${count}, /${endpoint}: allowed (a duplicate marker is a warning)`);
      t.comment(`${count} identical markers (${mib(body.length)}), /${endpoint}: ${answer.ms.toFixed(0)} ms, answer ${answer.bytes} bytes`);
    }
  }
  t.ok(Math.max(...lines.map((line) => line.length)) <= LOG_LINE_LIMIT, 'no log line over 16 KiB');
});

t.test('40,000 distinct bad values, 60,000 bad containers: a denial of the first few errors and a count', async (t) => {
  const { app, lines } = loggedApp();
  t.teardown(() => app.close());
  const values = JSON.stringify(podReview({ containers: [main, { name: 'proxy', image: 'envoy:1', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, ...repeat(40_000, (i) => ({ name: ENV_IGNORE_EXIT_CODE, value: `bad-${i}-${'v'.repeat(40)}` }))] }] }));
  const containers = JSON.stringify(podReview({ containers: [main, ...repeat(60_000, (i) => ({ name: `c${i}`, env: [{ name: ENV_WHEN_JOB_EXIT, value: 'yes' }] }))] }));
  for (const [what, body, errors] of [['40,000 distinct bad values', values, 40_000], ['60,000 containers with a bad value', containers, 60_000]] as const) {
    const answer = await inject(app, 'validate', body);
    const message = answer.review.response?.status?.message ?? '';
    t.equal(answer.review.response?.allowed, false, `${what}: denied`);
    t.match(message, new RegExp(`^${errors} sidecar configuration errors: `), `${what}: the count of errors`);
    t.equal(message.match(/spec\.containers\[\d+\]/g)?.length, MAX_LISTED_FINDINGS, `${what}: ${MAX_LISTED_FINDINGS} errors listed, then how many more`);
    t.match(message, new RegExp(`; and ${errors - MAX_LISTED_FINDINGS} more errors$`));
    t.ok(answer.bytes < 8 * 1024, `${what}: the answer is ${answer.bytes} bytes`);
    t.comment(`${what} (${mib(body.length)}): ${answer.ms.toFixed(0)} ms, answer ${answer.bytes} bytes, message ${message.length} characters`);
  }
  const longest = Math.max(...lines.map((line) => line.length));
  t.ok(longest <= LOG_LINE_LIMIT, `no log line over 16 KiB (the longest: ${longest} characters)`);
});

t.test('malformed types get a 400 naming the field, inline and in the worker, never a 500', async (t) => {
  const { app } = loggedApp();
  t.teardown(() => app.close());
  const ballast = repeat(5000, (i) => ({ name: `SETTING_${i}`, value: 'x'.repeat(40) }));
  const cases: Array<[string, Record<string, unknown>, Record<string, unknown>, RegExp]> = [
    ['a number as a container name', { containers: [main, { name: 42, env: [] }] }, {}, /request\.object\.spec\.containers\[1\]\.name: Invalid value: must be string or null, not number/],
    ['an object with its own toString as a container name', { containers: [main, { name: { toString: 'x' }, env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }] }] }, {}, /request\.object\.spec\.containers\[1\]\.name: Invalid value: must be string or null, not object/],
    ['an object as an env value', { containers: [main, { name: 'p', env: [{ name: ENV_WHEN_JOB_EXIT, value: { a: 1 } }] }] }, {}, /request\.object\.spec\.containers\[1\]\.env\[0\]\.value: Invalid value: must be string or null, not object/],
    ['a number as a label', { containers: [main] }, { labels: { 'app.kubernetes.io/name': 7 } }, /request\.object\.metadata\.labels\[app\.kubernetes\.io\/name\]: Invalid value: must be string or null, not number/],
    ['an array as an owner uid', { containers: [main] }, { ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'j', uid: ['x'], controller: true }] }, /ownerReferences\[0\]\.uid: Invalid value: must be string or null, not array/],
    ['a string as the containers', { containers: 'main' }, {}, /request\.object\.spec\.containers: Invalid value: must be array or null, not string/],
  ];
  for (const [what, spec, metadata, says] of cases) {
    for (const large of [false, true]) {
      const body = JSON.stringify(podReview({ ...spec, ...(large && { initContainers: [{ name: 'ballast', env: ballast }] }) }, metadata));
      for (const endpoint of ['validate', 'mutate', 'native-sidecars']) {
        const answer = await inject(app, endpoint, body);
        t.equal(answer.status, 400, `${what}${large ? ` (${mib(body.length)}, in the worker)` : ''}, /${endpoint}: 400`);
        t.match(answer.review.response?.status?.message, says, `${what}, /${endpoint}: the message names the field`);
      }
    }
  }
});

t.test('a key of 2 MB in the labels or the annotations: the answer and the log stay small', async (t) => {
  const { app, lines } = loggedApp();
  t.teardown(() => app.close());
  const key = 'k'.repeat(2_000_000);
  const sidecar = { name: 'proxy', image: 'envoy:1', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }] };
  const cases: Array<[string, Record<string, unknown>, number, RegExp]> = [
    ['a label with that key and a number as its value', { labels: { [key]: 7 } }, 400, /^malformed AdmissionReview: request\.object\.metadata\.labels\.k{64}\.\.\.: Invalid value: must be string or null, not number$/],
    ['a stop annotation with that key', { annotations: { [`${POD_ANNOTATIONS.stopPrefix}${key}`]: 'signal' } }, 200, /metadata\.annotations\[stop\.sidecar-terminator\.io\/k+\.\.\.: Invalid value: "k{128}"\.\.\. \(2000000 characters\): the key must be/],
  ];
  for (const [what, metadata, status, says] of cases) {
    const body = JSON.stringify(podReview({ containers: [main, sidecar] }, metadata));
    const answer = await inject(app, 'validate', body);
    t.equal(answer.status, status, `${what}: ${status}`);
    t.match(answer.review.response?.status?.message, says, `${what}: the message names the field, cut`);
    t.ok(answer.bytes < 2048, `${what}: the answer is ${answer.bytes} bytes`);
  }
  const longest = Math.max(...lines.map((line) => line.length));
  t.ok(longest <= LOG_LINE_LIMIT, `no log line over 16 KiB (the longest: ${longest} characters)`);
});

t.test('a large body is answered from the worker exactly as the event loop would answer it, patch included', async (t) => {
  const { app } = loggedApp();
  t.teardown(() => app.close());
  const settings = { enforcement: DEFAULT_OPTIONS.enforcement, quickExitImageAllowlist: DEFAULT_OPTIONS.quickExitImageAllowlist, nativeSidecars: true };
  for (const id of ['many-sidecars', 'distinct-bad-values']) {
    const shape = HOSTILE_SHAPES.find((each) => each.id === id)!;
    const body = hostileBody(shape, countWithin(shape, 1024 * 1024));
    t.ok(body.length > OFFLOAD_BODY_BYTES, `${id}: judged in the worker`);
    for (const endpoint of ['validate', 'mutate', 'native-sidecars'] as const) {
      const response = await app.inject({ method: 'POST', url: `/${endpoint}`, headers: { 'content-type': 'application/json' }, payload: body });
      const inline = judge(body, HANDLERS[endpoint], settings);
      t.equal(response.headers['content-type'], 'application/json; charset=utf-8', `${id}, /${endpoint}: JSON`);
      t.same(JSON.parse(response.body), review(inline.uid, inline.answer), `${id}, /${endpoint}: the same answer (${response.body.length} bytes)`);
    }
  }
});

t.test('a body that would take hundreds of MiB to parse is refused before parsing, and the webhook carries on', async (t) => {
  const { app } = loggedApp();
  t.teardown(() => app.close());
  const empties = repeat(Math.floor((8 * 1024 * 1024 - 400) / 3), () => '{}').join(',');
  const body = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"x":[${empties}]}}}`;
  const answer = await inject(app, 'validate', body);
  t.equal(answer.status, 413);
  t.match(answer.review.response?.status?.message, /holds more than 500000 objects and arrays/);
  t.comment(`${mib(body.length)} of empty objects: ${answer.status} in ${answer.ms.toFixed(0)} ms`);
  t.equal((await inject(app, 'validate', JSON.stringify(loadReview('job-valid')))).status, 200, 'the next review is answered');
});

// Over real TLS: an HTTPS listener, as serve runs it.
const bundle = await issueWithNewCa({ hosts: ['localhost', '127.0.0.1'], validityMs: 3_600_000, now: new Date() });

async function listening(options: Partial<AppOptions> = {}) {
  const app = buildApp({ ...DEFAULT_OPTIONS, ...options, https: { key: bundle.key, cert: bundle.cert } });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, port: (app.server.address() as { port: number }).port };
}

/** A POST or GET over `agent`; resolves with the status and when it was answered. */
function send(port: number, agent: Agent, path: string, body?: string): Promise<{ status: number; at: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: body === undefined ? 'GET' : 'POST', agent, headers: body === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => (bytes += chunk.length));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, at: performance.now(), bytes }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

t.test('over TLS: /healthz and an ordinary review sent while a hostile review is judged are answered before it', async (t) => {
  // The longest timeout the API server allows: on a loaded machine, this process sending itself
  // 7 MiB over TLS can take longer than the default 3 s, and the point here is the order.
  const { app, port } = await listening({ timeoutSeconds: 30 });
  t.teardown(() => app.close());
  const agent = new Agent({ keepAlive: true, rejectUnauthorized: false, maxSockets: 8 });
  t.teardown(() => agent.destroy());
  const ordinary = JSON.stringify(loadReview('pod-manageable'));
  const hostile = duplicates(120_000);
  // Warm connections, JIT and the worker.
  await Promise.all([send(port, agent, '/healthz'), send(port, agent, '/mutate', ordinary), send(port, agent, '/validate', duplicates(46_000))]);
  const idle: number[] = [];
  for (let i = 0; i < 20; i++) {
    const started = performance.now();
    await send(port, agent, '/healthz');
    idle.push(performance.now() - started);
  }
  for (let round = 1; round <= 3; round++) {
    const started = performance.now();
    const slow = send(port, agent, '/validate', hostile);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const [health, review] = [send(port, agent, '/healthz'), send(port, agent, '/mutate', ordinary)];
    const [h, r, s] = await Promise.all([health, review, slow]);
    t.equal(s.status, 200, `round ${round}: the hostile review is answered`);
    t.ok(h.at < s.at && r.at < s.at, `round ${round}: /healthz and the ordinary review first`);
    t.comment(
      `round ${round}: ${mib(hostile.length)} hostile review answered after ${(s.at - started).toFixed(0)} ms; sent 50 ms in, /healthz after ${(h.at - started - 50).toFixed(1)} ms and the ordinary review after ${(r.at - started - 50).toFixed(1)} ms ` +
        `(/healthz alone: median ${idle.sort((a, b) => a - b)[10]!.toFixed(1)} ms)`,
    );
  }
});

/** Raw TCP connections that send the 5 bytes of a TLS record header and nothing more. */
async function halfOpen(port: number, count: number): Promise<Array<{ socket: Socket; closedAt: Promise<number> }>> {
  const sockets: Array<{ socket: Socket; closedAt: Promise<number> }> = [];
  for (let i = 0; i < count; i++) {
    const socket = tcpConnect({ host: '127.0.0.1', port });
    socket.on('error', () => {});
    const closedAt = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()).once('close', () => resolve()));
    socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]));
    sockets.push({ socket, closedAt });
  }
  return sockets;
}

/** Resolves with `promise`, or with undefined after `ms`. */
const within = <T>(promise: Promise<T>, ms: number) => Promise.race([promise, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms).unref())]);

t.test('over TLS: a handshake that never finishes is dropped after the request timeout', async (t) => {
  const { app, port } = await listening({ timeoutSeconds: 1 });
  t.teardown(() => app.close());
  const started = performance.now();
  const sockets = await halfOpen(port, 50);
  t.teardown(() => sockets.forEach(({ socket }) => socket.destroy()));
  // Node's default would keep them two minutes; a fixed timeout of the longest webhook timeout
  // (30 s) would keep them too long. 10 s leaves a loaded machine room above the 1 s limit.
  const closed = await within(Promise.all(sockets.map(({ closedAt }) => closedAt)), 10_000);
  t.ok(closed, 'every half-open connection was closed by the server within 10 s');
  if (closed) t.comment(`50 connections that sent 5 bytes of a TLS record: all closed within ${(Math.max(...closed) - started).toFixed(0)} ms (handshake timeout 1,000 ms)`);
});

t.test('over TLS: connections beyond the cap are closed as they arrive, and the server serves again once they are gone', async (t) => {
  // The longest timeout, so that only the cap can close a connection within the test's wait.
  const { app, port } = await listening({ timeoutSeconds: 30, maxConnections: 20 });
  t.teardown(() => app.close());
  const held = await halfOpen(port, 20);
  t.teardown(() => held.forEach(({ socket }) => socket.destroy()));
  const [extra] = await halfOpen(port, 1);
  t.ok(await within(extra!.closedAt, 5000), 'the 21st connection is closed at once, long before its 30 s handshake timeout');
  t.notOk(await within(held[0]!.closedAt, 500), 'the 20 within the cap stay open');
  held.forEach(({ socket }) => socket.destroy());
  await Promise.all(held.map(({ closedAt }) => closedAt));
  const agent = new Agent({ rejectUnauthorized: false });
  t.teardown(() => agent.destroy());
  t.equal((await send(port, agent, '/healthz')).status, 200, 'once the half-open ones are gone, a client is served');
});

t.test('every shape of hostile body at the API server limit: a well-formed answer, and short log lines', async (t) => {
  const { app, lines } = loggedApp();
  t.teardown(() => app.close());
  for (const shape of HOSTILE_SHAPES) {
    const body = hostileBody(shape, countWithin(shape));
    for (const endpoint of ['validate', 'mutate', 'native-sidecars']) {
      const answer = await inject(app, endpoint, body);
      t.ok([200, 400].includes(answer.status) && typeof answer.review.response?.allowed === 'boolean', `${shape.id}, /${endpoint}: ${answer.status}`);
      t.comment(`${shape.id} (${mib(body.length)}), /${endpoint}: ${answer.status} ${answer.review.response?.allowed ? 'allowed' : 'denied'} in ${answer.ms.toFixed(0)} ms, answer ${answer.bytes} bytes`);
    }
  }
  const longest = Math.max(...lines.map((line) => line.length));
  t.ok(longest <= LOG_LINE_LIMIT, `no log line over 16 KiB (the longest: ${longest} characters)`);
});
