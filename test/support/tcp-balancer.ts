// A loopback round-robin TCP proxy standing for a Service in front of webhook replicas: each
// client connection goes to the next backend in turn and its bytes are piped through untouched
// (TLS included, so the client sees the replica's own certificate).
//
// A backend is skipped as a Service skips a pod whose endpoint is removed: explicitly with
// remove() (what the endpoints controller does when a pod turns unready or terminating), and
// passively when it refuses a connection (a killed replica), in which case the connection is
// retried on the next backend and the refusing one is left out for `downForMs`. Connections
// already piped to a backend stay with it until either side closes them, as conntrack keeps
// established flows on a removed endpoint.
//
// blackhole() makes it a network that stops carrying data, without closing anything: it reads
// nothing from either side of any connection (bytes pile up in the kernel's buffers, as unacked
// data does on a dead path) and connects new clients to no backend, until heal(), which resumes
// everything where it stopped, as TCP retransmission would. A side that resets its connection
// meanwhile (RST) loses what it had sent and not yet seen forwarded; one that merely closes it
// (FIN) has its bytes forwarded first.
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface Backend {
  host: string;
  port: number;
}

export interface BalancerStats {
  /** Client connections accepted. */
  accepted: number;
  /** Client connections piped to a backend, by `host:port`. */
  routed: Record<string, number>;
  /** Connection attempts a backend refused (each was retried on the next backend). */
  refused: number;
  /** Client connections closed because no backend accepted them. */
  dropped: number;
}

export interface TcpBalancer {
  port: number;
  /** The backends in rotation now. */
  backends(): Backend[];
  add(backend: Backend): void;
  /** Takes a backend out of rotation for new connections; established ones are left alone. */
  remove(backend: Backend): void;
  /** Stops carrying data, on every connection and for new ones, until heal(). */
  blackhole(): void;
  heal(): void;
  stats(): BalancerStats;
  /** Closes the listener and every piped connection. */
  stop(): Promise<void>;
}

const keyOf = (backend: Backend) => `${backend.host}:${backend.port}`;

export async function startTcpBalancer(initial: Backend[] = [], options: { host?: string; port?: number; downForMs?: number } = {}): Promise<TcpBalancer> {
  const downForMs = options.downForMs ?? 2000;
  let rotation: Backend[] = [...initial];
  let next = 0;
  const downUntil = new Map<string, number>();
  const sockets = new Set<Socket>();
  const stats: BalancerStats = { accepted: 0, routed: {}, refused: 0, dropped: 0 };
  /** The piped pairs, to stop and resume. */
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  /** Clients that arrived during a black hole, connected once it heals. */
  let held: Socket[] | undefined;

  /** The backends to try for one connection, starting at the next in turn; those marked down go last. */
  function candidates(): Backend[] {
    if (rotation.length === 0) return [];
    const start = next++ % rotation.length;
    const ordered = [...rotation.slice(start), ...rotation.slice(0, start)];
    const now = Date.now();
    const up = ordered.filter((backend) => (downUntil.get(keyOf(backend)) ?? 0) <= now);
    return [...up, ...ordered.filter((backend) => !up.includes(backend))];
  }

  function track(socket: Socket): void {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  }

  function connectTo(client: Socket, queue: Backend[]): void {
    const backend = queue.shift();
    if (!backend || client.destroyed) {
      if (!backend) stats.dropped++;
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: backend.host, port: backend.port });
    track(upstream);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      stats.routed[keyOf(backend)] = (stats.routed[keyOf(backend)] ?? 0) + 1;
      upstream.setNoDelay(true);
      const pair = { client, upstream };
      pairs.add(pair);
      upstream.once('close', () => pairs.delete(pair));
      if (held) return; // a black hole began while it connected: carried from heal() on
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    upstream.on('error', (error: NodeJS.ErrnoException) => {
      if (connected) {
        client.destroy();
        return;
      }
      if (error.code === 'ECONNREFUSED' || error.code === 'ECONNRESET') {
        stats.refused++;
        downUntil.set(keyOf(backend), Date.now() + downForMs);
      }
      connectTo(client, queue);
    });
    // Either side closing ends the pair; half-closes are passed on by pipe().
    upstream.once('close', () => {
      if (connected) client.destroy();
    });
    client.once('close', () => upstream.destroy());
  }

  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    stats.accepted++;
    track(client);
    client.setNoDelay(true);
    client.on('error', () => client.destroy());
    if (held) held.push(client);
    else connectTo(client, candidates());
  });
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolveListen);
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');

  return {
    port: address.port,
    backends: () => [...rotation],
    add(backend) {
      if (!rotation.some((b) => keyOf(b) === keyOf(backend))) rotation = [...rotation, backend];
      downUntil.delete(keyOf(backend));
    },
    remove(backend) {
      rotation = rotation.filter((b) => keyOf(b) !== keyOf(backend));
    },
    blackhole() {
      if (held) return;
      held = [];
      for (const { client, upstream } of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    heal() {
      const waiting = held ?? [];
      held = undefined;
      for (const { client, upstream } of pairs) {
        client.pipe(upstream);
        upstream.pipe(client);
      }
      for (const client of waiting) if (!client.destroyed) connectTo(client, candidates());
    },
    stats: () => structuredClone(stats),
    async stop() {
      const closed = new Promise<void>((resolveClose) => server.close(() => resolveClose()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
