// The webhook under hostile input, next to itself at rest (bench/README.md, section 6).
//
//   node bench/webhook/hostile.ts [--quick] [--duration S] [--repeats N] [--root DIR] [--before-root DIR]
//                                 [--only inputs,in-flight,half-open] [--label NAME]
//
// inputs:    each hostile input, posted alone to a fresh webhook (bench/webhook/server.ts,
//            buildApp as serve builds it): the time to answer, the status, the size of the
//            answer, the server's RSS after it. With --before-root, the same inputs against a
//            server built from that checkout (no answer within 2 minutes is reported as such).
// in-flight: ordinary reviews (the 5-container pod of reviews.ts, /validate, 16 connections,
//            autocannon) for --duration seconds alone, then as long again while one hostile
//            review is always in flight (the next sent as soon as the last is answered, by
//            bench/webhook/hostile-client.ts in a process of its own); p99 of the ordinary
//            reviews with and without, pair by pair, median of --repeats pairs.
// half-open: 10,000 TCP connections that each send the 5-byte header of a TLS record and then
//            nothing: how many the server keeps, for how long, and its resident memory (VmRSS,
//            VmHWM) next to the chart's 384 MiB limit.
//
// Writes bench/results/hostile[-LABEL].json and .md, prints the markdown.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT } from '../../src/policy/index.ts';
import { HOSTILE_SHAPES, countWithin, hostileBody } from '../../test/support/hostile-reviews.ts';
import { podReview } from '../../test/support/reviews.ts';
import { admissionLoad } from '../lib/load.ts';
import { machineLoad, memory } from '../lib/proc.ts';
import { Samples, fmt, median, parseArgs, sortedQuantile, table } from '../lib/stats.ts';
import { bodies } from './reviews.ts';
import { startServer, writeCertificates, type Server } from './run.ts';

const MiB = 1024 * 1024;
const CHART_MEMORY_LIMIT_MIB = 384;
/** An input not answered within this is reported as such (the earlier code took minutes for some). */
const INPUT_TIMEOUT_MS = 120_000;
const mainContainer = { name: 'main', image: 'registry.example.com/batch/worker:1.0' };
const repeat = <T>(count: number, make: (index: number) => T): T[] => Array.from({ length: count }, (_, index) => make(index));
const shape = (id: string) => HOSTILE_SHAPES.find((each) => each.id === id)!;
/** Where the hostile client reads its body from. */
const bodyDir = mkdtempSync(join(tmpdir(), 'st-bench-hostile-'));

interface Input {
  id: string;
  what: string;
  path: string;
  body: string;
}

