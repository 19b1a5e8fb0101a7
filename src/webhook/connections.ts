// The webhook's own account of its TLS connections: which has a request arriving, since when,
// and which are idle.
//
// Node's headersTimeout and requestTimeout count a connection's first request from the moment it
// connects, so they close a connection that has not been used yet after timeoutSeconds. Go's HTTP
// client (the API server's) pools a connection it dialed for a request that another connection
// served first, and may send its first request on it at the very moment the server closes it: the
// API server then counts a failed webhook call, and under failurePolicy Ignore admits the pod
// without the mutating webhook. Here a request's deadline runs from its first byte to its last,
// so a connection not used yet is idle like a kept-alive one (the client closes it), and a slow or
// stalled sender still loses its connection after the deadline, with 408 as Node would answer.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { TLSSocket } from 'node:tls';

interface ConnectionState {
  /** Requests received and not answered yet. */
  inProgress: number;
  /** The last request whose headers arrived; its `complete` says its body has arrived too. */
  request: IncomingMessage | undefined;
  /** Bytes read when the connection was last idle: more means a request has begun arriving. */
  idleBytes: number;
  /** When the first byte of the request now arriving was seen; undefined while idle. */
  arrivingSince: number | undefined;
}

export interface Connections {
  /** The time a request has from its first byte to its last. */
  readonly deadlineMs: number;
  /**
   * Closes every connection with no request in progress (a request arriving counts as one), and
   * from then on each as soon as it is idle: for a server that is shutting down.
   */
  closeIdle(): void;
}

const tracked = new WeakMap<HttpsServer, Connections>();

const REQUEST_TIMEOUT_RESPONSE = 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n';

/**
 * Tracks the server's connections and closes one whose request has not arrived whole within
 * `deadlineMs` of its first byte, looking every `checkEveryMs` (so up to that much later, as
 * Node's own check). Call before the server listens.
 */
export function trackConnections(server: HttpsServer, options: { deadlineMs: number; checkEveryMs: number }): Connections {
  const states = new Map<TLSSocket, ConnectionState>();
  let closing = false;
  // bytesRead counts the decrypted bytes only: handshake, alerts and tickets do not move it.
  const idle = (socket: TLSSocket, state: ConnectionState) => state.inProgress === 0 && socket.bytesRead === state.idleBytes;
  server.on('secureConnection', (socket: TLSSocket) => {
    if (closing) return void socket.destroy();
    states.set(socket, { inProgress: 0, request: undefined, idleBytes: socket.bytesRead, arrivingSince: undefined });
    socket.once('close', () => states.delete(socket));
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket as TLSSocket;
    const state = states.get(socket);
    if (!state) return;
    state.inProgress++;
    state.request = request;
    response.once('close', () => {
      state.inProgress--;
      // Bytes of a next request already read (pipelined, which the API server never does) count
      // as idle here, and only Node's own limit, the idle time, bounds that request.
      state.idleBytes = socket.bytesRead;
      state.arrivingSince = undefined;
      if (closing && idle(socket, state)) socket.destroy();
    });
  });

  const check = setInterval(() => {
    const now = Date.now();
    for (const [socket, state] of states) {
      // Arrived whole and being answered: the answer has its own deadline (the route's). `complete`
      // is the parser's, whether or not the body has been read yet.
      if (state.inProgress > 0 && state.request?.complete) continue;
      if (idle(socket, state)) continue;
      state.arrivingSince ??= now;
      if (now - state.arrivingSince < options.deadlineMs) continue;
      states.delete(socket);
      // 408 only where no answer has begun, as Node does; then the connection is closed.
      const response = (socket as TLSSocket & { _httpMessage?: ServerResponse | null })._httpMessage;
      if (socket.writable && !response?.headersSent) socket.end(REQUEST_TIMEOUT_RESPONSE);
      socket.destroySoon();
      setTimeout(() => socket.destroy(), 1000).unref();
    }
  }, options.checkEveryMs);
  check.unref();
  server.once('close', () => clearInterval(check));

  const connections: Connections = {
    deadlineMs: options.deadlineMs,
    closeIdle() {
      closing = true;
      for (const [socket, state] of states) if (idle(socket, state)) socket.destroy();
    },
  };
  tracked.set(server, connections);
  return connections;
}

/** The connections trackConnections tracks for `server`. */
export function connectionsOf(server: HttpsServer): Connections {
  const connections = tracked.get(server);
  if (!connections) throw new Error('the server\'s connections are not tracked: build it with buildApp');
  return connections;
}
