// An API server stand-in, for the client's own requests: it records each request (method, path
// and query, content type, body) and answers every one with one status and body. Over HTTPS with
// a CA of its own, which the kubeconfig trusts, or plain HTTP (with insecure-skip-tls-verify, as
// behind `kubectl proxy`).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createSecureServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import type { Test } from 'tap';
import { issueWithNewCa } from '../../src/tls/certificates.ts';

export interface RecordedRequest {
  method: string;
  url: string;
  contentType: string | undefined;
  accept: string | undefined;
  body: string;
}

/**
 * Records each request, answers `status` with `answer` (never, with `hang`, which is called
 * instead once the request has arrived); over HTTPS unless `plainHttp`.
 */
export async function recordingServer(t: Test, status: number, answer: object, { plainHttp = false, hang }: { plainHttp?: boolean; hang?: () => void } = {}) {
  const seen: RecordedRequest[] = [];
  const handle = (request: IncomingMessage, response: ServerResponse) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      seen.push({ method: request.method!, url: request.url!, contentType: request.headers['content-type'], accept: request.headers.accept, body });
      if (hang) {
        hang();
        return;
      }
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  };
  const tls = plainHttp ? undefined : await issueWithNewCa({ hosts: ['127.0.0.1'], validityMs: 3600_000, now: new Date() });
  const server = tls ? createSecureServer({ cert: tls.cert, key: tls.key }, handle) : createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [
      tls
        ? { name: 'c', server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caData: Buffer.from(tls.caBundle).toString('base64'), skipTLSVerify: false }
        : { name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true },
    ],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return { seen, kubeConfig };
}

