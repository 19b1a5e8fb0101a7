// HTTPS: TLS 1.2 at least, and certificates swapped in place with setSecureContext.
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import tls from 'node:tls';
import t from 'tap';
import { generate } from 'selfsigned';
import { buildApp } from '../../src/webhook/app.ts';
import { DEFAULT_OPTIONS } from './support.ts';

// Let this process speak TLS 1.0 and 1.1 at all, so that refusing them is the app's own doing.
tls.DEFAULT_MIN_VERSION = 'TLSv1';
tls.DEFAULT_CIPHERS += ':@SECLEVEL=0';

const certificate = async (name: string) => {
  const pems = await generate([{ name: 'commonName', value: name }], { keyType: 'ec', algorithm: 'sha256' });
  return { key: pems.private, cert: pems.cert, fingerprint: new X509Certificate(pems.cert).fingerprint256 };
};

function handshake(port: number, options: tls.ConnectionOptions = {}): Promise<{ protocol: string | null; fingerprint: string } | { error: string }> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...options }, () => {
      resolve({ protocol: socket.getProtocol(), fingerprint: socket.getPeerCertificate().fingerprint256 });
      socket.end();
    });
    socket.on('error', (error) => resolve({ error: error.message }));
  });
}

t.test('TLS 1.2 minimum, certificate swap without a restart', async (t) => {
  const first = await certificate('first');
  const app = buildApp({ ...DEFAULT_OPTIONS, https: { key: first.key, cert: first.cert } });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const { port } = app.server.address() as { port: number };

  t.match(await handshake(port), { protocol: 'TLSv1.3', fingerprint: first.fingerprint });
  t.match(await handshake(port, { maxVersion: 'TLSv1.2' }), { protocol: 'TLSv1.2' });
  t.match(await handshake(port, { minVersion: 'TLSv1', maxVersion: 'TLSv1.1' }), { error: /protocol version|unsupported protocol/ }, 'TLS 1.1 is refused');

  const second = await certificate('second');
  app.server.setSecureContext({ key: second.key, cert: second.cert });
  t.match(await handshake(port), { fingerprint: second.fingerprint }, 'new connections get the new certificate');

  const status = await new Promise<number | undefined>((resolve, reject) => {
    // Trusting the new certificate itself; its name is not 127.0.0.1, which is not the point here.
    const request = https.get({ host: '127.0.0.1', port, path: '/healthz', ca: second.cert, checkServerIdentity: () => undefined }, (response) => {
      response.resume();
      resolve(response.statusCode);
    });
    request.on('error', reject);
  });
  t.equal(status, 200, 'HTTP over the new certificate');
});
