import type { SecureContextOptions } from 'node:tls';
import type { CertificateBundle } from './certificates.ts';

/**
 * TLS 1.3's suites, and for TLS 1.2 only ECDHE with an AEAD cipher (AES-GCM, ChaCha20-Poly1305):
 * no CBC mode, no SHA-1 MAC, no static RSA key exchange. Go's TLS client, which the API server
 * calls webhooks with, offers all of them. The TLS 1.3 suites must be named here, or Node would
 * turn TLS 1.3 off.
 */
export const CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/**
 * What `server.setSecureContext` needs to serve `bundle`, and what the server starts with. The
 * minimum version and the ciphers are repeated on every swap on purpose: setSecureContext resets
 * every option it is not given to Node's default.
 */
export function secureContextOptions(bundle: Pick<CertificateBundle, 'key' | 'cert'>): SecureContextOptions {
  return { key: bundle.key, cert: bundle.cert, minVersion: 'TLSv1.2', ciphers: CIPHERS, honorCipherOrder: true };
}
