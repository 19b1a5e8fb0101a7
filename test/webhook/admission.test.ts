// The shared pieces of src/webhook/admission.ts on their own: the readers of a request (objectOf,
// isPod) and the constructors of a handler's answer (allowed, denied, patched, errored), with
// their warnings.
import t from 'tap';
import { allowed, denied, errored, isPod, objectOf, patched, type AdmissionRequest } from '../../src/webhook/admission.ts';

function request(group: string, kind: string, object: unknown, oldObject?: unknown): AdmissionRequest {
  return { uid: 'u', kind: { group, version: 'v1', kind }, operation: 'UPDATE', object, ...(oldObject !== undefined ? { oldObject } : {}) };
}

t.test("objectOf: the object with the request's apiVersion and kind, whatever the object says", async (t) => {
  const sent = { apiVersion: 'v1beta1', kind: 'Lie', metadata: { name: 'p' } };
  t.same(objectOf(request('', 'Pod', sent)), { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' } }, 'the core group: the version alone');
  t.same(objectOf(request('batch', 'Job', sent)), { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'p' } }, 'a named group: group/version');
  t.same(sent, { apiVersion: 'v1beta1', kind: 'Lie', metadata: { name: 'p' } }, "the request's object is left as it was");
});

t.test('objectOf: the old object on request, and anything that is no object as it is', async (t) => {
  t.same(objectOf(request('', 'Pod', { spec: 1 }, { spec: 0 }), 'oldObject'), { spec: 0, apiVersion: 'v1', kind: 'Pod' });
  t.equal(objectOf(request('', 'Pod', undefined)), undefined);
  t.equal(objectOf(request('', 'Pod', 'text')), 'text');
  t.same(objectOf(request('', 'Pod', [1])), [1], 'an array is not given a kind');
});

t.test("isPod: the core group's Pod only", async (t) => {
  t.equal(isPod(request('', 'Pod', {})), true);
  t.equal(isPod(request('batch', 'Job', {})), false);
  t.equal(isPod(request('example.com', 'Pod', {})), false, "another group's Pod is not one");
});

t.test('allowed: a plain answer, warnings only when there are some, copied', async (t) => {
  t.same(allowed(), { response: { allowed: true } });
  t.notOk('warnings' in allowed({ warnings: [] }).response, 'an empty list is left out');
  const warnings = ['first'];
  const answer = allowed({ warnings });
  warnings.push('later');
  t.same(answer.response.warnings, ['first'], "the caller's list changing afterwards changes nothing");
});

t.test('denied: 422 Invalid with the message, and the warnings', async (t) => {
  t.same(denied('spec.containers[0]: bad', { warnings: ['w'] }), { response: { allowed: false, status: { code: 422, reason: 'Invalid', message: 'spec.containers[0]: bad' }, warnings: ['w'] } });
});

t.test('patched: the operations as base64 JSON; none at all is a plain allow', async (t) => {
  const operations = [{ op: 'add', path: '/metadata/labels/a~1b', value: 'true' }, { op: 'remove', path: '/x' }];
  const { response } = patched(operations, { warnings: ['w'] });
  t.match(response, { allowed: true, patchType: 'JSONPatch', warnings: ['w'] });
  t.same(JSON.parse(Buffer.from(response.patch!, 'base64').toString('utf8')), operations);
  t.same(patched([], { warnings: ['w'] }), { response: { allowed: true, warnings: ['w'] } }, 'no patch and no patchType');
});

t.test('errored: not allowed, the code and message, no reason', async (t) => {
  t.same(errored(400, 'request body is not valid JSON'), { response: { allowed: false, status: { code: 400, message: 'request body is not valid JSON' } } });
});
