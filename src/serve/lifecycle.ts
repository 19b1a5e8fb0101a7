// How `serve` runs what composition.ts built: start each component in turn, wait for SIGTERM or
// SIGINT, stop them all together; the webhook's drain; and a component that runs only while
// this replica holds the leader Lease. Nothing here knows what a component does.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TLSSocket } from 'node:tls';
import type { LeaderElector } from '../kube/leader-election.ts';
import type { Logger } from '../logger.ts';

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

/**
 * Runs a fresh service from `create` each time this replica becomes leader and stops it when
 * leadership is lost, so a standby runs nothing. `current()` is the running one, if any. The
 * returned stop ends the service first, then hands the Lease over.
 */
export function whileLeader<S extends Service>(elector: LeaderElector, create: () => S, logger: Logger): { current(): S | undefined; stop: Stop } {
  let service: S | undefined;
  // Start and stop in turn, never overlapping: a quick loss and regain waits for the stop.
  let transitions: Promise<void> = Promise.resolve();
  elector.run(
    () => {
      const started = (service = create());
      transitions = transitions.then(() => started.start()).catch((error: unknown) => logger.error({ err: error }, 'failed to start after becoming leader'));
    },
    () => {
      const stopped = service;
      service = undefined;
      transitions = transitions.then(() => stopped?.stop());
    },
  );
  return {
    current: () => service,
    async stop() {
      const stopped = service;
      service = undefined;
      await transitions;
      await stopped?.stop();
      await elector.stop();
    },
  };
}

/** How long a stopping webhook keeps serving (unready, closing each connection after its answer) before it stops listening. */
export const SHUTDOWN_DRAIN_MS = 3000;

/** The part of a fastify app the drain needs. */
interface ClosableServer {
  server: HttpsServer;
  close(): PromiseLike<unknown>;
}

/**
 * The webhook's graceful stop. `draining()` turns true when stop() begins: /readyz then fails
 * (the Service drops this endpoint) and every answer carries `Connection: close` (clients move
 * to another replica) while the server still listens for SHUTDOWN_DRAIN_MS (at most a quarter of
 * the grace period); then it stops listening, answers what it has received, and closes what is
 * left when the grace period is over.
 */
export class Drain {
  private active = false;
  private closeUnused: () => void = () => {};
  private readonly graceMs: number;
  private readonly logger: Logger;

  constructor(options: { graceMs: number; logger: Logger }) {
    this.graceMs = options.graceMs;
    this.logger = options.logger;
  }

  readonly draining = (): boolean => this.active;

  /** Call before the server listens, so every connection is seen. */
  track(server: HttpsServer): void {
    this.closeUnused = trackUnusedConnections(server);
  }

  async stop(app: ClosableServer): Promise<void> {
    this.active = true;
    await sleep(Math.min(SHUTDOWN_DRAIN_MS, this.graceMs / 4));
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

/**
 * Node's closeIdleConnections() (which app.close() calls) leaves alone a connection that has
 * not sent a request yet, as if it were busy, so shutdown would wait the whole grace period for
 * it. Go's HTTP client (the API server) keeps such connections in its pool. Returns a function
 * that closes every TLS connection with no request in progress.
 */
function trackUnusedConnections(server: HttpsServer): () => void {
  const inProgress = new Map<TLSSocket, number>();
  server.on('secureConnection', (socket: TLSSocket) => {
    inProgress.set(socket, 0);
    socket.once('close', () => inProgress.delete(socket));
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket as TLSSocket;
    inProgress.set(socket, (inProgress.get(socket) ?? 0) + 1);
    response.once('close', () => {
      const requests = inProgress.get(socket);
      if (requests !== undefined) inProgress.set(socket, requests - 1);
    });
  });
  return () => {
    for (const [socket, requests] of inProgress) if (requests === 0) socket.destroy();
  };
}
