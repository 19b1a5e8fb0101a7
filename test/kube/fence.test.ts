// The fence's objects (src/kube/fence.ts): a ValidatingAdmissionPolicy and its binding for each of
// the watcher's and the webhook's ServiceAccounts, their parameters set from the deployment; and
// their registration, created or replaced, the policy before the binding that puts it in force,
// 'unsupported' on an API server without ValidatingAdmissionPolicy; and a few writes run through
// the policies by a small CEL interpreter (cel-evaluator.ts). The pieces of the cel rules are
// test/kube/fence-rules.test.ts's, and the rules on a real API server test/e2e/fence.test.ts's.
import t from 'tap';
import type { V1ValidatingAdmissionPolicy } from '@kubernetes/client-node';
import { desiredFence, fenceName, registerFence, serviceAccountUser, type FenceTarget } from '../../src/kube/fence.ts';
import { eventBody } from '../../src/kube/events.ts';
import { FENCE_RULES, literal, type FencedComponent } from '../../src/kube/fence-rules.ts';
import { INJECTED_POLICY_INVALID_REASON, MANAGED, MANAGED_BY_LABELS, MANAGED_LABEL, OWNER_EVENT_REASON, POD_ANNOTATIONS } from '../../src/policy/index.ts';
import { apiError, fakeAdmissionregistrationV1Api } from '../support/fake-kube.ts';
import { jobPod, killSidecar, main } from '../support/pods.ts';
import { parseCel, refusals } from './cel-evaluator.ts';

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

/** What the API server's evaluation of `component`'s policy says of a write: the messages of the validations that refuse it. */
function fenceRefusals(component: FencedComponent, write: { request: object; object: object; oldObject?: object }): string[] {
  const { spec } = desiredFence(target)[component].policy;
  // As the API server holds objects: plain JSON, times as strings.
  return refusals({ variables: spec?.variables ?? [], validations: spec?.validations ?? [] }, JSON.parse(JSON.stringify(write)) as typeof write);
}

t.test('the test interpreter reads every rule of the fence', async (t) => {
  for (const [component, rules] of Object.entries(FENCE_RULES)) {
    for (const { expression } of [...rules.variables, ...rules.validations]) t.doesNotThrow(() => parseCel(expression), `${component}: ${expression.slice(0, 60)}`);
  }
});

t.test("events: the webhook's own pod's InjectedSidecarPolicyInvalid in the add-on's namespace passes for the webhook alone; another reason, namespace, kind or type is refused", async (t) => {
  const eventCreate = (namespace: string, reason: string, involved: { kind: string; apiVersion: string; name: string } = { kind: 'Pod', apiVersion: 'v1', name: 'st-webhook-7d9f' }, type: 'Warning' | 'Normal' = 'Warning') => ({
    request: { resource: { group: '', version: 'v1', resource: 'events' }, operation: 'CREATE', namespace },
    object: eventBody(`${involved.name}.18a2f3`, { ...involved, namespace }, type, reason, 'the policy read before stays in force'),
  });
  const own = target.namespace;
  t.same(fenceRefusals('webhook', eventCreate(own, INJECTED_POLICY_INVALID_REASON)), [], 'a Warning on a pod of its own namespace');
  t.same(fenceRefusals('webhook', eventCreate('jobs', OWNER_EVENT_REASON, { kind: 'Job', apiVersion: 'batch/v1', name: 'nightly' })), [], 'its owner event passes as before');

  const refused = {
    'another reason': eventCreate(own, 'Killing'),
    'another namespace': eventCreate('jobs', INJECTED_POLICY_INVALID_REASON),
    'on a Deployment': eventCreate(own, INJECTED_POLICY_INVALID_REASON, { kind: 'Deployment', apiVersion: 'apps/v1', name: 'st-webhook' }),
    'a Normal event': eventCreate(own, INJECTED_POLICY_INVALID_REASON, undefined, 'Normal'),
  };
  for (const [variant, write] of Object.entries(refused)) t.match(fenceRefusals('webhook', write), [/the webhook may create only its InvalidSidecarConfiguration Warning events .* and InjectedSidecarPolicyInvalid Warning events on a pod of sidecar-terminator$/], variant);
  t.match(fenceRefusals('watcher', eventCreate(own, INJECTED_POLICY_INVALID_REASON)), [/the watcher may create only its own events/], "the watcher's token: refused (the watcher does not read the policy)");
});

t.test("the sweeper's write: the label on a pod whose own marker names a sidecar passes; the injected-sidecar policy's annotations with it, or the label alone on a pod without a marker, are refused", async (t) => {
  const podUpdate = (before: object, after: object) => ({ request: { resource: { group: '', version: 'v1', resource: 'pods' }, operation: 'UPDATE', namespace: 'default' }, oldObject: before, object: after });
  const labelled = <Pod extends { metadata?: object }>(pod: Pod, annotations?: Record<string, string>): Pod => ({ ...pod, metadata: { ...pod.metadata, labels: { [MANAGED_LABEL]: MANAGED }, ...(annotations ? { annotations } : {}) } });
  const marked = jobPod([main(), killSidecar()], { main: 'running', proxy: 'running' }, { metadata: { labels: {} } });
  t.same(fenceRefusals('watcher', podUpdate(marked, labelled(marked))), [], 'the label alone, on a pod with a marker');

  const injected = jobPod([main(), main('istio-proxy', 'docker.io/istio/proxyv2:1.24.0')], { main: 'running', 'istio-proxy': 'running' }, { metadata: { labels: {} } });
  t.match(fenceRefusals('watcher', podUpdate(injected, labelled(injected, { [POD_ANNOTATIONS.sidecars]: 'istio-proxy' }))), [/may not change the annotations/, /may change only the sidecar-terminator.io\/managed label/], 'the policy\'s annotations with the label');
  t.match(fenceRefusals('watcher', podUpdate(injected, labelled(injected))), [/may change only the sidecar-terminator.io\/managed label of a pod: .* and a sidecar marker/], 'the label alone on a pod without a marker');
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
