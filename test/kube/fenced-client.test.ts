// The watcher's client while its replica leads (src/kube/fenced-client.ts), against a local HTTPS
// server that plays an API server whose network is gone: it takes the connection and never reads
// it. When the term ends, the request in progress is aborted, its connection reset (the server
// sees ECONNRESET and never receives the bytes left unread), and the next request is refused
// before anything is sent.
import { once } from 'node:events';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { CoreV1Api, HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import t from 'tap';
import { reuseConnections } from '../../src/kube/client.ts';
import { TermEnded, fencedKubeConfig } from '../../src/kube/fenced-client.ts';
import { issueWithNewCa } from '../../src/tls/certificates.ts';

const tls = await issueWithNewCa({ hosts: ['127.0.0.1'], validityMs: 3_600_000, now: new Date() });

interface Stalled {
  server: Server;
  port: number;
  /** What happened to each connection: its bytes read and how it ended. */
  connections: Array<{ bytes: number; end?: 'reset' | 'closed' }>;
  /** Starts reading again (the network is back). */
  heal(): void;
}

/** A server that accepts TLS connections and reads nothing until heal(), as a network that stopped carrying data (`stalled`). */
async function stalledServer(stalled = true): Promise<Stalled> {
  const sockets: Socket[] = [];
  let reading = !stalled;
  const connections: Stalled['connections'] = [];
  const server = createServer({ key: tls.key, cert: tls.cert }, (request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{"kind":"Pod","metadata":{"name":"p"}}'));
  });
  server.on('secureConnection', (socket: Socket) => {
    const record: Stalled['connections'][number] = { bytes: 0 };
    connections.push(record);
    socket.on('data', (chunk: Buffer) => (record.bytes += chunk.length));
    socket.on('error', (error: NodeJS.ErrnoException) => (record.end = error.code === 'ECONNRESET' ? 'reset' : 'closed'));
    socket.on('close', () => (record.end ??= 'closed'));
    if (!reading) socket.pause();
    sockets.push(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port, connections, heal: () => {
      reading = true;
      for (const socket of sockets) socket.resume();
    },
  };
}

function kubeConfigFor(port: number): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: `https://127.0.0.1:${port}`, caData: Buffer.from(tls.caBundle).toString('base64'), skipTLSVerify: false }],
    users: [{ name: 'u', token: 'not-a-real-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return reuseConnections(kubeConfig);
}

t.test('the end of the term aborts the request in progress and resets its connection; later requests are refused unsent', async (t) => {
  const stalled = await stalledServer();
  t.teardown(() => {
    stalled.server.closeAllConnections();
    stalled.server.close();
  });
  const term = new AbortController();
  const core = fencedKubeConfig(kubeConfigFor(stalled.port), term.signal).makeApiClient(CoreV1Api);

  const write = core.createNamespacedPod({ namespace: 'default', body: { metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'i' }] } } });
  const settled = write.then(() => 'answered', (error: unknown) => error);
  await t.resolveMatch(
    new Promise((resolve) => setTimeout(resolve, 300)).then(() => stalled.connections.length),
    1,
    'the request was sent on a connection of its own; the server has not read it',
  );
  term.abort();
  const error = await settled;
  t.not(error, 'answered', 'the request in progress is aborted');
  await new Promise((resolve) => setTimeout(resolve, 200));
  stalled.heal();
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.same(stalled.connections, [{ bytes: 0, end: 'reset' }], 'its connection was reset: the request never reaches the server, even once the network is back');

  await t.rejects(core.readNamespacedPod({ namespace: 'default', name: 'p' }), 'a request after the end fails');
  t.equal(stalled.connections.length, 1, 'without opening a connection');
});

t.test('while the term lasts, requests go through', async (t) => {
  const stalled = await stalledServer(false);
  t.teardown(() => {
    stalled.server.closeAllConnections();
    stalled.server.close();
  });
  const term = new AbortController();
  const core = fencedKubeConfig(kubeConfigFor(stalled.port), term.signal).makeApiClient(CoreV1Api);
  const pod = await core.readNamespacedPod({ namespace: 'default', name: 'p' });
  t.equal(pod.metadata?.name, 'p');
  t.equal((await core.readNamespacedPod({ namespace: 'default', name: 'p' })).metadata?.name, 'p', 'and again');
  term.abort();
  await t.rejects(core.readNamespacedPod({ namespace: 'default', name: 'p' }));
  t.ok(new TermEnded().message.includes('no longer leads'));
});

t.test('while the term lasts, one dispatcher per TLS settings: a rotated CA gets a new one, as the pooled client does (latestDispatcher)', async (t) => {
  const { caBundle: rotated } = await issueWithNewCa({ hosts: ['127.0.0.1'], validityMs: 3_600_000, now: new Date() });
  const fenced = fencedKubeConfig(kubeConfigFor(6443), new AbortController().signal);
  const dispatcher = async () => {
    const context = new RequestContext('https://127.0.0.1:6443/api/v1/pods', HttpMethod.GET);
    await fenced.applySecurityAuthentication(context);
    return context.getDispatcher();
  };
  const first = await dispatcher();
  t.equal(await dispatcher(), first, 'the same settings, the same dispatcher');
  (fenced.getCurrentCluster() as { caData?: string }).caData = Buffer.from(rotated).toString('base64');
  const second = await dispatcher();
  t.not(second, first, 'a new CA, a new dispatcher');
  t.equal(await dispatcher(), second, 'then reused again');
});
