// One hostile review always in flight, in a process of its own so that its TLS work does not
// delay the load generator measuring the ordinary reviews (bench/webhook/hostile.ts).
//
//   node bench/webhook/hostile-client.ts --port N --path /validate --body FILE
//
// Posts the body, and again as soon as it is answered, until SIGTERM; then prints one JSON line
// {"answered":N,"meanMs":N} (answers that came after SIGTERM are not counted).
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { parseArgs } from '../lib/stats.ts';

const args = parseArgs(process.argv.slice(2));
const body = readFileSync(args.get('body')!);
const agent = new Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
let running = true;
let answered = 0;
let totalMs = 0;

function post(): Promise<void> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port: Number(args.get('port')), path: args.get('path'), method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => {
        if (running) {
          answered++;
          totalMs += performance.now() - started;
        }
        resolve();
      });
    });
    req.on('error', () => resolve());
    req.end(body);
  });
}

process.once('SIGTERM', () => {
  running = false;
  process.stdout.write(`${JSON.stringify({ answered, meanMs: answered > 0 ? totalMs / answered : null })}\n`);
  process.exit(0);
});
process.stdout.write('ready\n');
while (running) await post();
