import type { SecureContextOptions } from 'node:tls';
import type { CertificateBundle } from './certificates.ts';

/**
 * What `server.setSecureContext` needs to serve `bundle`. The minimum TLS version is repeated
 * here on purpose: setSecureContext resets every option it is not given to Node's default.
 */
export function secureContextOptions(bundle: CertificateBundle): SecureContextOptions {
  return { key: bundle.key, cert: bundle.cert, minVersion: 'TLSv1.2' };
}
