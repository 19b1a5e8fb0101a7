// How `serve` runs what composition.ts built: start each component in turn, wait for SIGTERM or
// SIGINT, stop them all together; the webhook's drain; and a component that runs only while
// this replica holds the leader Lease. Nothing here knows what a component does.
import type { Server as HttpsServer } from 'node:https';
import { flushCompileCache } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LeaderElector } from '../kube/leader-election.ts';
import type { Logger } from '../logger.ts';
import type { Connections } from '../webhook/connections.ts';

export type Stop = () => Promise<void>;
/** Starts something and returns how to stop it. */
export type Component = () => Promise<Stop>;

/** Starts `components` in order, then runs until SIGTERM or SIGINT; a component that fails to start stops those already running. */
export async function runUntilSignal(components: readonly Component[], logger: Logger): Promise<void> {
  const stops: Stop[] = [];
  // Together: the watcher stops taking pods at once (finishing those it is on) while the webhook drains.
  const stopAll = async () => {
    await Promise.all(stops.map((stop) => stop()));
  };
  try {
    for (const start of components) stops.push(await start());
  } catch (err) {
    await stopAll();
    throw err;
  }
  logger.info('started');
  // What was compiled to start is written to the compile cache (the image's NODE_COMPILE_CACHE)
  // now, not only at a graceful exit: the next start of the container reads it after a crash or
  // an OOM kill too. Without NODE_COMPILE_CACHE this does nothing.
  flushCompileCache();
  const signal = await nextSignal();
  logger.info({ signal }, 'shutting down');
  await stopAll();
  logger.info('stopped');
}

function nextSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      resolve(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}

/** Something that runs between start() and stop(), such as the watcher. */
export interface Service {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** How a leader retries starting its service, and when it gives the Lease up instead. */
export interface LeaderStartPolicy {
  /** Delay before the n-th retry (n starts at 1). */
  backoff(attempt: number): number;
  /** A leader whose service has not started this long after its first failure releases the Lease. */
  giveUpAfterMs: number;
  /** How long a replica that released the Lease stands back before campaigning again. */
  standBackMs: number;
}

/**
 * Runs a fresh service from `create` each time this replica becomes leader and stops it when
 * leadership is lost, so a standby runs nothing. Each term has its signal, which `create` hands
 * to the service's API client (src/kube/fenced-client.ts): when leadership is lost it aborts at
 * once, so nothing of the term reaches the API server any more, before the service is stopped.
 * A leader is working or gives the Lease up: a service that fails to start is stopped and a fresh
 * one started again, with `policy.backoff`, until it starts or `policy.giveUpAfterMs` has passed;
 * then the Lease is released for another replica (a problem of this replica's own, such as its
 * network, is left behind) and this one stands back before campaigning again. `current()` is the
 * running service, once started. The returned stop ends the service first (still leading, it
 * finishes what it is doing), then the term, then hands the Lease over.
 */
export function whileLeader<S extends Service>(elector: Pick<LeaderElector, 'run' | 'release' | 'stop'>, create: (term: AbortSignal) => S, logger: Logger, policy: LeaderStartPolicy): { current(): S | undefined; stop: Stop } {
  let service: S | undefined;
  /** Aborted when the leadership that started it ends: its requests stop, a start in its retries stops retrying. */
  let term = new AbortController();
  // Start and stop in turn, never overlapping: a quick loss and regain waits for the stop.
  let transitions: Promise<void> = Promise.resolve();

  const startLeading = async (signal: AbortSignal): Promise<void> => {
    const firstFailure = Date.now();
    for (let attempt = 1; !signal.aborted; attempt++) {
      const candidate = create(signal);
      try {
        await candidate.start();
      } catch (error) {
        await candidate.stop().catch(() => undefined);
        const failingForMs = Date.now() - firstFailure;
        const retryInMs = policy.backoff(attempt);
        if (failingForMs + retryInMs > policy.giveUpAfterMs) {
          logger.error({ err: error, attempt, failingForMs, standBackMs: policy.standBackMs }, 'could not start after becoming leader; releasing the Lease for another replica');
          await elector.release(policy.standBackMs);
          term.abort(); // the term ends with the Lease given up
          return;
        }
        logger.error({ err: error, attempt, retryInMs }, 'failed to start after becoming leader; retrying');
        await sleep(retryInMs, undefined, { signal }).catch(() => undefined);
        continue;
      }
      if (signal.aborted) {
        await candidate.stop();
        return;
      }
      service = candidate;
      if (attempt > 1) logger.info({ attempt, afterMs: Date.now() - firstFailure }, 'started after becoming leader, at a retry');
      return;
    }
  };

  elector.run(
    () => {
      const { signal } = (term = new AbortController());
      transitions = transitions.then(() => startLeading(signal));
    },
    () => {
      term.abort();
      transitions = transitions.then(async () => {
        const stopped = service;
        service = undefined;
        await stopped?.stop();
      });
    },
  );
  return {
    current: () => service,
    async stop() {
      // A start still in its retries stops retrying; a running service finishes what it does first.
      if (!service) term.abort();
      await transitions;
      const stopped = service;
      service = undefined;
      await stopped?.stop();
      term.abort();
      await elector.stop();
    },
  };
}

/** The part of a fastify app the drain needs. */
interface ClosableServer {
  server: HttpsServer;
  close(): PromiseLike<unknown>;
}

/**
 * The webhook's graceful stop. `draining()` turns true when stop() begins: /readyz then fails
 * (the Service drops this endpoint) and every answer carries `Connection: close` (clients move
 * to another replica) while the server still listens for `drainMs` (--shutdown-drain); then it
 * stops listening, answers what it has received, and closes what is left when the grace period
 * is over. A preStop sleep in front of it (the chart's) covers the time endpoints take to reach
 * every API server and kube-proxy, while the server still answers normally.
 */
export class Drain {
  private active = false;
  private closeUnused: () => void = () => {};
  private readonly graceMs: number;
  private readonly drainMs: number;
  private readonly logger: Logger;

  constructor(options: { graceMs: number; drainMs: number; logger: Logger }) {
    this.graceMs = options.graceMs;
    this.drainMs = options.drainMs;
    this.logger = options.logger;
  }

  readonly draining = (): boolean => this.active;

  /** The server's connections (connectionsOf), tracked since before it listened, so every one is seen. */
  track(connections: Connections): void {
    // Node's closeIdleConnections() (which app.close() calls) leaves alone a connection that has
    // not sent a request yet, as if it were busy, so shutdown would wait the whole grace period
    // for it: Go's HTTP client (the API server) keeps such connections in its pool.
    this.closeUnused = () => connections.closeIdle();
  }

  async stop(app: ClosableServer): Promise<void> {
    this.active = true;
    await sleep(this.drainMs);
    const timer = setTimeout(() => {
      this.logger.warn({ graceMs: this.graceMs }, 'shutdown grace period over; closing the remaining connections');
      app.server.closeAllConnections();
    }, this.graceMs);
    const closed = app.close();
    this.closeUnused();
    await closed;
    clearTimeout(timer);
  }
}
