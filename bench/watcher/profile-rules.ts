// How the watcher benchmark sorts the slim watcher's CPU profile into categories, and a command
// to summarise a saved profile again:
//
//   node bench/watcher/profile-rules.ts bench/results/profile-watcher-slim.cpuprofile
import { readFileSync } from 'node:fs';
import { profileTables, summarise, type CpuProfile, type Rule } from '../lib/cpuprofile.ts';
import { fmt } from '../lib/stats.ts';

/** Where the slim watcher's CPU went over the whole run (growth and bursts). */
export const WATCHER_RULES: Rule[] = [
  ['policy: decide', (f) => f.url.includes('/src/policy/')],
  ['watcher: reconcile, queue, actions, events', (f) => f.url.includes('/src/watcher/') || f.url.includes('/src/kube/')],
  ['client-node: watch stream (JSON.parse of events)', (f) => f.url.includes('/@kubernetes/client-node/dist/watch.js')],
  ['client-node: ObjectSerializer (typed (de)serialisation)', (f) => f.url.includes('/@kubernetes/client-node/') && /ObjectSerializer|serializ/i.test(f.url + f.functionName)],
  ['client-node: request plumbing', (f) => f.url.includes('/@kubernetes/client-node/')],
  ['undici (HTTP client)', (f) => f.url.includes('undici')],
  ['logging (pino)', (f) => /\/(pino|sonic-boom|pino-std-serializers)\//.test(f.url)],
  ['metrics (prom-client)', (f) => f.url.includes('/prom-client/')],
  ['TLS encrypt + socket write (native)', (f) => f.url === '' && /^write(Utf8String|Buffer|v|Latin1String|AsciiString)$/.test(f.functionName)],
  ['TLS (node core)', (f) => /^node:(_tls|tls|internal\/tls|crypto|internal\/crypto)/.test(f.url)],
  ['start-up: loading and compiling modules', (f) => /^node:internal\/(modules|bootstrap)/.test(f.url) || ['compileSourceTextModule', 'wrapSafe', 'compileForInternalLoader', 'internalModuleStat', 'readFileUtf8'].includes(f.functionName)],
  ['node core (streams, HTTP/2, timers)', (f) => /^node:/.test(f.url)],
  ['GC', (f) => f.functionName === '(garbage collector)'],
  ['native ("(program)")', (f) => f.functionName === '(program)'],
  ['idle', (f) => f.functionName === '(idle)'],
];


if (import.meta.main) {
  for (const file of process.argv.slice(2)) {
    const summary = summarise(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, WATCHER_RULES);
    console.log(`### ${file} (${fmt(summary.busyMs / 1000, 1)} CPU s)\n\n${profileTables(summary, 20)}`);
  }
}
