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
  /** The request being received has arrived whole (its body too). */
  received: boolean;
  /** Bytes read when the connection was last idle: more means a request has begun arriving. */
  idleBytes: number;
  /** When the first byte of the request now arriving was seen; undefined while idle. */
  arrivingSince: number | undefined;
}

export interface Connections {
  /** Closes every connection with no request in progress (a request arriving counts as one). */
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
  server.on('secureConnection', (socket: TLSSocket) => {
    states.set(socket, { inProgress: 0, received: false, idleBytes: socket.bytesRead, arrivingSince: undefined });
    socket.once('close', () => states.delete(socket));
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const state = states.get(request.socket as TLSSocket);
    if (!state) return;
    state.inProgress++;
    state.received = request.complete;
    if (!state.received) request.once('end', () => (state.received = true));
    response.once('close', () => {
      state.inProgress--;
      state.idleBytes = request.socket.bytesRead;
      state.arrivingSince = undefined;
    });
  });

  const check = setInterval(() => {
    const now = Date.now();
    for (const [socket, state] of states) {
      // Being answered: the answer has its own deadline (the route's).
      if (state.inProgress > 0 && state.received) continue;
      if (state.inProgress === 0 && socket.bytesRead === state.idleBytes) continue;
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
    closeIdle() {
      for (const [socket, state] of states) if (state.inProgress === 0 && state.arrivingSince === undefined && socket.bytesRead === state.idleBytes) socket.destroy();
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