/** The inputs of the report that found them, and the worst of test/support/hostile-reviews.ts. */
function inputs(): Input[] {
  const duplicates = (count: number) => JSON.stringify(podReview({ containers: [mainContainer, { name: 'proxy', image: 'envoy:1', env: repeat(count, () => ({ name: ENV_WHEN_JOB_EXIT, value: 'true' })) }] }));
  const inline = shape('duplicate-markers');
  return [
    { id: 'duplicates-46k', what: `46,000 identical ${ENV_WHEN_JOB_EXIT} in one container`, path: '/validate', body: duplicates(46_000) },
    { id: 'duplicates-46k-mutate', what: 'the same, to /mutate', path: '/mutate', body: duplicates(46_000) },
    { id: 'duplicates-120k', what: 'the same, 120,000 times', path: '/validate', body: duplicates(120_000) },
    { id: 'sidecars-1.5MiB', what: '1.5 MiB of marked sidecars, to /native-sidecars', path: '/native-sidecars', body: hostileBody(shape('many-sidecars'), countWithin(shape('many-sidecars'), 1.5 * MiB)) },
    {
      id: 'bad-values-40k',
      what: '40,000 distinct bad marker values',
      path: '/validate',
      body: JSON.stringify(podReview({ containers: [mainContainer, { name: 'proxy', image: 'envoy:1', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, ...repeat(40_000, (i) => ({ name: ENV_IGNORE_EXIT_CODE, value: `bad-${i}-${'v'.repeat(100)}` }))] }] })),
    },
    { id: 'containers-60k', what: '60,000 containers with a bad marker value', path: '/validate', body: JSON.stringify(podReview({ containers: [mainContainer, ...repeat(60_000, (i) => ({ name: `c${i}`, env: [{ name: ENV_WHEN_JOB_EXIT, value: 'yes' }] }))] })) },
    { id: 'labels-3MiB', what: '3 MiB of labels and annotations, to /mutate', path: '/mutate', body: hostileBody(shape('many-labels-and-annotations'), countWithin(shape('many-labels-and-annotations'))) },
    { id: 'inline-64KiB', what: 'identical markers in 64 KiB (the largest body judged on the event loop)', path: '/validate', body: hostileBody(inline, countWithin(inline, 64 * 1024)) },
    {
      id: 'empty-objects-8MiB',
      what: '8 MiB of empty objects',
      path: '/validate',
      body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"x":[${repeat(Math.floor((8 * MiB - 400) / 3), () => '{}').join(',')}]}}}`,
    },
    { id: 'number-name', what: 'a number as a container name', path: '/native-sidecars', body: JSON.stringify(podReview({ containers: [mainContainer, { name: 42, env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }] }] })) },
  ];
}

/** One POST over `agent`; never rejects (a failure is a status string). */
function post(port: number, agent: Agent, path: string, body: string, timeoutMs = 120_000): Promise<{ status: number | string; ms: number; bytes: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', agent, timeout: timeoutMs, headers: { 'content-type': 'application/json' } }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => (bytes += chunk.length));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, bytes }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ status: error.code ?? error.message, ms: performance.now() - started, bytes: 0 }));
    req.end(body);
  });
}

interface InputRow {
  server: string;
  input: string;
  bodyMiB: number;
  status: number | string;
  ms: number;
  answerBytes: number;
  rssMiB: number;
}

/** Each input posted alone to a fresh server (started by `start`), so that one that never ends holds up no other, and its RSS is its own. */
async function measureInputs(names: string[], start: (name: string) => Promise<Server>, all: Input[]): Promise<InputRow[]> {
  const rows: InputRow[] = [];
  for (const name of names) {
    for (const input of all) {
      const server = await start(name);
      const agent = new Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
      try {
        // Warm-up: the JIT, and the worker thread that takes large bodies.
        await post(server.port, agent, '/validate', bodies().pod5!);
        await post(server.port, agent, '/validate', all.find((each) => each.id === 'inline-64KiB')!.body);
        const result = await post(server.port, agent, input.path, input.body, INPUT_TIMEOUT_MS);
        const row = { server: name, input: input.id, bodyMiB: input.body.length / MiB, status: result.status, ms: result.ms, answerBytes: result.bytes, rssMiB: memory(server.pid).rssMiB };
        rows.push(row);
        console.error(`  ${name.padEnd(7)} ${input.id.padEnd(20)} ${fmt(row.bodyMiB)} MiB: ${row.status} in ${fmt(row.ms)} ms, answer ${row.answerBytes} bytes, RSS ${fmt(row.rssMiB)} MiB; load ${machineLoad()}`);
      } finally {
        agent.destroy();
        await server.stop();
      }
    }
  }
  return rows;
}

interface LoadFigures {
  requests: number;
  p50: number;
  p99: number;
  max: number;
  errors: number;
}

/** Ordinary reviews for `durationS`; meanwhile, if given, one hostile review always in flight, sent by another process (hostile-client.ts). */
async function ordinaryLoad(server: Server, durationS: number, hostile?: Input): Promise<LoadFigures & { hostileAnswered: number; hostileMs: number }> {
  const ordinary = bodies().pod5!;
  const latencies = new Samples();
  const seen = new WeakSet<object>();
  let client: ChildProcess | undefined;
  let report: Promise<string> | undefined;
  if (hostile) {
    const file = join(bodyDir, `${hostile.id}.json`);
    writeFileSync(file, hostile.body);
    client = spawn('setpriv', ['--pdeathsig', 'KILL', '--', process.execPath, join(import.meta.dirname, 'hostile-client.ts'), '--port', String(server.port), '--path', hostile.path, '--body', file], { stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = createInterface({ input: client.stdout! });
    const next = () => new Promise<string>((resolve) => lines.once('line', resolve));
    await next();
    report = next();
  }
  const instance = autocannon(admissionLoad(`https://127.0.0.1:${server.port}/validate`, ordinary, 16, durationS));
  instance.on('response', (connection: object, statusCode: number, _bytes: number, responseTime: number) => {
    // The first response of a connection waited for the TLS handshake.
    if (!seen.has(connection)) return void seen.add(connection);
    if (statusCode === 200) latencies.push(responseTime);
  });
  const result = await instance;
  client?.kill('SIGTERM');
  const { answered, meanMs } = report ? (JSON.parse(await report) as { answered: number; meanMs: number | null }) : { answered: 0, meanMs: null };
  const sorted = latencies.sorted();
  return {
    requests: sorted.length,
    p50: sortedQuantile(sorted, 0.5),
    p99: sortedQuantile(sorted, 0.99),
    max: sorted.at(-1) ?? Number.NaN,
    errors: result.errors + result.timeouts + result.non2xx,
    hostileAnswered: answered,
    hostileMs: meanMs ?? Number.NaN,
  };
}

