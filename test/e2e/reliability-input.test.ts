// Bad input over time and at the edges. A `serve --no-watcher` process fed thousands of hostile
// AdmissionReviews over HTTPS, and every shape of test/support/hostile-reviews.ts at the API
// server's limit, keeps its memory and its log lines bounded; `lint` refuses
// hostile YAML (deep nesting, dense documents, huge values) with exit 2 or a bounded report,
// within a fixed heap. Alias bombs, oversized files and tags are covered by
// test/lint/lint.test.ts (aliases across many documents expand cheaply: an alias is the same
// object, not a copy).
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { WEBHOOK_TIMEOUT_SECONDS } from '../../src/config.ts';
import { startControlPlane } from '../support/control-plane.ts';
import { startServe } from '../support/serve-process.ts';
import { postStatus } from '../support/net.ts';
import { HOSTILE_SHAPES, countWithin, hostileBody } from '../support/hostile-reviews.ts';
import { runCli } from '../cli/run.ts';
import { Random, fuzzCase } from '../webhook/random.ts';

const validJob = readFileSync(new URL('../fixtures/manifests/valid-job.yaml', import.meta.url), 'utf8');
// lint runs with this heap: a hostile file must be refused well within it, not crash it.
const HEAP = { NODE_OPTIONS: '--max-old-space-size=512' };
const MiB = 1024 * 1024;
// Less old space than Node gives itself in the chart's webhook container (a quarter of its 384 MiB
// limit, doubled on 64-bit: 192 MiB), so what holds here holds there.
const HEAP_MIB = 128;

t.test('lint: deeply nested flow collections exit 2 with a short message', async (t) => {
  const depth = 100_000;
  const dir = t.testdir({
    'sequences.yaml': `a: ${'['.repeat(depth)}${']'.repeat(depth)}\n`,
    'mappings.yaml': `a: ${'{a: '.repeat(depth)}1${'}'.repeat(depth)}\n`,
    'unclosed.yaml': `a: ${'['.repeat(depth)}\n`,
    'in-a-job.yaml': validJob.replace('value: "true"', `value: ${'['.repeat(depth)}${']'.repeat(depth)}`),
  });
  for (const name of ['sequences.yaml', 'mappings.yaml', 'unclosed.yaml', 'in-a-job.yaml']) {
    const file = join(dir, name);
    const run = await runCli(['lint', file], { env: HEAP });
    t.equal(run.code, 2, `${name}: exit 2`, { stderr: run.stderr.slice(0, 500) });
    t.match(run.stderr, new RegExp(`^${file}: `, 'm'), `${name}: the message names the file`);
    t.ok(run.stderr.length < 1024, `${name}: a short message (${run.stderr.length} bytes)`);
    t.notMatch(run.stderr, /\n\s+at /, `${name}: no stack trace`);
  }
});

t.test('lint: a dense document (four million nodes in 8 MiB) exits 2 with a message, within a 512 MiB heap', async (t) => {
  const items = 4 * MiB - 8;
  const dir = t.testdir({
    'dense.yaml': `a: [${Array(items).fill('x').join(',')}]\n`,
  });
  const file = join(dir, 'dense.yaml');
  const run = await runCli(['lint', file], { env: HEAP });
  t.equal(run.code, 2, 'exit 2 (134 is a crash at the heap limit)', { stderr: run.stderr.slice(0, 500) });
  t.match(run.stderr, new RegExp(`^${file}: `, 'm'), 'the message names the file');
  t.ok(run.stderr.length < 1024, `a short message (${run.stderr.length} bytes)`);
});

t.test('lint: ordinary manifests near the size limit still lint within the same heap', async (t) => {
  const dir = t.testdir({ 'many-jobs.yaml': `${validJob}\n---\n`.repeat(Math.floor((8 * MiB - 100) / (validJob.length + 5))) });
  const run = await runCli(['lint', join(dir, 'many-jobs.yaml')], { env: HEAP });
  t.equal(run.code, 0, 'exit 0', { stderr: run.stderr.slice(0, 500) });
  t.match(run.stdout, /^\d{4,} objects checked in 1 file: 0 errors, 0 warnings$/m);
});

t.test('lint: huge values are not echoed in full', async (t) => {
  const job = validJob
    .replace('value: "true"', `value: "${'y'.repeat(100_000)}"`)
    .replace(/value: "?registry\.example\.com\/quick-exit:1\.0"?/, `value: "${'a'.repeat(7 * MiB)}"`);
  const dir = t.testdir({ 'huge-values.yaml': job });
  const run = await runCli(['lint', join(dir, 'huge-values.yaml')], { env: HEAP });
  t.equal(run.code, 1, 'exit 1: the values are errors');
  t.match(run.stdout, /env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT\]: Invalid value: "y{10}/, 'the finding names the field and starts the value');
  t.match(run.stdout, /env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE\]: Invalid value: "a{10}/);
  const longest = Math.max(...run.stdout.split('\n').map((line) => line.length));
  t.ok(longest <= 1024, `every line of the report is at most 1 KiB (the longest is ${longest} characters)`);
});

