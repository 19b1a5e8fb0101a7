// The certificates' Secret store of src/tls/secret-store.ts against a fake CoreV1Api: what it
// reads (nothing, a Secret of its keys, one without them), what it creates and replaces, and how
// the loser of a race between replicas adopts the winner's certificates.
import type { V1Secret } from '@kubernetes/client-node';
import t from 'tap';
import { MANAGED_BY_LABELS } from '../../src/policy/index.ts';
import type { CertificateBundle } from '../../src/tls/certificates.ts';
import { secretStore } from '../../src/tls/secret-store.ts';
import { apiError, fakeCoreV1Api } from '../support/fake-kube.ts';

const ours: CertificateBundle = { caBundle: 'CA CERT', caKey: 'CA KEY', cert: 'CERT', key: 'KEY' };
const theirs: CertificateBundle = { caBundle: 'THEIR CA', caKey: 'THEIR CA KEY', cert: 'THEIR CERT', key: 'THEIR KEY' };
const base64 = (text: string) => Buffer.from(text).toString('base64');

/** The Secret as the API server returns it once `bundle` is stored at `resourceVersion`. */
const secretOf = (bundle: CertificateBundle, resourceVersion: string): V1Secret => ({
  metadata: { name: 'tls', namespace: 'st', resourceVersion },
  data: { 'ca.crt': base64(bundle.caBundle), 'ca.key': base64(bundle.caKey), 'tls.crt': base64(bundle.cert), 'tls.key': base64(bundle.key) },
});

function setup() {
  const core = fakeCoreV1Api();
  return { core, store: secretStore(core.api, 'st', 'tls') };
}

t.test('load: nothing stored is undefined; any other error is thrown', async (t) => {
  const { core, store } = setup();
  t.equal(store.description, 'Secret st/tls');
  core.answer('readNamespacedSecret', apiError(404), apiError(403, 'secrets "tls" is forbidden'));
  t.equal(await store.load(), undefined);
  await t.rejects(store.load(), { code: 403 });
  t.same(core.requests('readNamespacedSecret'), [{ name: 'tls', namespace: 'st' }, { name: 'tls', namespace: 'st' }]);
});

t.test('load: the bundle decoded, with the resourceVersion as its revision', async (t) => {
  const { core, store } = setup();
  core.answer('readNamespacedSecret', secretOf(ours, '41'));
  t.same(await store.load(), { bundle: ours, revision: '41' });
});

t.test('load: a Secret without our keys is an empty bundle with a revision, to be replaced; a missing key reads as empty', async (t) => {
  const { core, store } = setup();
  core.answer('readNamespacedSecret', { metadata: { resourceVersion: '3' } }, { metadata: { resourceVersion: '4' }, data: { 'tls.crt': base64('CERT') } });
  t.same(await store.load(), { bundle: { caBundle: '', caKey: '', cert: '', key: '' }, revision: '3' });
  t.same(await store.load(), { bundle: { caBundle: '', caKey: '', cert: 'CERT', key: '' }, revision: '4' });
});

t.test('save with nothing stored: a kubernetes.io/tls Secret is created, labelled, without a resourceVersion', async (t) => {
  const { core, store } = setup();
  core.handle('createNamespacedSecret', ({ body }) => ({ ...body, metadata: { ...body.metadata, resourceVersion: '1' } }));
  t.same(await store.save(ours, undefined), { bundle: ours, revision: '1' });
  const [request] = core.requests('createNamespacedSecret');
  t.equal(request!.namespace, 'st');
  t.match(request!.body, { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: 'tls', namespace: 'st', labels: MANAGED_BY_LABELS } });
  t.equal(request!.body.metadata!.resourceVersion, undefined);
  t.same(request!.body.data, secretOf(ours, '').data);
});

t.test('save over what was read: replaced at the revision read, so a write in between is refused', async (t) => {
  const { core, store } = setup();
  core.answer('replaceNamespacedSecret', { metadata: { resourceVersion: '42' } });
  t.same(await store.save(ours, { bundle: theirs, revision: '41' }), { bundle: ours, revision: '42' });
  const [request] = core.requests('replaceNamespacedSecret');
  t.match(request, { name: 'tls', namespace: 'st', body: { metadata: { name: 'tls', resourceVersion: '41' }, type: 'kubernetes.io/tls' } });
  t.equal(core.requests('createNamespacedSecret').length, 0);
});

t.test('another replica created it first: its certificates are adopted, not overwritten', async (t) => {
  const { core, store } = setup();
  core.answer('createNamespacedSecret', apiError(409, 'secrets "tls" already exists', 'AlreadyExists'));
  core.answer('readNamespacedSecret', secretOf(theirs, '7'));
  t.same(await store.save(ours, undefined), { bundle: theirs, revision: '7' });
  t.equal(core.requests('replaceNamespacedSecret').length, 0, 'nothing written over them');
});

t.test('another replica replaced it first: the conflict reads theirs back', async (t) => {
  const { core, store } = setup();
  core.answer('replaceNamespacedSecret', apiError(409, 'the object has been modified', 'Conflict'));
  core.answer('readNamespacedSecret', secretOf(theirs, '43'));
  t.same(await store.save(ours, { bundle: ours, revision: '41' }), { bundle: theirs, revision: '43' });
  t.equal(core.requests('replaceNamespacedSecret').length, 1, 'no second attempt');
});

t.test('a conflict over a Secret since deleted is an error naming it, with the conflict as its cause', async (t) => {
  const { core, store } = setup();
  const conflict = apiError(409, 'the object has been modified', 'Conflict');
  core.answer('replaceNamespacedSecret', conflict);
  core.answer('readNamespacedSecret', apiError(404));
  const error = await store.save(ours, { bundle: ours, revision: '41' }).catch((caught: unknown) => caught);
  t.match(error, { message: /^tls changed while it was being written and is now gone/ });
  t.equal((error as Error).cause, conflict);
});

t.test('any other failure to write is thrown as it is, with nothing read', async (t) => {
  const { core, store } = setup();
  core.answer('createNamespacedSecret', apiError(403, 'forbidden'));
  await t.rejects(store.save(ours, undefined), { code: 403 });
  t.equal(core.requests('readNamespacedSecret').length, 0);
});