interface InFlightRow {
  server: string;
  input: string;
  repeat: number;
  alone: LoadFigures;
  during: LoadFigures & { hostileAnswered: number; hostileMs: number };
}

async function measureInFlight(servers: Server[], all: Input[], durationS: number, repeats: number): Promise<InFlightRow[]> {
  const rows: InFlightRow[] = [];
  for (const server of servers) {
    // Warm-up: the JIT; the worker starts with the first hostile review of the first pair.
    await ordinaryLoad(server, Math.min(3, durationS));
    for (let round = 1; round <= repeats; round++) {
      for (const input of all) {
        const alone = await ordinaryLoad(server, durationS);
        const during = await ordinaryLoad(server, durationS, input);
        rows.push({ server: server.name, input: input.id, repeat: round, alone, during });
        console.error(
          `  ${server.name.padEnd(7)} ${input.id.padEnd(20)} round ${round}: p99 ${fmt(alone.p99)} ms alone, ${fmt(during.p99)} ms with it in flight (${fmt(during.p99 / alone.p99)}x); ` +
            `${during.hostileAnswered} hostile answered, ${fmt(during.hostileMs)} ms each; errors ${alone.errors}/${during.errors}; load ${machineLoad()}`,
        );
      }
    }
  }
  return rows;
}

interface HalfOpenFigures {
  server: string;
  attempted: number;
  connected: number;
  refusedAtOnce: number;
  openAfter1s: number;
  openAfter15s: number;
  closedWithinMs: number;
  rssBeforeMiB: number;
  rssPeakMiB: number;
  rssAfterMiB: number;
}

