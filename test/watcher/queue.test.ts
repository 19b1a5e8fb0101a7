import t from 'tap';
import { WorkQueue } from '../../src/watcher/queue.ts';
import { DEFAULT_BACKOFF, exponentialBackoff } from '../../src/watcher/retries.ts';
import { waitFor } from '../support/wait.ts';

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** The queue's timers run in milliseconds: look often. */
const soon = { intervalMs: 2, timeoutMs: 10_000 };

t.test('a key added many times while waiting is processed once', async (t) => {
  const seen: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const queue = new WorkQueue<string>({ concurrency: 1, process: async (key) => { seen.push(key); if (key === 'a') await gate; } });
  queue.add('a');
  for (let i = 0; i < 5; i++) queue.add('b');
  release();
  await queue.idle();
  t.same(seen, ['a', 'b']);
});

t.test('a key is never processed twice at once; added while running, it runs again after', async (t) => {
  let running = 0;
  let maxRunning = 0;
  let runs = 0;
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const queue = new WorkQueue<string>({
    concurrency: 4,
    process: async () => {
      running++;
      runs++;
      maxRunning = Math.max(maxRunning, running);
      if (runs === 1) await gate;
      running--;
    },
  });
  queue.add('pod');
  await tick();
  queue.add('pod');
  queue.add('pod');
  await tick();
  t.equal(maxRunning, 1, 'not concurrently');
  release();
  await queue.idle();
  t.equal(runs, 2, 'once more after the running one, however often it was added');
});

t.test('bounded concurrency, nothing lost in a burst', async (t) => {
  let running = 0;
  let maxRunning = 0;
  const done = new Set<number>();
  const queue = new WorkQueue<number>({
    concurrency: 8,
    process: async (key) => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      await tick();
      done.add(key);
      running--;
    },
  });
  for (let i = 0; i < 2000; i++) queue.add(i);
  await queue.idle();
  t.equal(done.size, 2000);
  t.equal(maxRunning, 8);
});

t.test('failures retry with backoff for as long as they fail: no cap, the delay grows up to its maximum', async (t) => {
  const attempts = new Map<string, number>();
  const errors: Array<[number, number]> = [];
  const queue = new WorkQueue<string>({
    concurrency: 2,
    backoff: (attempt) => Math.min(4, attempt),
    onError: (_key, _error, attempt, retryInMs) => errors.push([attempt, retryInMs]),
    process: async (key) => {
      const n = (attempts.get(key) ?? 0) + 1;
      attempts.set(key, n);
      if (key === 'flaky' && n < 3) throw new Error('conflict');
      if (key === 'broken' && n < 40) throw new Error('refused by a webhook');
    },
  });
  queue.add('flaky');
  queue.add('broken');
  await waitFor('40 attempts of the broken key', () => attempts.get('broken') === 40, soon);
  await queue.idle();
  t.equal(attempts.get('flaky'), 3, 'succeeds on the third attempt');
  t.equal(attempts.get('broken'), 40, 'still retried after 39 failures in a row (the old cap was 15)');
  t.same(errors.filter(([attempt]) => attempt >= 4).map(([, delay]) => delay).slice(0, 3), [4, 4, 4], 'the delay stops growing at its maximum');
  t.equal(queue.retrying, 0, 'nothing left to retry');
  t.same(exponentialBackoff(100, 1000)(1), 100);
  t.same(exponentialBackoff(100, 1000)(3), 400);
  t.same(exponentialBackoff(100, 1000)(10), 1000, 'capped');
  t.ok(DEFAULT_BACKOFF(30) <= 5 * 60_000 && DEFAULT_BACKOFF(30) >= 60_000, 'the default backoff is capped in minutes');
});

t.test('a result asks to look again later; a shorter delay replaces a longer one', async (t) => {
  const runs: string[] = [];
  const queue = new WorkQueue<string>({
    concurrency: 1,
    process: async (key) => {
      runs.push(key);
      return runs.length === 1 ? { requeueAfterMs: 20 } : {};
    },
  });
  queue.add('pod');
  await waitFor('two runs', () => runs.length === 2, soon);
  t.same(runs, ['pod', 'pod'], 'processed again after the delay');
  queue.addAfter('later', 60_000);
  queue.addAfter('later', 10);
  await waitFor('the key asked to come back later', () => runs.includes('later'), soon);
  t.ok(runs.includes('later'), 'the shorter delay won');
  await queue.shutDown();
});

t.test('retryNow retries the failed keys at once, not the keys asked to come back later', async (t) => {
  let down = true;
  const runs = new Map<string, number>();
  const queue = new WorkQueue<string>({
    concurrency: 4,
    backoff: () => 60_000,
    process: async (key) => {
      runs.set(key, (runs.get(key) ?? 0) + 1);
      if (key === 'grace') return runs.get(key) === 1 ? { requeueAfterMs: 60_000 } : {};
      if (down) throw new Error('connect ECONNREFUSED');
    },
  });
  for (const key of ['a', 'b', 'grace']) queue.add(key);
  await waitFor('two keys retrying', () => queue.retrying === 2, soon);
  t.equal(queue.retrying, 2, 'two keys wait a minute for their retry');
  down = false;
  queue.retryNow();
  await waitFor('a second run of each failed key', () => runs.get('a') === 2 && runs.get('b') === 2, soon);
  await queue.idle();
  t.equal(queue.retrying, 0);
  t.equal(runs.get('grace'), 1, 'the key asked to come back later was not run early');
  await queue.shutDown();
});

t.test('the observer hears each result, its duration, and each retry', async (t) => {
  const processed: string[] = [];
  const retries: number[] = [];
  let fail = true;
  const queue = new WorkQueue<string>({
    concurrency: 1,
    backoff: () => 1,
    observer: { processed: (outcome, seconds) => processed.push(`${outcome}:${seconds >= 0}`), retrying: (attempt) => retries.push(attempt) },
    process: async (key) => {
      if (key === 'x' && fail) {
        fail = false;
        throw new Error('once');
      }
      return key === 'later' ? { requeueAfterMs: 60_000 } : {};
    },
  });
  queue.add('x');
  queue.add('later');
  await waitFor('three keys processed', () => processed.length === 3, soon);
  t.same(processed.sort(), ['done:true', 'error:true', 'requeue:true']);
  t.same(retries, [1]);
  await queue.shutDown();
});

t.test('shutDown waits for running keys and cancels retries', async (t) => {
  let finished = false;
  let calls = 0;
  const queue = new WorkQueue<string>({
    concurrency: 1,
    backoff: () => 10_000,
    process: async (key) => {
      calls++;
      if (key === 'fails') throw new Error('x');
      await new Promise((resolve) => setTimeout(resolve, 20));
      finished = true;
    },
  });
  queue.add('fails');
  queue.add('slow');
  await tick();
  await tick();
  await queue.shutDown();
  t.ok(finished, 'the running key finished');
  queue.add('late');
  await tick();
  t.equal(calls, 2, 'nothing runs after shutdown, the retry is cancelled');
});
