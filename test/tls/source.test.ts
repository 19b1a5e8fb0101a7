// src/tls/source.ts: the webhook's certificate behind one interface, from mounted files or issued
// here; each serves its first certificate and swaps a renewed one into the server.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { SecureContextOptions } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { issueServing, issueWithNewCa, servingHosts, type CertificateBundle } from '../../src/tls/certificates.ts';
import { issuedSource, mountedSource } from '../../src/tls/source.ts';
import { directoryStore } from '../../src/tls/store.ts';
import { UsageError } from '../../src/usage-error.ts';
import { capturingLogger } from '../support/logger.ts';
import { waitFor } from '../support/wait.ts';

const hosts = servingHosts('svc', 'ns');
const quick = { timeoutMs: 5000, intervalMs: 10 };
const issue = { hosts, validityMs: 24 * 3_600_000, now: new Date() };

function tempDir(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'st-source-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A server that keeps the certificates swapped into it. */
function fakeServer() {
  const served: string[] = [];
  return { served, setSecureContext: (options: SecureContextOptions) => void served.push(String(options.cert)) };
}

function writeMounted(dir: string, bundle: CertificateBundle, withCa = true): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'tls.crt'), bundle.cert);
  writeFileSync(join(dir, 'tls.key'), bundle.key);
  if (withCa) writeFileSync(join(dir, 'ca.crt'), bundle.caBundle);
}

t.test('mounted: serves the files, swaps in their renewal, and leaves the caBundle to cert-manager', async (t) => {
  const first = await issueWithNewCa(issue);
  const renewed = await issueServing(first, issue);
  const dir = tempDir(t);
  writeMounted(dir, first);
  const { logger, lines } = capturingLogger();
  const source = mountedSource(dir, { checkIntervalMs: 10, caRequired: false, logger });
  t.teardown(() => source.stop());
  t.equal(source.keepsCaBundle, false);
  t.equal((await source.start()).cert, first.cert);
  t.same(source.ready(), { ready: true });

  const server = fakeServer();
  const trusted: string[] = [];
  source.serveRenewals(server, async (bundle) => void trusted.push(bundle.cert));
  writeMounted(dir, renewed);
  await waitFor('the renewal served', () => server.served.length > 0, quick);
  await sleep(50);
  t.same(server.served, [renewed.cert], 'the renewal swapped in once');
  t.equal(source.current().cert, renewed.cert);
  t.same(trusted, [], 'no caBundle kept here');
  t.same(lines.map((line) => line.message), ['serving the renewed certificate']);
});

t.test('mounted: --register-webhooks needs the CA in ca.crt', async (t) => {
  const dir = tempDir(t);
  writeMounted(dir, await issueWithNewCa(issue), false);
  const source = mountedSource(dir, { checkIntervalMs: 1000, caRequired: true, logger: capturingLogger().logger });
  await t.rejects(source.start(), new UsageError(`--tls-cert-dir ${dir}: --register-webhooks needs the CA to trust in ca.crt there`));
});

t.test('issued: issues into its store, has each check trusted, and swaps in a renewal only after it is trusted', async (t) => {
  const store = directoryStore(tempDir(t));
  const { logger } = capturingLogger();
  const source = issuedSource({ store, hosts, validityMs: issue.validityMs, renewBeforeMs: 3_600_000, checkIntervalMs: 20, logger });
  t.teardown(() => source.stop());
  t.equal(source.keepsCaBundle, true);
  const first = await source.start();
  t.equal((await store.load())?.bundle.cert, first.cert, 'issued and stored');
  t.equal(await source.storedCaBundle(), first.caBundle, 'the stored CAs, read from the store');

  const server = fakeServer();
  const steps: string[] = [];
  source.serveRenewals({ setSecureContext: (options) => (steps.push('served'), server.setSecureContext(options)) }, async (bundle) => {
    steps.push(bundle.cert === first.cert ? 'trusted first' : 'trusted renewal');
  });
  await sleep(60);
  t.same(server.served, [], 'an unchanged certificate is not swapped');
  t.ok(steps.length > 0 && steps.every((step) => step === 'trusted first'), 'each check is trusted all the same');

  // Another replica renews the certificate in the shared store.
  const renewed = await issueServing(first, issue);
  await store.save(renewed, await store.load());
  await waitFor('the renewal served', () => server.served.length > 0, quick);
  t.same(server.served, [renewed.cert]);
  const served = steps.indexOf('served');
  t.equal(steps[served - 1], 'trusted renewal', 'trusted before it is served');
  t.equal(source.current().cert, renewed.cert);
});
