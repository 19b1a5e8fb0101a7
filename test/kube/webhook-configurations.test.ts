// The matchConditions on every registered webhook, what the validating one's prefilter lets through, and how serve tells an API server that dropped them.
import type { AdmissionregistrationV1Api, V1MutatingWebhookConfiguration, V1ValidatingWebhookConfiguration } from '@kubernetes/client-node';
import t from 'tap';
import { MARKER_WORDS, MATCH_CONDITIONS, NAMES_TESTED, desiredWebhookConfigurations, mayBeMarker, webhooksWithoutMatchConditions } from '../../src/kube/webhook-configurations.ts';
import {
  MANAGED_LABEL,
  MARKER_NAMES,
  MIGRATED_ANNOTATION,
  NATIVE_SIDECARS_OPT_OUT,
  PHASE_SET_ANNOTATION,
  POD_ANNOTATIONS,
  SKIPPED_ANNOTATION,
  STRICT_VALIDATION_ANNOTATION,
  nearMissAnnotation,
  nearMissEnvName,
} from '../../src/policy/index.ts';
import { ANNOTATION_MISSES, ENV_MISSES } from '../support/near-miss-cases.ts';

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

// The validating webhook's prefilter: a pod or template that can finish reaches it with a name
// that may be a near miss of a marker (mayBeMarker, which its CEL mirrors; the e2e test
// test/e2e/near-miss.test.ts runs the table below through a real API server's CEL).
const ENV_MARKERS: readonly string[] = MARKER_NAMES;
const KEY_MARKERS = [
  POD_ANNOTATIONS.sidecars,
  POD_ANNOTATIONS.ignoreExitCode,
  `${POD_ANNOTATIONS.stopPrefix}proxy`,
  `${POD_ANNOTATIONS.gracePeriodPrefix}proxy`,
  STRICT_VALIDATION_ANNOTATION,
  NATIVE_SIDECARS_OPT_OUT.key,
  MIGRATED_ANNOTATION,
  SKIPPED_ANNOTATION,
  PHASE_SET_ANNOTATION,
  MANAGED_LABEL,
];

t.test('every marker, and every misspelling of one that near-miss.ts finds, may be a marker', async (t) => {
  for (const name of [...ENV_MARKERS, ...KEY_MARKERS]) t.ok(mayBeMarker(name), name);
  for (const [meant, misses] of Object.entries(ENV_MISSES)) {
    for (const [slip, seen] of misses) t.ok(nearMissEnvName(seen) !== undefined && mayBeMarker(seen), `${meant}, ${slip}: ${seen}`);
  }
  for (const [meant, misses] of Object.entries(ANNOTATION_MISSES)) {
    for (const [slip, seen] of misses) t.ok(nearMissAnnotation(seen) !== undefined && mayBeMarker(seen), `${meant}, ${slip}: ${seen}`);
  }
});

/** Every name one slip away from `name`: a character dropped, doubled, changed (to one of `alphabet`) or swapped with the next, a word dropped or doubled. */
function oneSlipFrom(name: string, alphabet: string): Set<string> {
  const slips = new Set<string>();
  for (let at = 0; at < name.length; at++) {
    slips.add(name.slice(0, at) + name.slice(at + 1));
    slips.add(name.slice(0, at) + name[at]! + name.slice(at));
    slips.add(name.slice(0, at) + name.slice(at + 1, at + 2) + name[at]! + name.slice(at + 2));
    for (const other of alphabet) slips.add(name.slice(0, at) + other + name.slice(at + 1));
  }
  const words = name.split(/(?<=[-_./])/);
  for (let at = 0; at < words.length; at++) {
    slips.add([...words.slice(0, at), ...words.slice(at + 1)].join(''));
    slips.add([...words.slice(0, at + 1), ...words.slice(at)].join(''));
  }
  slips.delete(name);
  return slips;
}

t.test('a name one slip away from a marker that near-miss.ts finds may be a marker: the prefilter lets every such slip through', async (t) => {
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  let found = 0;
  const missed: string[] = [];
  for (const marker of ENV_MARKERS) {
    for (const seen of oneSlipFrom(marker, `${letters.toUpperCase()}${letters}_-. `)) {
      if (nearMissEnvName(seen) === undefined) continue;
      found++;
      if (!mayBeMarker(seen)) missed.push(seen);
    }
  }
  for (const marker of KEY_MARKERS) {
    for (const seen of oneSlipFrom(marker, `${letters}${letters.toUpperCase()}-_./`)) {
      if (nearMissAnnotation(seen) === undefined) continue;
      found++;
      if (!mayBeMarker(seen)) missed.push(seen);
    }
  }
  t.same(missed, [], `${found} near misses, each one slip away from a marker`);
  t.ok(found > 5000, `${found} near misses`);
});

t.test('mayBeMarker: a marker word in any case, or a name too long to test; not an ordinary name', async (t) => {
  for (const name of ['kruise', 'Sidecar_Image', 'TERMINATION_GRACE', 'x'.repeat(NAMES_TESTED.nameLength + 1)]) t.ok(mayBeMarker(name), name);
  for (const name of ['LOG_LEVEL', 'prometheus.io/scrape', 'ISTIO_META_MESH_ID', 'x'.repeat(NAMES_TESTED.nameLength), 'TERMINA']) t.notOk(mayBeMarker(name), name);
});

t.test("the validating webhook's CEL tests what mayBeMarker tests, on pods and templates that can finish, and markers elsewhere", async (t) => {
  const [condition] = MATCH_CONDITIONS.validating;
  const expression = condition?.expression ?? '';
  for (const word of MARKER_WORDS) t.ok(expression.includes(`e.name.upperAscii().contains('${word}')`) && expression.includes(`k.upperAscii().contains('${word}')`), word);
  t.ok(expression.includes(`size(e.name) > ${NAMES_TESTED.nameLength}`) && expression.includes(`size(k) > ${NAMES_TESTED.nameLength}`), 'the length a name is tested to');
  for (const path of ['object.spec', 'object.spec.jobTemplate.spec.template.spec', 'object.spec.template.spec']) {
    t.ok(expression.includes(`has(${path}.restartPolicy) && ${path}.restartPolicy in ['Never', 'OnFailure'] ? (`), `${path}: that can finish, names that may be markers`);
    t.ok(expression.includes(`${path}.containers.size() > ${NAMES_TESTED.containers}`) && expression.includes(`${path}.initContainers.size() > ${NAMES_TESTED.containers}`), `${path}: containers counted first`);
  }
  t.equal(expression.split(`c.env.size() > ${NAMES_TESTED.envPerContainer}`).length - 1, 6, 'env vars counted first, in the containers and init containers of each kind');
  t.equal(expression.split(`.annotations.size() > ${NAMES_TESTED.annotations}`).length - 1, 3, 'annotations counted first, for each kind');
});
