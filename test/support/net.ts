// Network helpers shared by the tests, the benchmarks and `make dev`: TCP ports leased for the
// processes they start, the status of a GET or a POST, and a TLS handshake.
//
// A child process binds its port itself, later than the port is chosen. A port that was merely
// free (listen on 0, read it, close) can be taken in between: by the next such choice, or by any
// outgoing connection of the machine, since port 0 and connect() both draw from the ephemeral
// range. So a port is leased instead:
// - its number lies outside the ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), so no
//   outgoing connection and no bind to port 0 can take it, and outside the NodePort range;
// - it is leased host-wide by binding the abstract Unix socket `sidecar-terminator-port-<N>`
//   (Linux; one such name space per network namespace, as for ports). The leasing process holds it until it
//   releases the port, and the kernel releases it when that process dies, even by SIGKILL: no
//   lock file left behind whose owner's death must be guessed from a pid. Every test file, the
//   benchmarks, `make dev` and the other checkouts on this host lease the same way, so no two
//   hold the same number, and one owner's ports are all held at once;
// - it is bound once (TCP, every address) before it is handed out, to pass over a number some
//   other program listens on.
// Holding the TCP port itself until the child binds would need the child to take the socket over
// (etcd, kube-apiserver and kubelet cannot), or a close just before the child starts, which
// leaves the race in place. What remains is a program outside these leases binding a leased
// number in between: startups retry that once on new ports (retryOnPortTaken).
import { readFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { get as httpsGet, request as httpsRequest, type Agent } from 'node:https';
import { createServer, type Server } from 'node:net';
import tls from 'node:tls';

/** Lower bound of the leased numbers: below are the well-known ports of many services (etcd 2379, 6443, 8080, kubelet 10250...). */
const LOWEST_PORT = 16384;
/** Kubernetes' default NodePort range, which kube-proxy serves on the host's addresses. */
const NODE_PORTS = { low: 30000, high: 32767 };
const LEASE_PREFIX = '\0sidecar-terminator-port-';

export interface PortRange {
  low: number;
  high: number;
}

/** The ephemeral range of this machine (Linux's default where /proc does not say). */
export function ephemeralPortRange(path = '/proc/sys/net/ipv4/ip_local_port_range'): PortRange {
  try {
    const [low, high] = readFileSync(path, 'utf8').trim().split(/\s+/).map(Number);
    if (low !== undefined && high !== undefined && low > 0 && high >= low) return { low, high };
  } catch {
    // not Linux
  }
  return { low: 32768, high: 60999 };
}

/** The ranges ports are leased from: LOWEST_PORT..65535 without the ephemeral and the NodePort ranges. */
export function leasablePortRanges(ephemeral: PortRange = ephemeralPortRange()): PortRange[] {
  let ranges: PortRange[] = [{ low: LOWEST_PORT, high: 65535 }];
  for (const cut of [ephemeral, NODE_PORTS]) {
    ranges = ranges.flatMap(({ low, high }) =>
      [{ low, high: Math.min(high, cut.low - 1) }, { low: Math.max(low, cut.high + 1), high }].filter((part) => part.low <= part.high),
    );
  }
  if (ranges.length === 0) {
    throw new Error(`no port to lease: the ephemeral range ${ephemeral.low}-${ephemeral.high} (net.ipv4.ip_local_port_range) covers ${LOWEST_PORT}-65535; narrow it, e.g. sysctl -w net.ipv4.ip_local_port_range="32768 60999"`);
  }
  return ranges;
}

/**
 * TCP ports leased host-wide for one owner (a cluster, a serve process): each new port is chosen
 * while the ones before it are still held, and all are held until release() or the process ends.
 */
export class PortLease {
  private readonly held = new Map<number, Server>();
  private readonly ranges: PortRange[];

  /** `ranges`: where to lease from (default: leasablePortRanges()). */
  constructor(ranges: PortRange[] = leasablePortRanges()) {
    this.ranges = ranges;
  }

  /** The ports held, in the order they were taken. */
  get ports(): number[] {
    return [...this.held.keys()];
  }

  /** A port no other lease on this host holds and nothing listens on. */
  async take(): Promise<number> {
    const size = this.ranges.reduce((sum, { low, high }) => sum + high - low + 1, 0);
    for (let attempt = 0; attempt < 500; attempt++) {
      const port = this.nth(Math.floor(Math.random() * size));
      if (this.held.has(port)) continue;
      const lock = await listening((server, done) => server.listen(LEASE_PREFIX + port, done));
      if (!lock) continue;
      lock.unref();
      if (!(await tcpPortFree(port))) {
        lock.close();
        continue;
      }
      this.held.set(port, lock);
      return port;
    }
    throw new Error(`no TCP port could be leased in ${this.ranges.map(({ low, high }) => `${low}-${high}`).join(', ')} after 500 tries: nearly all are leased or listened on`);
  }

  /** Gives back every port held. Idempotent. */
  release(): void {
    for (const lock of this.held.values()) lock.close();
    this.held.clear();
  }

  private nth(index: number): number {
    for (const { low, high } of this.ranges) {
      if (index <= high - low) return low + index;
      index -= high - low + 1;
    }
    throw new Error(`port index out of range: ${index}`);
  }
}

/** Whether nothing listens on `port`, on any address (IPv6 and IPv4 where IPv6 is there). */
async function tcpPortFree(port: number): Promise<boolean> {
  const server = await listening((s, done) => s.listen({ port, exclusive: true }, done));
  if (!server) return false;
  await new Promise((resolveClose) => server.close(resolveClose));
  return true;
}

/** A server once `listen` succeeded; undefined when it failed (the address is taken). */
function listening(listen: (server: Server, done: () => void) => void): Promise<Server | undefined> {
  return new Promise((resolveListen) => {
    const server = createServer();
    server.once('error', () => resolveListen(undefined));
    listen(server, () => resolveListen(server));
  });
}

/** The status of a GET over HTTP or HTTPS (any certificate) on a fresh connection; undefined when nothing answers within 2 s. */
export function httpStatus(url: string): Promise<number | undefined> {
  return new Promise((resolveStatus) => {
    const getter = url.startsWith('https:') ? httpsGet : httpGet;
    const req = getter(url, { rejectUnauthorized: false, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      resolveStatus(res.statusCode);
    });
    req.on('error', () => resolveStatus(undefined));
    req.on('timeout', () => req.destroy());
  });
}

/**
 * The status of an HTTPS POST of `body` to 127.0.0.1:`port` (any certificate), once the answer is
 * read to its end (so a kept-alive connection is free again); when the request fails, the error's
 * code (ECONNRESET, ...) instead. `contentType`: no Content-Type header without it. `agent`: the
 * connections to use (the global agent's without it).
 */
export function postStatus(port: number, path: string, body: string, options: { contentType?: string; agent?: Agent } = {}): Promise<number | string> {
  return new Promise((resolvePost) => {
    const headers = { ...(options.contentType ? { 'content-type': options.contentType } : {}), 'content-length': Buffer.byteLength(body) };
    const req = httpsRequest({ host: '127.0.0.1', port, path, method: 'POST', agent: options.agent, rejectUnauthorized: false, headers }, (res) => {
      res.resume();
      res.on('end', () => resolvePost(res.statusCode ?? 'none'));
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolvePost(error.code ?? error.message));
    req.end(body);
  });
}

/** A TLS handshake with the server at 127.0.0.1:`port` (its certificate is not checked): what was agreed, or why it failed. */
export function handshake(port: number, options: tls.ConnectionOptions = {}): Promise<{ protocol: string | null; fingerprint: string; cipher: string | undefined } | { error: string }> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...options }, () => {
      resolve({ protocol: socket.getProtocol(), fingerprint: socket.getPeerCertificate().fingerprint256, cipher: socket.getCipher().standardName });
      socket.end();
    });
    socket.on('error', (error: Error) => resolve({ error: error.message }));
  });
}
