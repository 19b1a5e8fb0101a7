import t from 'tap';
import { WorkQueue, exponentialBackoff } from '../../src/watcher/queue.ts';

const tick = () => new Promise((resolve) => setImmediate(resolve));

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

t.test('failures retry with backoff until success, or are dropped after maxRetries', async (t) => {
  const attempts = new Map<string, number>();
  const errors: number[] = [];
  const queue = new WorkQueue<string>({
    concurrency: 2,
    backoff: () => 1,
    maxRetries: 3,
    onError: (_key, _error, attempt) => errors.push(attempt),
    process: async (key) => {
      const n = (attempts.get(key) ?? 0) + 1;
      attempts.set(key, n);
      if (key === 'flaky' && n < 3) throw new Error('conflict');
      if (key === 'broken') throw new Error('always');
    },
  });
  queue.add('flaky');
  queue.add('broken');
  await new Promise((resolve) => setTimeout(resolve, 100));
  await queue.idle();
  t.equal(attempts.get('flaky'), 3, 'succeeds on the third attempt');
  t.equal(attempts.get('broken'), 4, 'first try plus three retries');
  t.same(exponentialBackoff(100, 1000)(1), 100);
  t.same(exponentialBackoff(100, 1000)(3), 400);
  t.same(exponentialBackoff(100, 1000)(10), 1000, 'capped');
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