/** `count` connections that send 5 bytes of a TLS record header and wait. */
async function halfOpen(server: Server, count: number): Promise<HalfOpenFigures> {
  const rssBeforeMiB = memory(server.pid).rssMiB;
  let rssPeakMiB = rssBeforeMiB;
  const sample = setInterval(() => (rssPeakMiB = Math.max(rssPeakMiB, memory(server.pid).rssMiB)), 100);
  const started = performance.now();
  const sockets: Socket[] = [];
  let connected = 0;
  let closed = 0;
  let closedImmediately = 0;
  let lastClose = 0;
  for (let i = 0; i < count; i++) {
    const socket = connect({ host: '127.0.0.1', port: server.port });
    sockets.push(socket);
    let opened = 0;
    socket.on('error', () => {});
    socket.once('connect', () => {
      connected++;
      opened = performance.now();
      socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]));
    });
    socket.once('close', () => {
      closed++;
      lastClose = performance.now();
      if (opened && performance.now() - opened < 500) closedImmediately++;
    });
    // A few hundred at a time, as a client could open them.
    if (i % 500 === 499) await sleep(20);
  }
  await sleep(1000);
  const openAfter1s = count - closed;
  await sleep(14_000);
  const openAfter15s = count - closed;
  clearInterval(sample);
  const { rssMiB: rssAfterMiB, hwmMiB } = memory(server.pid);
  rssPeakMiB = Math.max(rssPeakMiB, hwmMiB);
  for (const socket of sockets) socket.destroy();
  await sleep(500);
  return { server: server.name, attempted: count, connected, refusedAtOnce: closedImmediately, openAfter1s, openAfter15s, closedWithinMs: lastClose - started, rssBeforeMiB, rssPeakMiB, rssAfterMiB };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const quick = args.has('quick');
  const durationS = Number(args.get('duration') ?? (quick ? 3 : 8));
  const repeats = Number(args.get('repeats') ?? (quick ? 1 : 3));
  const parts = (args.get('only') ?? 'inputs,in-flight,half-open').split(',');
  const root = args.get('root');
  const beforeRoot = args.get('before-root');
  const label = args.get('label');
  const outDir = join(import.meta.dirname, '../results');
  mkdirSync(outDir, { recursive: true });
  const all = inputs();
  const inFlightInputs = all.filter((input) => ['duplicates-46k', 'bad-values-40k', 'sidecars-1.5MiB', 'labels-3MiB', 'inline-64KiB', 'empty-objects-8MiB'].includes(input.id));

  const certDir = await writeCertificates();
  const start = (name: string, from?: string) => startServer(name, ['--mode', 'app', '--cert-dir', certDir, '--log', 'devnull', '--native-sidecars', ...(from ? ['--root', from] : [])]);
  const servers: Server[] = [];
  const results: { inputs?: InputRow[]; inFlight?: InFlightRow[]; halfOpen?: HalfOpenFigures[] } = {};
  try {
    console.error(`# hostile-input bench: ${parts.join(', ')}; load ${machineLoad()}`);
    if (parts.includes('inputs')) {
      const roots: Record<string, string | undefined> = { app: root, before: beforeRoot };
      results.inputs = await measureInputs(beforeRoot ? ['app', 'before'] : ['app'], (name) => start(name, roots[name]), quick ? all.filter((input) => input.id !== 'duplicates-120k') : all);
    }
    if (parts.includes('in-flight')) {
      // A fresh server, so that the inputs above leave nothing behind; the earlier code only for the input of the report.
      const app = await start('app', root);
      servers.push(app);
      results.inFlight = await measureInFlight([app], quick ? inFlightInputs.slice(0, 2) : inFlightInputs, durationS, repeats);
      await app.stop();
      servers.length = 0;
      if (beforeRoot) {
        const before = await start('before', beforeRoot);
        servers.push(before);
        results.inFlight.push(...(await measureInFlight([before], inFlightInputs.slice(0, 1), durationS, 1)));
        await before.stop();
        servers.length = 0;
      }
    }
    if (parts.includes('half-open')) {
      results.halfOpen = [];
      for (const [name, from] of [['app', root], ...(beforeRoot ? [['before', beforeRoot]] : [])] as Array<[string, string | undefined]>) {
        const server = await start(name, from);
        servers.push(server);
        const figures = await halfOpen(server, quick ? 2000 : 10_000);
        console.error(`  ${name}: ${JSON.stringify(figures)}`);
        results.halfOpen.push(figures);
        await server.stop();
        servers.length = 0;
      }
    }
  } finally {
    for (const server of servers) await server.stop();
    rmSync(certDir, { recursive: true, force: true });
    rmSync(bodyDir, { recursive: true, force: true });
  }
  const markdown = summarise(results, all);
  const suffix = label ? `-${label}` : '';
  writeFileSync(join(outDir, `hostile${suffix}.json`), JSON.stringify({ durationS, repeats, ...results }, null, 1));
  writeFileSync(join(outDir, `hostile${suffix}.md`), markdown);
  console.log(markdown);
}

