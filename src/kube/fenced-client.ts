// A client whose requests stop for good, at once, when its signal aborts: what a watcher runs with
// while its replica leads. Every request carries the signal, and every connection is a TCP socket
// of its own under TLS, which the end of the term resets (RST): a request that was written but
// not yet delivered (its bytes waiting in a socket's queue while the network to the API server
// is down) is dropped with the connection, instead of arriving later, when another replica may
// already act. A closed socket (FIN) would keep retrying to deliver it. After the end, every
// request fails before it is sent.
import { connect as connectTcp, isIP, type Socket } from 'node:net';
import { connect as connectTls, type ConnectionOptions, type TLSSocket } from 'node:tls';
import { KubeConfig, type Cluster } from '@kubernetes/client-node';
import type { AgentOptions } from 'node:https';
import { latestDispatcher, withRequestSignal, type Dispatcher } from './client.ts';

/** What undici passes a connector. */
interface ConnectTarget {
  hostname: string;
  port: string | number;
  servername?: string;
}
type Connector = (target: ConnectTarget, callback: (error: Error | null, socket: TLSSocket | null) => void) => void;
type CreateDispatcher = (cluster: Cluster | null, agentOptions: AgentOptions) => Dispatcher | undefined;

/** The error of every request made after the end of the term. */
export class TermEnded extends Error {
  constructor() {
    super('this replica no longer leads: its requests to the API server are stopped');
    this.name = 'TermEnded';
  }
}

export function fencedKubeConfig(kubeConfig: KubeConfig, signal: AbortSignal): KubeConfig {
  const sockets = new Set<Socket>();
  const fenced = withRequestSignal(kubeConfig, () => signal);
  const ended = () => signal.aborted;

  const connector = (tls: ConnectionOptions): Connector => (target, callback) => {
    if (ended()) return callback(new TermEnded(), null);
    const raw = connectTcp({ host: target.hostname, port: Number(target.port) || 443 });
    sockets.add(raw);
    raw.once('close', () => sockets.delete(raw));
    raw.setNoDelay(true);
    // As client-node's own connections: keep-alive probes after 30 s idle.
    raw.setKeepAlive(true, 30_000);
    const servername = target.servername || (isIP(target.hostname) ? undefined : target.hostname);
    // host: the name the certificate is checked against (an IP address too).
    const secure = connectTls({ ...tls, socket: raw, host: target.hostname, ...(servername ? { servername } : {}) });
    let answered = false;
    const answer = (error: Error | null) => {
      if (answered) return;
      answered = true;
      callback(error, error ? null : secure);
    };
    secure.once('secureConnect', () => answer(null));
    secure.once('error', (error: Error) => answer(error));
  };

  // One dispatcher while the TLS settings stay the same (as reuseConnections), built by
  // client-node itself around the connector above.
  const latest = latestDispatcher();
  const create = (KubeConfig.prototype as unknown as { createDispatcher: CreateDispatcher }).createDispatcher;
  (fenced as unknown as { createDispatcher: CreateDispatcher }).createDispatcher = (cluster, agentOptions) => {
    if (ended()) throw new TermEnded();
    const options = kubeConfig.createDispatcherOptions(cluster, agentOptions);
    // A proxy, or plain HTTP (kubectl proxy): the signal still aborts each request, the sockets are not ours to reset.
    if (options.type !== 'agent' || !cluster?.server.startsWith('https:')) return create.call(kubeConfig, cluster, agentOptions);
    const shim = { createDispatcherOptions: () => ({ type: 'agent', connect: connector(options.connect) }) };
    return latest(options, () => create.call(shim, cluster, agentOptions));
  };

  // Registered before any request's own listener: the sockets are reset before undici closes them.
  signal.addEventListener('abort', () => {
    for (const socket of sockets) socket.resetAndDestroy();
    sockets.clear();
  }, { once: true });
  return fenced;
}
