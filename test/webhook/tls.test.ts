// HTTPS: TLS 1.2 at least with AEAD suites only, and certificates swapped in place with setSecureContext (the same settings again).
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import tls from 'node:tls';
import t from 'tap';
import { generate } from 'selfsigned';
import { secureContextOptions } from '../../src/tls/secure-context.ts';
import { buildApp } from '../../src/webhook/app.ts';
import { handshake } from '../support/net.ts';
import { DEFAULT_OPTIONS } from './support.ts';

// Let this process speak TLS 1.0 and 1.1 at all, so that refusing them is the app's own doing.
tls.DEFAULT_MIN_VERSION = 'TLSv1';
tls.DEFAULT_CIPHERS += ':@SECLEVEL=0';

const certificate = async (name: string) => {
  const pems = await generate([{ name: 'commonName', value: name }], { keyType: 'ec', algorithm: 'sha256' });
  return { key: pems.private, cert: pems.cert, fingerprint: new X509Certificate(pems.cert).fingerprint256 };
};

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

t.test('TLS 1.2 offers ECDHE with AEAD suites only (no CBC, no SHA-1 MAC, no RSA key exchange), before and after a certificate swap', async (t) => {
  const first = await certificate('first');
  const app = buildApp({ ...DEFAULT_OPTIONS, https: { key: first.key, cert: first.cert } });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const { port } = app.server.address() as { port: number };
  const check = async (when: string) => {
    for (const cipher of ['ECDHE-ECDSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA', 'ECDHE-ECDSA-AES128-SHA256', 'AES128-SHA', 'AES128-GCM-SHA256']) {
      t.match(await handshake(port, { maxVersion: 'TLSv1.2', ciphers: `${cipher}:@SECLEVEL=0` }), { error: /handshake failure|no shared cipher|alert/i }, `${when}: ${cipher} is refused`);
    }
    for (const cipher of ['ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305']) {
      t.match(await handshake(port, { maxVersion: 'TLSv1.2', ciphers: cipher }), { protocol: 'TLSv1.2' }, `${when}: ${cipher} is served`);
    }
    t.match(await handshake(port), { protocol: 'TLSv1.3' }, `${when}: TLS 1.3 is served`);
  };
  await check('initially');
  const second = await certificate('second');
  // As serve swaps a renewed certificate in (src/serve/composition.ts).
  app.server.setSecureContext(secureContextOptions(second));
  t.match(await handshake(port), { fingerprint: second.fingerprint }, 'the new certificate is served');
  await check('after a certificate swap');
});
