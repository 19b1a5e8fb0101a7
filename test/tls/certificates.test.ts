import { X509Certificate, createPrivateKey } from 'node:crypto';
import t from 'tap';
import { issueServing, issueWithNewCa, planRenewal, servingHosts, signingCa, type CertificateBundle } from '../../src/tls/certificates.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const now = new Date('2030-01-01T00:00:00Z');
const hosts = servingHosts('sidecar-terminator', 'addons', ['webhook.example.com', '10.1.2.3']);
const policy = { hosts, validityMs: 30 * DAY, renewBeforeMs: 7 * DAY };
const at = (ms: number) => new Date(now.getTime() + ms);

t.test('servingHosts: the Service names, loopback and the extra hosts, once each', async (t) => {
  t.same(servingHosts('svc', 'ns', ['localhost', 'extra.example']), [
    'svc',
    'svc.ns',
    'svc.ns.svc',
    'svc.ns.svc.cluster.local',
    'localhost',
    '127.0.0.1',
    'extra.example',
  ]);
});

t.test('a new CA and serving certificate', async (t) => {
  const bundle = await issueWithNewCa({ hosts, validityMs: 30 * DAY, now });
  const ca = signingCa(bundle);
  const served = new X509Certificate(bundle.cert);

  t.ok(served.verify(ca.publicKey), 'the serving certificate is signed by the CA');
  t.ok(served.checkIssued(ca), 'its issuer is the CA');
  t.ok(ca.ca, 'the CA is a CA');
  t.notOk(served.ca, 'the serving certificate is not');
  t.ok(served.checkPrivateKey(createPrivateKey(bundle.key)), 'the key matches');

  for (const cert of [ca, served]) {
    t.equal(cert.signatureAlgorithm, 'ecdsa-with-SHA256', `${cert.subject} is signed with SHA-256`);
    t.notMatch(cert.signatureAlgorithm ?? '', /sha1/i);
  }
  for (const dns of ['sidecar-terminator', 'sidecar-terminator.addons', 'sidecar-terminator.addons.svc', 'sidecar-terminator.addons.svc.cluster.local', 'localhost', 'webhook.example.com']) {
    t.equal(served.checkHost(dns), dns, `valid for ${dns}`);
  }
  t.equal(served.checkIP('127.0.0.1'), '127.0.0.1');
  t.equal(served.checkIP('10.1.2.3'), '10.1.2.3');
  t.equal(served.checkHost('other.example.com'), undefined, 'not valid for another name');
  t.equal(served.checkIP('10.9.9.9'), undefined, 'not valid for another address');
  t.match(served.keyUsage, ['1.3.6.1.5.5.7.3.1'], 'extended key usage: server authentication');

  t.equal(served.validToDate.getTime(), at(30 * DAY).getTime(), 'the serving certificate lives --cert-validity');
  t.ok(served.validFromDate <= now, 'and is valid from now (slightly backdated for clock skew)');
  t.ok(served.validFromDate.getTime() >= now.getTime() - HOUR);
  t.equal(ca.validToDate.getTime(), at(300 * DAY).getTime(), 'the CA lives ten times longer');
});

t.test('a renewed serving certificate keeps the CA and never outlives it', async (t) => {
  const first = await issueWithNewCa({ hosts, validityMs: DAY, now });
  const renewed = await issueServing(first, { hosts, validityMs: 100 * DAY, now: at(HOUR) });
  t.equal(renewed.caBundle, first.caBundle);
  t.equal(renewed.caKey, first.caKey);
  t.not(renewed.cert, first.cert);
  const served = new X509Certificate(renewed.cert);
  t.ok(served.verify(signingCa(first).publicKey));
  t.equal(served.validToDate.getTime(), signingCa(first).validToDate.getTime(), 'capped at the CA expiry (10 days here)');
});

t.test('a new CA keeps the previous one in the bundle while it is valid', async (t) => {
  const old = await issueWithNewCa({ hosts, validityMs: DAY, now });
  const replaced = await issueWithNewCa({ hosts, validityMs: DAY, now: at(DAY) }, old);
  const pems = replaced.caBundle.match(/-----BEGIN CERTIFICATE-----/g) ?? [];
  t.equal(pems.length, 2);
  t.not(signingCa(replaced).fingerprint256, signingCa(old).fingerprint256, 'the new CA signs');
  t.ok(new X509Certificate(replaced.cert).verify(signingCa(replaced).publicKey));
  t.ok(replaced.caBundle.endsWith(signingCa(old).toString()), 'followed by the previous CA');

  const afterOldExpired = await issueWithNewCa({ hosts, validityMs: DAY, now: at(11 * DAY) }, old);
  t.equal(afterOldExpired.caBundle.match(/-----BEGIN CERTIFICATE-----/g)?.length, 1, 'an expired previous CA is dropped');

  const fromGarbage = await issueWithNewCa({ hosts, validityMs: DAY, now }, { caBundle: '', caKey: '', cert: '', key: '' });
  t.equal(fromGarbage.caBundle.match(/-----BEGIN CERTIFICATE-----/g)?.length, 1, 'an unreadable previous bundle is ignored');
});

t.test('planRenewal', async (t) => {
  const bundle = await issueWithNewCa({ hosts, validityMs: 30 * DAY, now });
  const plan = (b: CertificateBundle | undefined, when: Date, overrides: Partial<typeof policy> = {}) => planRenewal(b, { ...policy, ...overrides, now: when });

  t.match(plan(undefined, now), { action: 'new-ca', reason: /no certificate/ });
  t.same(plan(bundle, now), { action: 'keep' }, 'fresh: keep');
  t.same(plan(bundle, at(22 * DAY)), { action: 'keep' }, 'eight days left: keep');
  t.match(plan(bundle, at(23 * DAY)), { action: 'issue-serving', reason: /renewal window/ }, 'seven days left: renew');
  t.match(plan(bundle, at(31 * DAY)), { action: 'issue-serving' }, 'expired: renew');
  t.match(plan(bundle, at(271 * DAY)), { action: 'new-ca', reason: /CA expires/ }, 'CA would expire before a new serving certificate: new CA');
  t.match(plan(bundle, now, { hosts: [...hosts, 'new.example.com'] }), { action: 'issue-serving', reason: /does not cover new\.example\.com/ });

  const otherCa = await issueWithNewCa({ hosts, validityMs: 30 * DAY, now });
  t.match(plan({ ...bundle, cert: otherCa.cert, key: otherCa.key }, now), { action: 'issue-serving', reason: /not signed by the current CA/ });
  t.match(plan({ ...bundle, key: otherCa.key }, now), { action: 'issue-serving', reason: /does not match its key/ });
  t.match(plan({ ...bundle, cert: 'garbage' }, now), { action: 'issue-serving', reason: /cannot be read/ });
  t.match(plan({ ...bundle, caKey: otherCa.caKey }, now), { action: 'new-ca', reason: /do not form a CA/ });
  t.match(plan({ ...bundle, caBundle: '' }, now), { action: 'new-ca', reason: /cannot be read/ });
  t.match(plan({ ...bundle, caBundle: bundle.cert, caKey: bundle.key }, now), { action: 'new-ca' }, 'a serving certificate is not a CA');
});
