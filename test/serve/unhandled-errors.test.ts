// src/serve.ts's exitOnUnhandledErrors in a process of its own: an error nothing handled ends serve
// with exit code 1, and its last log line, and every line before it, reaches stdout whole and in
// order, although serve's log is written off the event loop (src/serve/log.ts): the exit waits for
// the write under way (logWritten, also tested here on its own).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { logWritten, serveLogger } from '../../src/serve/log.ts';
import { repoRoot } from '../support/repo.ts';

/** Lines logged just before the error: enough that a write is under way when it strikes. */
const BURST = 5000;

/**
 * How long the test leaves the process's stdout unread from its start: most of the burst is still
 * waiting to be written when the error strikes, and fills the pipe, so the exit has to wait for it.
 */
const READER_PAUSE_MS = 400;

/** A process with serve's logger and handlers that logs BURST lines, then meets `failure`. */
function failingProcess(failure: string): string {
  return `
    import { serveLogger } from ${JSON.stringify(pathToFileURL(`${repoRoot}/src/serve/log.ts`).href)};
    import { exitOnUnhandledErrors } from ${JSON.stringify(pathToFileURL(`${repoRoot}/src/serve.ts`).href)};
    const logger = serveLogger('info');
    exitOnUnhandledErrors(logger);
    for (let line = 1; line <= ${BURST}; line++) logger.info({ line }, 'busy');
    ${failure}
  `;
}

for (const { kind, failure } of [
  { kind: 'uncaught exception', failure: "setImmediate(() => { throw new Error('boom'); });" },
  { kind: 'unhandled promise rejection', failure: "setImmediate(() => Promise.reject(new Error('boom')));" },
]) {
  t.test(`${kind}: exit 1, the last line said and none lost`, async (t) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', failingProcess(failure)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.stdout.pause();
    setTimeout(() => child.stdout.resume(), READER_PAUSE_MS);
    const [code] = (await once(child, 'close')) as [number | null];
    t.equal(code, 1, `exit code 1 (stderr: ${stderr.slice(0, 500)})`);
    const records = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { msg: string; line?: number; err?: { message: string } });
    const busy = records.filter((record) => record.msg === 'busy').map((record) => record.line);
    t.same(busy, Array.from({ length: BURST }, (_, index) => index + 1), `all ${BURST} lines before the error, in order`);
    const last = records.at(-1);
    t.equal(last?.msg, `${kind}: exiting`, 'the last line says why serve exits');
    t.equal(last?.err?.message, 'boom', 'with the error');
  });
}

t.test('logWritten ends the logger destination once every line is written, a child logger included', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'st-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'log');
  const logger = serveLogger('info', file);
  for (let line = 1; line <= BURST; line++) logger.child({ component: 'test' }).info({ line }, 'busy');
  await logWritten(logger.child({ component: 'test' }), 5_000);
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  t.equal(lines.length, BURST, `all ${BURST} lines are in the file when it resolves`);
  t.throws(() => logger.info('after'), /destroyed/, 'and the destination is ended');
});
