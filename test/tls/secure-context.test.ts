// The TLS settings of src/tls/secure-context.ts on their own: the options a bundle is served with
// (only its key and certificate, the minimum version and the ciphers every time), and a cipher
// list that holds only TLS 1.3 suites and ECDHE with an AEAD cipher, each one Node knows.
import { createSecureContext, getCiphers } from 'node:tls';
import t from 'tap';
import { issueWithNewCa, servingHosts } from '../../src/tls/certificates.ts';
import { CIPHERS, secureContextOptions } from '../../src/tls/secure-context.ts';

t.test("the options: the bundle's key and certificate, TLS 1.2 at least, our ciphers in our order; never the CA's key", async (t) => {
  const bundle = { caBundle: 'CA', caKey: 'CA KEY', cert: 'CERT', key: 'KEY' };
  t.strictSame(secureContextOptions(bundle), { key: 'KEY', cert: 'CERT', minVersion: 'TLSv1.2', ciphers: CIPHERS, honorCipherOrder: true });
});

t.test('the ciphers: the three TLS 1.3 suites, else ECDHE with AES-GCM or ChaCha20-Poly1305 only', async (t) => {
  const suites = CIPHERS.split(':');
  t.same(suites.filter((suite) => suite.startsWith('TLS_')), ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256']);
  for (const suite of suites.filter((name) => !name.startsWith('TLS_'))) {
    t.match(suite, /^ECDHE-(ECDSA|RSA)-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)$/, suite);
  }
  t.equal(new Set(suites).size, suites.length, 'each once');
});

t.test('every suite named is one Node knows: a misspelt one would be dropped without a word', async (t) => {
  const known = new Set(getCiphers());
  for (const suite of CIPHERS.split(':')) t.ok(known.has(suite.toLowerCase()), suite);
});

t.test('a secure context is made from the options of an issued bundle', async (t) => {
  const bundle = await issueWithNewCa({ hosts: servingHosts('svc', 'ns'), validityMs: 3_600_000, now: new Date() });
  t.doesNotThrow(() => createSecureContext(secureContextOptions(bundle)));
  t.throws(() => createSecureContext(secureContextOptions({ key: bundle.caKey, cert: bundle.cert })), 'a key of another certificate is refused');
});
