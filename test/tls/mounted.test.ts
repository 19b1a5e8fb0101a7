// A certificate issued outside the add-on (cert-manager), read from a directory laid out as the
// kubelet lays out a mounted Secret: each key a symlink into ..data, itself a symlink to a
// timestamped directory that an update replaces in one rename.
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { issueServing, issueWithNewCa, servingHosts, type CertificateBundle } from '../../src/tls/certificates.ts';
import { mountedCertificate } from '../../src/tls/mounted.ts';

const hosts = servingHosts('svc', 'ns');
const issue = { hosts, validityMs: 24 * 3_600_000, now: new Date() };

/** A Secret volume: the kubelet's atomic writer, in miniature. */
function secretVolume(t: { teardown(fn: () => void): void }) {
  const dir = mkdtempSync(join(tmpdir(), 'st-mounted-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  let version = 0;
  const write = (files: Record<string, string>) => {
    const payload = `..${++version}`;
    mkdirSync(join(dir, payload));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, payload, name), text);
    symlinkSync(payload, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    for (const name of Object.keys(files)) {
      try {
        symlinkSync(join('..data', name), join(dir, name));
      } catch {
        // already linked through ..data
      }
    }
  };
  return { dir, write };
}

const files = (bundle: CertificateBundle) => ({ 'tls.crt': bundle.cert, 'tls.key': bundle.key, 'ca.crt': bundle.caBundle });
const quiet = { info: () => undefined, warn: () => undefined };

t.test('serves what the mounted Secret holds, and its renewal without a restart', async (t) => {
  const first = await issueWithNewCa(issue);
  const renewed = await issueServing(first, issue);
  const volume = secretVolume(t);
  volume.write(files(first));
  const mounted = mountedCertificate(volume.dir, { checkIntervalMs: 20, logger: quiet });
  t.teardown(() => mounted.stop());
  const loaded = await mounted.load();
  t.equal(loaded.cert, first.cert);
  t.equal(loaded.caBundle, first.caBundle, 'ca.crt says which CA to trust');
  t.equal(loaded.caKey, '', 'no CA key: nothing is issued here');

  const applied: string[] = [];
  mounted.watch((bundle) => applied.push(bundle.cert));
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.same(applied, [], 'unchanged: nothing to apply');
  volume.write(files(renewed));
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.same(applied, [renewed.cert], 'the renewal is applied once');
});

t.test('files that are not a valid pair are refused at start, and never replace what is served', async (t) => {
  const first = await issueWithNewCa(issue);
  const other = await issueWithNewCa(issue);
  const volume = secretVolume(t);
  await t.rejects(mountedCertificate(volume.dir, { checkIntervalMs: 20, logger: quiet }).load(), /--tls-cert-dir .*: cannot read tls\.crt and tls\.key .*mount the certificate's Secret there/, 'nothing mounted: a clear error');
  volume.write({ 'tls.crt': first.cert, 'tls.key': other.key });
  await t.rejects(mountedCertificate(volume.dir, { checkIntervalMs: 20, logger: quiet }).load(), /tls\.crt is not the certificate of tls\.key/);

  volume.write(files(first));
  const warnings: string[] = [];
  const mounted = mountedCertificate(volume.dir, { checkIntervalMs: 20, logger: { info: () => undefined, warn: (_: unknown, message?: string) => void warnings.push(message ?? '') } });
  t.teardown(() => mounted.stop());
  await mounted.load();
  const applied: string[] = [];
  mounted.watch((bundle) => applied.push(bundle.cert));
  volume.write({ 'tls.crt': other.cert, 'tls.key': first.key });
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.same(applied, [], 'a half-written or mismatched pair is not served');
  t.ok(warnings.includes('the mounted certificate cannot be served; serving the previous one'), 'and said');
  volume.write(files(other));
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.same(applied, [other.cert], 'the next valid pair is');
});
