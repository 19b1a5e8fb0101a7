// The matchConditions on every registered webhook, and how serve tells an API server that dropped them.
import type { AdmissionregistrationV1Api, V1MutatingWebhookConfiguration, V1ValidatingWebhookConfiguration } from '@kubernetes/client-node';
import t from 'tap';
import { MATCH_CONDITIONS, desiredWebhookConfigurations, webhooksWithoutMatchConditions } from '../../src/kube/webhook-configurations.ts';

const target = { name: 'st', namespace: 'ns', serviceName: 'svc', url: '', failurePolicy: 'Fail', excludedNamespaces: [] };

t.test('every webhook is registered with matchConditions, in every mode', async (t) => {
  for (const nativeSidecars of ['none', 'labelled', 'all'] as const) {
    const { mutating, validating } = desiredWebhookConfigurations({ ...target, nativeSidecars, validateWorkloads: true }, 'CA');
    for (const webhook of mutating.webhooks ?? []) t.same(webhook.matchConditions, MATCH_CONDITIONS.mutating, `${nativeSidecars}: ${webhook.name}`);
    t.same(validating.webhooks?.[0]?.matchConditions, MATCH_CONDITIONS.validating, `${nativeSidecars}: the validating webhook`);
  }
});

/** An API whose configurations are these (a name it does not know answers 404). */
function api(configurations: { mutating?: V1MutatingWebhookConfiguration; validating?: V1ValidatingWebhookConfiguration }): AdmissionregistrationV1Api {
  const read = (found: object | undefined) => () => (found ? Promise.resolve(found) : Promise.reject(Object.assign(new Error('not found'), { code: 404 })));
  return { readMutatingWebhookConfiguration: read(configurations.mutating), readValidatingWebhookConfiguration: read(configurations.validating) } as unknown as AdmissionregistrationV1Api;
}

t.test('webhooksWithoutMatchConditions names the webhooks an API server kept without them', async (t) => {
  const desired = desiredWebhookConfigurations({ ...target, nativeSidecars: 'all' }, 'CA');
  t.same(await webhooksWithoutMatchConditions(api(desired), 'st'), [], 'kept: nothing to say');
  const dropped = (configuration: { webhooks?: object[] }) => ({ ...configuration, webhooks: configuration.webhooks?.map((webhook) => ({ ...webhook, matchConditions: undefined })) });
  t.same(
    await webhooksWithoutMatchConditions(api({ mutating: dropped(desired.mutating) as V1MutatingWebhookConfiguration, validating: dropped(desired.validating) as V1ValidatingWebhookConfiguration }), 'st'),
    ['native-sidecars.sidecar-terminator.io', 'mutate.sidecar-terminator.io', 'validate.sidecar-terminator.io'],
    'dropped (Kubernetes 1.27, or 1.28 and 1.29 with the feature gate off): every webhook named',
  );
  t.same(await webhooksWithoutMatchConditions(api({}), 'st'), [], 'no configurations (not created yet): nothing to say');
});
