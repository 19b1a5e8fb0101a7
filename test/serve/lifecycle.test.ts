// src/serve/lifecycle.ts with fakes: whileLeader runs a service only while this replica holds the
// Lease, and the webhook's Drain stops its server in order and within its grace period.
import type { Server as HttpsServer } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { Drain, whileLeader, type LeaderStartPolicy, type Service } from '../../src/serve/lifecycle.ts';
import { capturingLogger } from '../support/logger.ts';
import { waitFor } from '../support/wait.ts';

/** An elector whose leadership the test hands out and takes back. */
function fakeElector() {
  const calls: string[] = [];
  let onStarted = () => {};
  let onStopped = () => {};
  return {
    calls,
    elector: {
      run(started: () => void, stopped: () => void) {
        onStarted = started;
        onStopped = stopped;
      },
      async release(standBackMs: number) {
        calls.push(`release ${standBackMs}`);
      },
      async stop() {
        calls.push('elector stop');
      },
    },
    acquire: () => onStarted(),
    lose: () => onStopped(),
  };
}

/** Services that record what happens to them; `failStarts` of them fail to start first. */
function fakeServices(options: { failStarts?: number; stopDelayMs?: number } = {}) {
  const calls: string[] = [];
  const terms: AbortSignal[] = [];
  let created = 0;
  const create = (term: AbortSignal): Service & { id: number } => {
    const id = ++created;
    terms.push(term);
    return {
      id,
      async start() {
        calls.push(`start ${id}`);
        if (id <= (options.failStarts ?? 0)) throw new Error(`service ${id} cannot start`);
      },
      async stop() {
        calls.push(`stop ${id}${term.aborted ? ' (term over)' : ''}`);
        if (options.stopDelayMs) await sleep(options.stopDelayMs);
        calls.push(`stopped ${id}`);
      },
    };
  };
  return { calls, terms, create, created: () => created };
}

const policy = (overrides: Partial<LeaderStartPolicy> = {}): LeaderStartPolicy => ({ backoff: () => 1, giveUpAfterMs: 10_000, standBackMs: 5_000, ...overrides });
const settle = () => sleep(20);
/** Waits for timers that a busy machine may run late. */
const until = (what: string, condition: () => boolean) => waitFor(what, condition, { timeoutMs: 5000, intervalMs: 5 });

t.test('whileLeader: a standby runs nothing; a leader runs one service, with its term', async (t) => {
  const { elector, acquire } = fakeElector();
  const services = fakeServices();
  const leading = whileLeader(elector, services.create, capturingLogger().logger, policy());
  await settle();
  t.equal(services.created(), 0, 'nothing created before the Lease is held');
  t.equal(leading.current(), undefined);

  acquire();
  await settle();
  t.same(services.calls, ['start 1']);
  t.equal(leading.current()?.id, 1, 'current() is the started service');
  t.equal(services.terms[0]!.aborted, false, 'its term runs while leading');
});

t.test('whileLeader: losing the Lease ends the term at once, then stops the service; regaining it starts a fresh one', async (t) => {
  const { elector, acquire, lose } = fakeElector();
  const services = fakeServices();
  const leading = whileLeader(elector, services.create, capturingLogger().logger, policy());
  acquire();
  await settle();

  lose();
  t.equal(services.terms[0]!.aborted, true, 'the term is aborted before anything else');
  await settle();
  t.same(services.calls, ['start 1', 'stop 1 (term over)', 'stopped 1']);
  t.equal(leading.current(), undefined, 'nothing runs while standing by');

  acquire();
  await settle();
  t.same(services.calls.slice(3), ['start 2'], 'a new service, not the old one restarted');
  t.equal(leading.current()?.id, 2);
  t.equal(services.terms[1]!.aborted, false, 'with a term of its own');
});

t.test('whileLeader: a quick loss and regain waits for the old service to stop before starting the new one', async (t) => {
  const { elector, acquire, lose } = fakeElector();
  const services = fakeServices({ stopDelayMs: 30 });
  const leading = whileLeader(elector, services.create, capturingLogger().logger, policy());
  acquire();
  await settle();
  lose();
  acquire();
  await until('the second service', () => leading.current()?.id === 2);
  t.same(services.calls, ['start 1', 'stop 1 (term over)', 'stopped 1', 'start 2']);
  t.equal(leading.current()?.id, 2);
});

t.test('whileLeader: a service that fails to start is stopped and a fresh one retried with the backoff', async (t) => {
  const { elector, acquire, calls: electorCalls } = fakeElector();
  const services = fakeServices({ failStarts: 2 });
  const { logger, lines } = capturingLogger();
  const backoffs: number[] = [];
  const leading = whileLeader(elector, services.create, logger, policy({ backoff: (attempt) => (backoffs.push(attempt), 5) }));
  acquire();
  await until('a started service', () => leading.current() !== undefined);
  t.same(services.calls, ['start 1', 'stop 1', 'stopped 1', 'start 2', 'stop 2', 'stopped 2', 'start 3']);
  t.same(backoffs, [1, 2], 'the backoff of each retry');
  t.equal(leading.current()?.id, 3);
  t.same(
    lines.map((line) => line.message),
    ['failed to start after becoming leader; retrying', 'failed to start after becoming leader; retrying', 'started after becoming leader, at a retry'],
  );
  t.same(electorCalls, [], 'the Lease is kept');
});