t.test('serve: 5,000 hostile AdmissionReviews over HTTPS leave memory and log lines bounded', async (t) => {
  const cp = await startControlPlane();
  t.teardown(() => cp.stop());
  const certDir = await mkdtemp(join(tmpdir(), 'st-e2e-certs-'));
  t.teardown(() => rm(certDir, { recursive: true, force: true }));
  const serve = await startServe(['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, '--no-watcher'], { nodeArgs: [`--max-old-space-size=${HEAP_MIB}`] });
  t.teardown(() => serve.stop());
  t.match(readFileSync(`/proc/${serve.pid}/cmdline`, 'utf8'), new RegExp(`--max-old-space-size=${HEAP_MIB}\0[^\0]*src/cli\\.ts\0serve`), `the pid measured is the serve process itself, with a ${HEAP_MIB} MiB heap`);

  const fixtureDir = new URL('../fixtures/admission/', import.meta.url);
  const fixtures = readdirSync(fixtureDir).filter((name) => name.endsWith('.json')).map((name) => readFileSync(new URL(name, fixtureDir), 'utf8'));
  const random = new Random(0xbad5eed);
  const agent = new Agent({ keepAlive: true, maxSockets: 4, rejectUnauthorized: false });
  t.teardown(() => agent.destroy());
  const statuses = new Map<number | string, number>();
  let bytesSent = 0;

  async function postMany(count: number): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < count) {
        next++;
        const fuzz = fuzzCase(random, JSON.parse(random.pick(fixtures)));
        bytesSent += fuzz.body.length;
        const status = await postStatus(serve.port, random.chance(0.5) ? '/validate' : '/mutate', fuzz.body, { agent, contentType: fuzz.contentType });
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  }

  await postMany(1000); // warm-up: JIT, TLS sessions, buffers
  const before = rssMiB(serve.pid);
  const samples: Array<{ rss: number; heapUsed: number }> = [];
  for (let round = 0; round < 5; round++) {
    await postMany(1000);
    samples.push({ rss: rssMiB(serve.pid), heapUsed: await heapUsedMiB(serve.port, agent) });
  }
  const after = samples.at(-1)!.rss;
  const figures = samples.map((s) => `${s.rss.toFixed(0)} (heap in use ${s.heapUsed.toFixed(0)})`).join(', ');
  t.comment(`RSS ${before.toFixed(0)} MiB after the warm-up, then ${figures} MiB; ${(bytesSent / MiB).toFixed(0)} MiB posted; statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
  t.ok(serve.running(), `serve is still running, with a ${HEAP_MIB} MiB heap`);
  t.same([...statuses.keys()].filter((status) => ![200, 400, 413].includes(status as number)), [], 'every answer is 200, 400 or 413');
  // A body kept per request would show here: 500 MiB were posted.
  t.ok(Math.max(...samples.map((s) => s.heapUsed)) < 96, 'the JavaScript heap in use stays under 96 MiB');
  t.ok(after < before + 150, `RSS grew by less than 150 MiB over 5,000 bodies (${(after - before).toFixed(0)} MiB)`);

  // Then every shape of hostile body of the adversarial suite, at the API server's 3 MiB limit:
  // their log lines count below too. Each is judged in the worker thread, which runs at nice 10:
  // beside busy processes of the host it may not finish within the webhook timeout, past which the
  // API server has given up: a body still waiting for the worker then is answered 503 unjudged,
  // one judged late gets its 200 or 400 late. That is the CPU the worker gets, not the input: only
  // an answer other than 200 or 400 before the timeout fails.
  const hostile: Array<{ shape: string; path: string; status: number | string; ms: number }> = [];
  for (const shape of HOSTILE_SHAPES) {
    const body = hostileBody(shape, countWithin(shape));
    for (const path of ['/validate', '/mutate']) {
      const start = Date.now();
      const status = await postStatus(serve.port, path, body, { agent, contentType: 'application/json' });
      hostile.push({ shape: shape.id, path, status, ms: Date.now() - start });
    }
  }
  const judged = hostile.filter((answer) => answer.status === 200 || answer.status === 400);
  const late = hostile.filter((answer) => (answer.status === 'ECONNRESET' || answer.status === 503) && answer.ms >= WEBHOOK_TIMEOUT_SECONDS * 1000);
  t.same(
    hostile.filter((answer) => !judged.includes(answer) && !late.includes(answer)),
    [],
    `the ${hostile.length} hostile bodies are answered 200 or 400, or closed once past the ${WEBHOOK_TIMEOUT_SECONDS} s webhook timeout (${judged.length} judged${late.length > 0 ? `; past it: ${late.map((answer) => `${answer.shape} ${answer.path} ${answer.status} after ${answer.ms} ms`).join(', ')}` : ''})`,
  );
  t.ok(judged.length > 0, 'hostile bodies were judged');
  t.ok(serve.running(), 'serve is still running after them');

  const lines = serve.output().split('\n');
  const longest = Math.max(...lines.map((line) => line.length));
  t.ok(longest <= 16 * 1024, `no log line longer than 16 KiB, whatever the body (the longest is ${longest} characters)`);
  for (const line of lines.filter((l) => l.length > 16 * 1024).slice(0, 3)) t.comment(`a long line: ${line.replace(/(.)\1{20,}/g, '$1...').slice(0, 400)}`);
  t.comment(`${(serve.output().length / MiB).toFixed(1)} MiB of logs for ${lines.length} lines`);
});

/** nodejs_heap_size_used_bytes from serve's /metrics, in MiB. */
function heapUsedMiB(port: number, agent: Agent): Promise<number> {
  return new Promise((resolveHeap, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/metrics', agent }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolveHeap(Number(/^nodejs_heap_size_used_bytes(?:\{[^}]*\})? (\S+)/m.exec(text)?.[1]) / MiB));
    });
    req.on('error', reject);
    req.end();
  });
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]) / 1024;
}