function summarise(results: { inputs?: InputRow[]; inFlight?: InFlightRow[]; halfOpen?: HalfOpenFigures[] }, all: Input[]): string {
  const out: string[] = [];
  if (results.inputs) {
    const servers = [...new Set(results.inputs.map((row) => row.server))];
    const cell = (server: string, input: string) => {
      const row = results.inputs!.find((each) => each.server === server && each.input === input);
      if (!row) return '';
    if (typeof row.status === 'string') return `no answer within ${INPUT_TIMEOUT_MS / 1000} s`;
    return `${row.status}, ${fmt(row.ms)} ms, ${row.answerBytes > 100_000 ? `${fmt(row.answerBytes / MiB)} MiB` : `${row.answerBytes} B`}, RSS ${fmt(row.rssMiB)} MiB`;
    };
    out.push('### Each input alone\n');
    out.push(table(['input', 'body', ...servers.map((server) => `${server}: status, time, answer, server RSS`)], all.filter((input) => results.inputs!.some((row) => row.input === input.id)).map((input) => [input.what, `${fmt(input.body.length / MiB)} MiB`, ...servers.map((server) => cell(server, input.id))])));
    out.push('');
  }
  if (results.inFlight) {
    out.push('### Ordinary reviews with one hostile review in flight (5-container pod, /validate, 16 connections)\n');
    const groups = [...new Set(results.inFlight.map((row) => `${row.server}\n${row.input}`))];
    out.push(
      table(
        ['server', 'hostile review in flight', 'ordinary answered alone / with', 'p99 alone ms', 'p99 with it ms', 'ratio (median of pairs)', 'max with it ms', 'hostile answered, ms each', 'errors alone / with'],
        groups.map((group) => {
          const [server, input] = group.split('\n') as [string, string];
          const rows = results.inFlight!.filter((row) => row.server === server && row.input === input);
          const m = (f: (row: InFlightRow) => number) => median(rows.map(f));
          return [
            server,
            all.find((each) => each.id === input)!.what,
            `${m((row) => row.alone.requests)} / ${m((row) => row.during.requests)}`,
            fmt(m((row) => row.alone.p99)),
            fmt(m((row) => row.during.p99)),
            `${fmt(m((row) => row.during.p99 / row.alone.p99))}x`,
            fmt(m((row) => row.during.max)),
            `${m((row) => row.during.hostileAnswered)}, ${fmt(m((row) => row.during.hostileMs))}`,
            `${m((row) => row.alone.errors)} / ${m((row) => row.during.errors)}`,
          ];
        }),
      ),
    );
    out.push('');
  }
  if (results.halfOpen) {
    out.push(`### 10,000 half-open TLS connections (5 bytes of a record header each); the chart's memory limit is ${CHART_MEMORY_LIMIT_MIB} MiB\n`);
    out.push(
      table(
        ['server', 'connections', 'closed at once', 'open after 1 s', 'open after 15 s', 'RSS before MiB', 'RSS peak MiB', 'RSS after 15 s MiB'],
        results.halfOpen.map((row) => [row.server, String(row.attempted), String(row.refusedAtOnce), String(row.openAfter1s), String(row.openAfter15s), fmt(row.rssBeforeMiB), fmt(row.rssPeakMiB), fmt(row.rssAfterMiB)]),
      ),
    );
    out.push('');
  }
  return out.join('\n');
}

if (import.meta.main) {
  await main();
  await sleep(0);
}