t.test('whileLeader: a leader that cannot start within giveUpAfterMs releases the Lease and stands back', async (t) => {
  const { elector, acquire, calls: electorCalls } = fakeElector();
  const services = fakeServices({ failStarts: Infinity });
  const { logger, lines } = capturingLogger();
  const leading = whileLeader(elector, services.create, logger, policy({ backoff: () => 20, giveUpAfterMs: 50, standBackMs: 1234 }));
  acquire();
  await until('the Lease released', () => electorCalls.length > 0);
  t.same(electorCalls, ['release 1234'], 'released, standing back standBackMs');
  t.equal(services.terms.at(-1)!.aborted, true, 'the term ends with the Lease');
  const created = services.created();
  t.ok(created >= 1 && created <= 4, `retried only while within the limit (${created} attempts)`);
  await sleep(60);
  t.equal(services.created(), created, 'no attempt after giving up');
  t.equal(leading.current(), undefined);
  t.equal(lines.at(-1)?.message, 'could not start after becoming leader; releasing the Lease for another replica');
});

t.test('whileLeader: losing the Lease during the retries stops them', async (t) => {
  const { elector, acquire, lose } = fakeElector();
  const services = fakeServices({ failStarts: Infinity });
  whileLeader(elector, services.create, capturingLogger().logger, policy({ backoff: () => 30 }));
  acquire();
  await settle();
  lose();
  await sleep(80);
  t.equal(services.created(), 1, 'no retry once the term is over');
});

t.test('whileLeader: a service whose start completes after the Lease is lost is stopped, never current', async (t) => {
  const { elector, acquire, lose } = fakeElector();
  let finishStart = () => {};
  const stopped: number[] = [];
  const leading = whileLeader(
    elector,
    () => ({ start: () => new Promise<void>((resolve) => (finishStart = resolve)), stop: async () => void stopped.push(1) }),
    capturingLogger().logger,
    policy(),
  );
  acquire();
  await settle();
  lose();
  finishStart();
  await settle();
  t.same(stopped, [1]);
  t.equal(leading.current(), undefined);
});

t.test('whileLeader: stop() stops the running service while still leading, then ends the term, then stops the elector', async (t) => {
  const { elector, acquire, calls: electorCalls } = fakeElector();
  const services = fakeServices();
  const leading = whileLeader(elector, services.create, capturingLogger().logger, policy());
  acquire();
  await settle();
  await leading.stop();
  t.same(services.calls, ['start 1', 'stop 1', 'stopped 1'], 'stopped with its term still running: it finishes what it does');
  t.equal(services.terms[0]!.aborted, true, 'then the term ends');
  t.same(electorCalls, ['elector stop']);
  t.equal(leading.current(), undefined);
});

t.test('whileLeader: stop() during the retries of a start ends them at once', async (t) => {
  const { elector, acquire, calls: electorCalls } = fakeElector();
  const services = fakeServices({ failStarts: Infinity });
  const leading = whileLeader(elector, services.create, capturingLogger().logger, policy({ backoff: () => 10_000, giveUpAfterMs: 60_000 }));
  acquire();
  await settle();
  const begun = Date.now();
  await leading.stop();
  t.ok(Date.now() - begun < 5000, `not waiting out the backoff of 10 s (${Date.now() - begun} ms)`);
  t.equal(services.created(), 1);
  t.same(electorCalls, ['elector stop']);
});

/** The part of a fastify app Drain.stop uses, recording when each happens. */
function fakeApp(options: { closeTakesMs?: number } = {}) {
  const begun = Date.now();
  const events: Array<{ event: string; atMs: number }> = [];
  const at = (event: string) => events.push({ event, atMs: Date.now() - begun });
  let finishClose = () => {};
  const server = {
    closeAllConnections() {
      at('closeAllConnections');
      finishClose();
    },
  } as unknown as HttpsServer;
  const close = () => {
    at('close');
    return new Promise<void>((resolve) => {
      finishClose = resolve;
      if (options.closeTakesMs !== undefined) setTimeout(resolve, options.closeTakesMs);
    });
  };
  return { app: { server, close }, events };
}

t.test('Drain: draining from the moment stop begins; the server keeps listening for drainMs, then closes', async (t) => {
  const { logger, lines } = capturingLogger();
  const drain = new Drain({ drainMs: 60, graceMs: 1000, logger });
  const { app, events } = fakeApp({ closeTakesMs: 10 });
  t.equal(drain.draining(), false, 'not draining before stop');
  const stopped = drain.stop(app);
  t.equal(drain.draining(), true, 'draining at once: /readyz fails and answers close their connections');
  await new Promise((resolve) => setImmediate(resolve));
  t.same(events, [], 'still listening during the drain');
  await stopped;
  t.same(events.map((each) => each.event), ['close']);
  t.ok(events[0]!.atMs >= 55, `closed after the drain (${events[0]!.atMs} ms)`);
  t.same(lines, [], 'closed within the grace period: nothing forced, nothing logged');
});

t.test('Drain: connections still open when the grace period after the drain is over are closed', async (t) => {
  const { logger, lines } = capturingLogger();
  const drain = new Drain({ drainMs: 40, graceMs: 80, logger });
  const { app, events } = fakeApp();
  await drain.stop(app);
  t.same(events.map((each) => each.event), ['close', 'closeAllConnections']);
  const [close, forced] = events;
  t.ok(close!.atMs >= 35, `close after the drain (${close!.atMs} ms)`);
  t.ok(forced!.atMs - close!.atMs >= 75, `forced graceMs after close began (${forced!.atMs - close!.atMs} ms)`);
  t.same(lines, [{ level: 'warn', fields: { graceMs: 80 }, message: 'shutdown grace period over; closing the remaining connections' }]);
});
