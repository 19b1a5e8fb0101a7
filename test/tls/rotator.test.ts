import { X509Certificate } from 'node:crypto';
import t from 'tap';
import { issueWithNewCa, servingHosts, signingCa, type CertificateBundle } from '../../src/tls/certificates.ts';
import { createRotator, type RotatorOptions } from '../../src/tls/rotator.ts';
import type { CertificateStore, StoredBundle } from '../../src/tls/store.ts';

const MINUTE = 60_000;
const hosts = servingHosts('svc', 'ns');

/** A store in memory; `interloper` plays another replica that writes just before each save. */
function memoryStore(): CertificateStore & { stored?: StoredBundle; saves: number; interloper?: CertificateBundle } {
  let revision = 0;
  const store: CertificateStore & { stored?: StoredBundle; saves: number; interloper?: CertificateBundle } = {
    description: 'memory',
    saves: 0,
    async load() {
      return store.stored;
    },
    async save(bundle, replacing) {
      if (store.interloper) store.stored = { bundle: store.interloper, revision: String(++revision) };
      if (store.stored?.revision !== replacing?.revision) return store.stored!;
      store.saves++;
      return (store.stored = { bundle, revision: String(++revision) });
    },
  };
  return store;
}

function rotator(store: CertificateStore, clock: { now: Date }, overrides: Partial<RotatorOptions> = {}) {
  const logs: string[] = [];
  const log = (_: object, msg: string) => void logs.push(msg);
  const rotator = createRotator({
    store,
    hosts,
    validityMs: 60 * MINUTE,
    renewBeforeMs: 15 * MINUTE,
    checkIntervalMs: 1,
    logger: { info: log, warn: log } as RotatorOptions['logger'],
    now: () => clock.now,
    ...overrides,
  });
  return { rotator, logs };
}

const serial = (bundle: CertificateBundle) => new X509Certificate(bundle.cert).serialNumber;

t.test('creates certificates once, keeps them, renews the serving certificate when due', async (t) => {
  const store = memoryStore();
  const clock = { now: new Date('2030-01-01T00:00:00Z') };
  const { rotator: r, logs } = rotator(store, clock);

  const first = await r.ensure();
  t.equal(store.saves, 1);
  t.same(store.stored?.bundle, first, 'stored');
  t.match(logs, ['issued a new CA and serving certificate']);

  t.equal(await r.ensure(), first, 'still fresh: the same certificates, nothing written');
  t.equal(store.saves, 1);

  clock.now = new Date(clock.now.getTime() + 46 * MINUTE);
  const renewed = await r.ensure();
  t.equal(store.saves, 2);
  t.not(serial(renewed), serial(first), 'a new serving certificate');
  t.equal(signingCa(renewed).fingerprint256, signingCa(first).fingerprint256, 'from the same CA');
  t.match(logs, ['issued a new CA and serving certificate', 'renewed the serving certificate']);
});

t.test("adopts another replica's certificates instead of overwriting them", async (t) => {
  const store = memoryStore();
  const clock = { now: new Date() };
  store.interloper = await issueWithNewCa({ hosts, validityMs: 60 * MINUTE, now: clock.now });
  const { rotator: r, logs } = rotator(store, clock);

  const adopted = await r.ensure();
  t.equal(adopted, store.interloper, "the other replica's bundle");
  t.equal(store.saves, 0, 'ours was never written');
  t.match(logs, ['another replica renewed the certificates first; using theirs']);
});

t.test('picks up a renewal written by another replica', async (t) => {
  const store = memoryStore();
  const clock = { now: new Date() };
  const { rotator: r } = rotator(store, clock);
  await r.ensure();
  const theirs = await issueWithNewCa({ hosts, validityMs: 60 * MINUTE, now: clock.now });
  store.stored = { bundle: theirs, revision: 'theirs' };
  t.equal(await r.ensure(), theirs);
});

t.test('watch: applies every check, survives failures, stops', async (t) => {
  const store = memoryStore();
  const { rotator: r, logs } = rotator(store, { now: new Date() });
  const initial = await r.ensure();

  const applied: CertificateBundle[] = [];
  await new Promise<void>((resolve) => {
    r.watch(async (bundle) => {
      applied.push(bundle);
      if (applied.length === 1) throw new Error('the API server is away');
      if (applied.length === 3) resolve();
    });
  });
  await r.stop();
  const count = applied.length;
  t.ok(applied.every((bundle) => bundle === initial), 'the stored bundle each time');
  t.match(logs, ['issued a new CA and serving certificate', 'certificate check failed; retrying at the next check']);
  await new Promise((resolve) => setTimeout(resolve, 20));
  t.equal(applied.length, count, 'no check after stop()');
});
