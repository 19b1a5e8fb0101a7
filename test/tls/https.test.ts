// The webhook's HTTPS server swaps its certificate without a restart, and refuses what it must.
import { X509Certificate } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import tls, { connect, type ConnectionOptions, type SecureVersion } from 'node:tls';
import t, { type Test } from 'tap';
import { issueServing, issueWithNewCa, servingHosts } from '../../src/tls/certificates.ts';
import { secureContextOptions } from '../../src/tls/secure-context.ts';
import { buildApp } from '../../src/webhook/app.ts';

// Node's defaults already refuse TLS 1.0 and 1.1 (minimum version, OpenSSL security level);
// relax them so that only the server's explicit settings, at start and at every swap, can.
tls.DEFAULT_MIN_VERSION = 'TLSv1';
tls.DEFAULT_CIPHERS += ':@SECLEVEL=0';

const options = { hosts: servingHosts('svc', 'ns'), validityMs: 3_600_000, now: new Date() };
const first = await issueWithNewCa(options);
const second = await issueServing(first, options);

const app = buildApp({
  enforcement: 'deny',
  quickExitImageAllowlist: [],
  bodyLimit: 1024 * 1024,
  logger: false,
  https: { key: first.key, cert: first.cert },
  readiness: () => ({ ready: true }),
});
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const { port } = app.server.address() as AddressInfo;

/** Completes a TLS handshake trusting only our CA, and returns the certificate served. */
function handshake(extra: ConnectionOptions = {}): Promise<{ fingerprint: string; protocol: string | null }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca: first.caBundle, ...extra }, () => {
      resolve({ fingerprint: socket.getPeerX509Certificate()!.fingerprint256, protocol: socket.getProtocol() });
      socket.destroy();
    });
    socket.on('error', reject);
  });
}

/** A TLS 1.0 or 1.1 client; the low security level lets it actually offer those versions. */
function oldClient(version: SecureVersion) {
  return handshake({ minVersion: version, maxVersion: version, ciphers: 'DEFAULT:@SECLEVEL=0' });
}

function get(path: string): Promise<{ status: number | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, ca: first.caBundle, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const fingerprintOf = (pem: string) => new X509Certificate(pem).fingerprint256;

async function refusesOldTls(t: Test): Promise<void> {
  for (const version of ['TLSv1', 'TLSv1.1'] as const) {
    // The protocol_version alert comes from the server: the client did offer the version.
    await t.rejects(oldClient(version), { code: 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION' }, `${version} refused`);
  }
  t.equal((await handshake({ minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' })).protocol, 'TLSv1.2', 'TLS 1.2 accepted');
}

t.test('serves certificate A, then B after setSecureContext, without a restart; TLS 1.2 at least throughout', async (t) => {
  t.equal((await handshake()).fingerprint, fingerprintOf(first.cert), 'A, verified against the CA for 127.0.0.1');
  t.same(await get('/healthz'), { status: 200, body: 'ok' });
  await refusesOldTls(t);

  app.server.setSecureContext(secureContextOptions(second));

  t.equal((await handshake()).fingerprint, fingerprintOf(second.cert), 'B on a new connection');
  t.same(await get('/healthz'), { status: 200, body: 'ok' }, 'still answering');
  t.equal((app.server.address() as AddressInfo).port, port, 'the same listening server');
  await refusesOldTls(t);
});

t.test('refuses plain HTTP', async (t) => {
  const outcome = await new Promise<string>((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (res) => {
      res.resume();
      resolve(`HTTP ${res.statusCode}`);
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end();
  });
  t.notMatch(outcome, /^HTTP 2/, `not served over plain HTTP (${outcome})`);
});
