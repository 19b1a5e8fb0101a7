// Where admission time goes: the webhook server's V8 CPU profiler (node:inspector, started after
// a warm-up, see server.ts --profile-out) runs while autocannon loads one endpoint, and the
// profile is summarised by category and by function.
//
//   node bench/webhook/profile.ts [--quick] [--duration S] [--concurrency 16] [--body pod5]
//                                 [--root DIR] [--label NAME] [--keep]
//
// One server process (and one profile) per endpoint, and one of the empty fastify route for
// reference (not with --root). A sample is charged to the innermost frame
// of its stack that a category rule matches, so JSON.parse called from parseJsonBody counts as
// body parsing and structuredClone called from withManagedLabel as the mutation's deep copy.
// "(program)" is native time outside JS (OpenSSL, syscalls, the V8 runtime). Shares are of the
// busy (non-idle) samples. Writes bench/results/profile[-LABEL].md; --keep keeps the
// .cpuprofile files (open them in Chrome DevTools) under bench/results/profiles/.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { machineLoad } from '../lib/proc.ts';
import { profileTables, summarise, type CpuProfile, type Rule } from '../lib/cpuprofile.ts';
import { fmt, parseArgs } from '../lib/stats.ts';
import { scenarios } from './reviews.ts';
import { load, startServer, writeCertificates } from './run.ts';

/** Ordered rules: the first rule matching a frame names its category. */
const RULES: Rule[] = [
  ['body: JSON.parse', (f) => (f.url.endsWith('src/webhook/schema.ts') && f.functionName === 'parseJsonBody') || f.url.includes('/secure-json-parse/')],
  ['profiler', (f) => f.url === 'node:inspector' || f.url.startsWith('node:inspector/')],
  ['body: depth check', (f) => f.url.endsWith('src/webhook/schema.ts') && f.functionName === 'depthExceeds'],
  ['envelope schema (ajv)', (f) => /^validate\d+$/.test(f.functionName) || f.url.includes('/ajv/')],
  ['mutate: deep copy (structuredClone)', (f) => (f.url.endsWith('src/webhook/mutating-handlers.ts') && f.functionName === 'withManagedLabel') || f.functionName === 'structuredClone'],
  ['mutate: JSON Patch diff', (f) => f.url.endsWith('src/webhook/json-patch.ts') || f.url.includes('internal/util/comparisons')],
  ['decision: patch encoding (JSON + base64)', (f) => f.url.endsWith('src/webhook/admission.ts')],
  ['policy: validation rules', (f) => f.url.includes('/src/policy/') || f.url.endsWith('src/webhook/validating-handler.ts') || f.url.endsWith('src/webhook/mutating-handlers.ts')],
  ['logging (pino)', (f) => /\/(pino|sonic-boom|pino-std-serializers)\//.test(f.url) || (f.url.endsWith('src/webhook/app.ts') && f.functionName === 'requestContext')],
  ['metrics (prom-client)', (f) => f.url.includes('/prom-client/')],
  ['reply serialisation (JSON.stringify)', (f) => f.url.includes('/fastify/lib/reply.js') && /serialize/i.test(f.functionName)],
  ['fastify (routing, hooks, reply)', (f) => /\/(fastify|find-my-way|avvio|@fastify|fast-json-stringify|secure-json-parse|light-my-request)\//.test(f.url) || f.url.endsWith('src/webhook/app.ts')],
  // TLSWrap encrypts in the write call, which also runs loopback TCP delivery in the kernel.
  ['TLS encrypt + socket write (native)', (f) => f.url === '' && /^write(Utf8String|Buffer|v|Latin1String|AsciiString)$/.test(f.functionName)],
  ['TLS (node core)', (f) => /^node:(_tls|tls|internal\/tls|crypto|internal\/crypto)/.test(f.url)],
  ['HTTP (node core)', (f) => /^node:(_http|http|internal\/http)/.test(f.url)],
  ['sockets, streams, timers (node core)', (f) => /^node:/.test(f.url)],
  ['GC', (f) => f.functionName === '(garbage collector)'],
  ['native: OpenSSL, syscalls, V8 runtime ("(program)")', (f) => f.functionName === '(program)'],
  ['idle', (f) => f.functionName === '(idle)'],
];

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const quick = args.has('quick');
  const durationS = Number(args.get('duration') ?? (quick ? 4 : 15));
  const concurrency = Number(args.get('concurrency') ?? 16);
  const bodyId = args.get('body') ?? 'pod5';
  const root = args.get('root');
  const label = args.get('label');
  const outDir = join(import.meta.dirname, '../results');
  mkdirSync(outDir, { recursive: true });
  const certDir = await writeCertificates();
  const sections: string[] = [];
  try {
    // The webhook's endpoints, then (for reference) the empty route with the same body.
    const runs = scenarios()
      .filter((s) => s.bodyId === bodyId)
      .map((scenario) => ({ scenario, mode: 'app', title: `${scenario.id} (${scenario.path})` }));
    if (!root) {
      const body = runs[0]!.scenario;
      runs.push({ scenario: { ...body, id: `${bodyId}-empty`, path: '/validate' }, mode: 'empty', title: `empty fastify route, ${bodyId} body` });
    }
    for (const { scenario, mode, title } of runs) {
      const profileDir = mkdtempSync(join(tmpdir(), 'st-bench-prof-'));
      const file = join(profileDir, 'webhook.cpuprofile');
      const server = await startServer(mode, ['--mode', mode, '--cert-dir', certDir, '--profile-out', file, ...(root ? ['--root', root] : [])], [], true);
      let result;
      try {
        await load(server, scenario.path, scenario.body, concurrency, quick ? 1 : 3); // warm-up, not profiled
        process.kill(server.pid, 'SIGUSR2');
        await sleep(200);
        console.error(`# profiling ${scenario.id} at ${concurrency} connections for ${durationS} s, load ${machineLoad()}`);
        result = await load(server, scenario.path, scenario.body, concurrency, durationS);
      } finally {
        await server.stop();
      }
      const summary = summarise(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, RULES);
      if (args.has('keep')) {
        mkdirSync(join(outDir, 'profiles'), { recursive: true });
        copyFileSync(file, join(outDir, 'profiles', `${scenario.id}${label ? `-${label}` : ''}.cpuprofile`));
      }
      rmSync(profileDir, { recursive: true, force: true });
      sections.push(
        `### ${title}, ${concurrency} connections: ${fmt(result.requestsPerSecond)} req/s under the profiler, p99 ${fmt(result.p99)} ms\n`,
        profileTables(summary),
      );
    }
  } finally {
    rmSync(certDir, { recursive: true, force: true });
  }
  const markdown = sections.join('\n');
  writeFileSync(join(outDir, `profile${label ? `-${label}` : ''}.md`), markdown);
  console.log(markdown);
}

if (import.meta.main) await main();
