// The server side of the webhook benchmark, run in its own process (the load generator gets
// the other core). Prints one JSON line `{"port":N,"pid":N}` once it listens on 127.0.0.1.
//
//   node bench/webhook/server.ts --mode app   --cert-dir DIR [--log devnull|stdout|off] [--root DIR] [--native-sidecars]
//   node bench/webhook/server.ts --mode empty --cert-dir DIR
//   ... --profile-out FILE: SIGUSR2 starts the V8 CPU profiler (node:inspector, 250 us samples),
//       SIGTERM stops it and writes FILE (a .cpuprofile) before exiting: only the load is profiled,
//       not the start-up.
//
// app:   the webhook's own buildApp (schema, policy, metrics, one log line per decision),
//        as `serve` builds it. --root points at another checkout (e.g. an earlier commit extracted under /tmp)
//        whose src/webhook/app.ts is used instead of this one.
// bench/webhook/run.ts runs this file bundled as the image's bundles are (scripts/bundle.ts), with
// the image's Node flags, so that the webhook's code runs as it does in the image.
// empty: the framework's limit: a stock fastify HTTPS server (default JSON body parser, no
//        schema, no logger) whose /validate and /mutate return a constant AdmissionReview.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { serveLogger } from '../../src/serve/log.ts';
import { buildApp as ownBuildApp } from '../../src/webhook/app.ts';
import { parseArgs } from '../lib/stats.ts';

type AppModule = typeof import('../../src/webhook/app.ts');

const args = parseArgs(process.argv.slice(2));
const mode = args.get('mode') ?? 'app';
const certDir = args.get('cert-dir');
if (!certDir) throw new Error('--cert-dir is required');
const tls = { key: readFileSync(join(certDir, 'key.pem'), 'utf8'), cert: readFileSync(join(certDir, 'cert.pem'), 'utf8') };
const BODY_LIMIT = 8 * 1024 * 1024; // serve's default --body-limit

let app: FastifyInstance;
if (mode === 'app') {
  const root = args.get('root');
  const { buildApp } = root ? ((await import(pathToFileURL(join(resolve(root), 'src/webhook/app.ts')).href)) as AppModule) : { buildApp: ownBuildApp };
  const log = args.get('log') ?? 'devnull';
  // serve's own logger (src/serve/log.ts), writing to /dev/null: its cost without a terminal or a
  // pipe reader in the measurement. A checkout from before that file logged synchronously.
  const dest = log === 'stdout' ? 1 : '/dev/null';
  const serveLog = root ? join(resolve(root), 'src/serve/log.ts') : undefined;
  const logger =
    log === 'off'
      ? false
      : serveLog && !existsSync(serveLog)
        ? pino({ level: 'info' }, pino.destination({ dest, sync: true }))
        : (serveLog ? ((await import(pathToFileURL(serveLog).href)) as typeof import('../../src/serve/log.ts')) : { serveLogger }).serveLogger('info', dest);
  app = buildApp({
    enforcement: 'deny',
    quickExitImageAllowlist: [],
    bodyLimit: BODY_LIMIT,
    logger,
    https: tls,
    readiness: () => ({ ready: true }),
    // /native-sidecars migrates, as serve's --native-sidecars on a cluster that runs native sidecars.
    nativeSidecars: args.has('native-sidecars'),
  });
} else if (mode === 'empty') {
  app = Fastify({ https: { ...tls, minVersion: 'TLSv1.2' }, bodyLimit: BODY_LIMIT, logger: false });
  const answer = { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'c7a9e2d4-0000-4000-8000-000000000000', allowed: true } };
  // Async like the webhook's own routes, so that the baseline pays for the same promise per request.
  // eslint-disable-next-line @typescript-eslint/require-await
  app.post('/validate', async () => answer);
  // eslint-disable-next-line @typescript-eslint/require-await
  app.post('/mutate', async () => answer);
} else {
  throw new Error(`--mode: app or empty, got ${JSON.stringify(mode)}`);
}

await app.listen({ host: '127.0.0.1', port: Number(args.get('port') ?? 0) });
const address = app.server.address();
if (address === null || typeof address === 'string') throw new Error('no TCP address');
process.stdout.write(`${JSON.stringify({ port: address.port, pid: process.pid })}\n`);

const profileOut = args.get('profile-out');
let profiler: Session | undefined;
if (profileOut) {
  process.on('SIGUSR2', () => {
    if (profiler) return;
    profiler = new Session();
    profiler.connect();
    void profiler
      .post('Profiler.enable')
      .then(() => profiler!.post('Profiler.setSamplingInterval', { interval: 250 }))
      .then(() => profiler!.post('Profiler.start'))
      .then(() => process.stderr.write('profiler started\n'));
  });
}

process.once('SIGTERM', () => {
  void (async () => {
    if (profiler && profileOut) {
      const { profile } = await profiler.post('Profiler.stop');
      writeFileSync(profileOut, JSON.stringify(profile));
    }
    await app.close();
    process.exit(0);
  })();
});
