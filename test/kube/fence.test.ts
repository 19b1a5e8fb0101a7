// The fence's objects (src/kube/fence.ts): a ValidatingAdmissionPolicy and its binding for each of
// the watcher's and the webhook's ServiceAccounts, their parameters set from the deployment; and
// their registration, created or replaced, the policy before the binding that puts it in force,
// 'unsupported' on an API server without ValidatingAdmissionPolicy. The cel rules themselves are
// test/kube/fence-rules.test.ts's, and on a real API server test/e2e/fence.test.ts's.
import t from 'tap';
import type { V1ValidatingAdmissionPolicy } from '@kubernetes/client-node';
import { desiredFence, fenceName, registerFence, serviceAccountUser, type FenceTarget } from '../../src/kube/fence.ts';
import { FENCE_RULES, literal } from '../../src/kube/fence-rules.ts';
import { MANAGED_BY_LABELS } from '../../src/policy/index.ts';
import { apiError, fakeAdmissionregistrationV1Api } from '../support/fake-kube.ts';

const target: FenceTarget = {
  namespace: 'sidecar-terminator',
  serviceAccounts: { watcher: 'st-watcher', webhook: 'st-webhook' },
  leaseName: 'st-leader',
  signalImage: 'registry.example.com/stop-sidecar:1',
  quickExitImage: 'registry.example.com/quick-exit:1',
  tlsSecret: 'st-tls',
  configurationName: 'st',
};

t.test("each component's policy matches its own ServiceAccount's writes, with the deployment's values as variables", async (t) => {
  const fence = desiredFence(target);
  const { policy, binding } = fence.watcher;
  t.equal(fenceName('st', 'watcher'), 'st-watcher');
  t.match(policy, { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', metadata: { name: 'st-watcher', labels: MANAGED_BY_LABELS } });
  t.equal(policy.spec?.failurePolicy, 'Fail');
  t.same(policy.spec?.matchConstraints?.resourceRules, [{ apiGroups: ['*'], apiVersions: ['*'], resources: ['*/*'], operations: ['*'] }], 'every write of every resource');
  t.same(policy.spec?.matchConditions, [{ name: 'service-account', expression: `request.userInfo.username == ${literal('system:serviceaccount:sidecar-terminator:st-watcher')}` }]);
  const variables = policy.spec?.variables ?? [];
  t.same(variables.slice(0, 4), [
    { name: 'ownNamespace', expression: literal('sidecar-terminator') },
    { name: 'leaseName', expression: literal('st-leader') },
    { name: 'signalImage', expression: literal('registry.example.com/stop-sidecar:1') },
    { name: 'quickExitImage', expression: literal('registry.example.com/quick-exit:1') },
  ], 'its parameters first');
  t.same(variables.slice(4), FENCE_RULES.watcher.variables, 'then the rules\' own');
  t.same(policy.spec?.validations, FENCE_RULES.watcher.validations);
  t.match(binding, { kind: 'ValidatingAdmissionPolicyBinding', metadata: { name: 'st-watcher', labels: MANAGED_BY_LABELS }, spec: { policyName: 'st-watcher', validationActions: ['Deny'] } });

  const webhook = fence.webhook.policy;
  t.equal(webhook.metadata?.name, 'st-webhook');
  t.match(webhook.spec?.matchConditions?.[0]?.expression, serviceAccountUser('sidecar-terminator', 'st-webhook'));
  t.same(webhook.spec?.variables?.slice(0, 3).map((variable) => variable.name), ['ownNamespace', 'tlsSecret', 'configurationName']);
  t.same(webhook.spec?.variables?.[2], { name: 'configurationName', expression: literal('st') });
});

/** An AdmissionregistrationV1Api holding the fence's objects by name; reads of others answer 404. */
function fakeAdmission(existing: Record<string, string> = {}) {
  const admission = fakeAdmissionregistrationV1Api();
  const read = ({ name }: { name: string }) => {
    const resourceVersion = existing[name];
    if (!resourceVersion) throw apiError(404, `"${name}" not found`);
    return { metadata: { name, resourceVersion } };
  };
  const written = <Body>({ body }: { body: Body }) => body;
  admission
    .handle('readValidatingAdmissionPolicy', read)
    .handle('readValidatingAdmissionPolicyBinding', read)
    .handle('createValidatingAdmissionPolicy', written)
    .handle('createValidatingAdmissionPolicyBinding', written)
    .handle('replaceValidatingAdmissionPolicy', written)
    .handle('replaceValidatingAdmissionPolicyBinding', written);
  /** The writes, as `method name`. */
  const writes = () => admission.calls.filter((call) => !call.method.startsWith('read')).map((call) => `${call.method} ${(call.request as { body: V1ValidatingAdmissionPolicy }).body.metadata?.name}`);
  return { admission, writes };
}

t.test('registered: each policy created, then its binding', async (t) => {
  const { admission, writes } = fakeAdmission();
  t.equal(await registerFence(admission.api, target), 'registered');
  t.same(writes(), ['createValidatingAdmissionPolicy st-watcher', 'createValidatingAdmissionPolicyBinding st-watcher', 'createValidatingAdmissionPolicy st-webhook', 'createValidatingAdmissionPolicyBinding st-webhook']);
  t.same(admission.requests('createValidatingAdmissionPolicy')[0]?.body, desiredFence(target).watcher.policy, 'as desiredFence has it');
});

t.test('registered again: replaced over the resourceVersion found', async (t) => {
  const { admission, writes } = fakeAdmission({ 'st-watcher': '41', 'st-webhook': '42' });
  t.equal(await registerFence(admission.api, target), 'registered');
  t.same(writes(), ['replaceValidatingAdmissionPolicy st-watcher', 'replaceValidatingAdmissionPolicyBinding st-watcher', 'replaceValidatingAdmissionPolicy st-webhook', 'replaceValidatingAdmissionPolicyBinding st-webhook']);
  t.same(admission.requests('replaceValidatingAdmissionPolicy').map((request) => request.body.metadata?.resourceVersion), ['41', '42']);
});

t.test('created by another replica meanwhile (409): read again and replaced', async (t) => {
  const { admission, writes } = fakeAdmission();
  admission.answer('createValidatingAdmissionPolicy', apiError(409, 'already exists', 'AlreadyExists'));
  admission.answer('readValidatingAdmissionPolicy', apiError(404), { metadata: { name: 'st-watcher', resourceVersion: '7' } });
  t.equal(await registerFence(admission.api, target), 'registered');
  t.same(writes().slice(0, 2), ['createValidatingAdmissionPolicy st-watcher', 'replaceValidatingAdmissionPolicy st-watcher']);
  t.equal(admission.requests('replaceValidatingAdmissionPolicy')[0]?.body.metadata?.resourceVersion, '7');
});

t.test('an API server without ValidatingAdmissionPolicy (404 on create): unsupported; another refusal is thrown', async (t) => {
  const older = fakeAdmission();
  older.admission.answer('createValidatingAdmissionPolicy', apiError(404, 'the server could not find the requested resource'));
  t.equal(await registerFence(older.admission.api, target), 'unsupported');
  t.same(older.writes(), ['createValidatingAdmissionPolicy st-watcher'], 'nothing more is tried');
  const forbidden = fakeAdmission();
  forbidden.admission.answer('createValidatingAdmissionPolicy', apiError(403, 'forbidden'));
  await t.rejects(registerFence(forbidden.admission.api, target), { code: 403 });
});
