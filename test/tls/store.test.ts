import { mkdtemp, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { issueWithNewCa, servingHosts } from '../../src/tls/certificates.ts';
import { directoryStore } from '../../src/tls/store.ts';

const bundle = await issueWithNewCa({ hosts: servingHosts('svc', 'ns'), validityMs: 3_600_000, now: new Date() });

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'st-certs-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

t.test('directory store: nothing stored yet, then a round trip', async (t) => {
  const dir = join(await tempDir(t), 'certs');
  const store = directoryStore(dir);
  t.equal(await store.load(), undefined, 'a missing directory holds nothing');
  await store.save(bundle, undefined);
  t.same((await store.load())?.bundle, bundle);
  t.equal(store.description, `directory ${dir}`);
});

t.test('directory store: keys are readable by the owner only', async (t) => {
  const dir = join(await tempDir(t), 'certs');
  await directoryStore(dir).save(bundle, undefined);
  const mode = async (name: string) => (await stat(join(dir, name))).mode & 0o777;
  t.equal(await mode('ca.key'), 0o600);
  t.equal(await mode('tls.key'), 0o600);
  t.equal(await mode('tls.crt'), 0o644);
  t.equal(await mode('ca.crt'), 0o644);
  t.equal((await stat(dir)).mode & 0o777, 0o700);
});

t.test('directory store: a missing file reads as empty, so the renewal plan replaces it', async (t) => {
  const dir = await tempDir(t);
  const store = directoryStore(dir);
  await store.save(bundle, undefined);
  await unlink(join(dir, 'tls.key'));
  t.same((await store.load())?.bundle, { ...bundle, key: '' });
  await writeFile(join(dir, 'tls.key'), 'edited by hand');
  t.equal((await store.load())?.bundle.key, 'edited by hand');
});
