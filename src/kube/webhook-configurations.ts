// The MutatingWebhookConfiguration and ValidatingWebhookConfiguration that make the API server
// call us. With --register-webhooks the add-on writes them itself (local runs, simple
// installs); otherwise the chart creates them and the add-on only keeps their caBundle current.
import type {
  AdmissionregistrationV1Api,
  AdmissionregistrationV1WebhookClientConfig,
  V1MatchCondition,
  V1MutatingWebhookConfiguration,
  V1RuleWithOperations,
  V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { MANAGED_BY_LABELS, MARKER_NAMES, NATIVE_SIDECARS_NAMESPACE_LABEL, POD_ANNOTATIONS, WEBHOOK_NAMES, type NativeSidecarsMode } from '../policy/index.ts';
import { WEBHOOK_TIMEOUT_SECONDS } from '../config.ts';
import { isApiError } from './api-errors.ts';

/** Namespaces the webhook never sees (so the sweeper leaves them alone too): kube-system, the add-on's own, and any configured. */
export function excludedNamespaces(ownNamespace: string, configured: readonly string[] = []): string[] {
  return [...new Set(['kube-system', ...configured, ownNamespace])];
}

export interface WebhookTarget {
  /** Name of both configurations. */
  name: string;
  /** The add-on's namespace: home of the Service, and never subject to the webhooks. */
  namespace: string;
  serviceName: string;
  /** Base URL to call instead of the Service (local runs), '' for the Service. */
  url: string;
  failurePolicy: string;
  /** Further namespaces the webhooks skip (--excluded-namespaces). */
  excludedNamespaces: readonly string[];
  /** Labels a namespace needs for the webhooks to serve it (--namespace-labels); every namespace without. */
  namespaceLabels?: Readonly<Record<string, string>>;
  /** --native-sidecars: which namespaces the native-sidecars webhook serves; none registers no such webhook. */
  nativeSidecars?: NativeSidecarsMode;
  /** --webhook-timeout-seconds; WEBHOOK_TIMEOUT_SECONDS without it. */
  timeoutSeconds?: number;
  /** --validate-workloads: Deployment, StatefulSet and DaemonSet writes go through /validate too (for warnings). */
  validateWorkloads?: boolean;
}


type WebhookConfiguration = V1MutatingWebhookConfiguration | V1ValidatingWebhookConfiguration;

const podCreate: V1RuleWithOperations = { apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], scope: 'Namespaced' };
// Pod UPDATE is left out on purpose: the watcher's in-place image replacement is one.
const jobTemplates: V1RuleWithOperations = { apiGroups: ['batch'], apiVersions: ['v1'], resources: ['jobs', 'cronjobs'], operations: ['CREATE', 'UPDATE'], scope: 'Namespaced' };
// Workloads only get warnings (a template shared with a Job shows its problems), never a denial:
// with --validate-workloads only, as every write of those kinds then waits on the webhook.
const workloadTemplates: V1RuleWithOperations = { apiGroups: ['apps'], apiVersions: ['v1'], resources: ['deployments', 'statefulsets', 'daemonsets'], operations: ['CREATE', 'UPDATE'], scope: 'Namespaced' };

/**
 * CEL conditions the API server evaluates before it calls a webhook (matchConditions), so that
 * objects that cannot matter never reach it. The chart's templates/webhook-configurations.yaml
 * writes the same (test/chart/render.test.ts compares them).
 *
 * The mutating webhooks keep every pod that can finish (restartPolicy Never or OnFailure) in
 * reach, marked or not: a mutating webhook skipped in the first round is never called in the
 * reinvocation round (k8s.io/apiserver, mutating/dispatcher.go), so one that matched marked pods
 * only would never see a marked sidecar that a later webhook injects. Other pods reach them only
 * with a marker (for the warning an Always pod with markers gets). The validating webhook runs
 * after every mutation, so it matches on the names themselves: a pod, or a Job, CronJob or
 * workload template, that can finish reaches it with a name that may be a marker's or a near
 * miss of one (mayBeMarker: the webhook then tells which, with src/policy/near-miss.ts, so that
 * `kubectl apply` of a Job whose only marker is misspelt prints the warning); one that cannot
 * finish, only with a marker. A name is an env var's on a container, or a key of the pod's
 * annotations (its template's). Every field is tested with has() first: a mutating webhook sees
 * the object before the API server validates it, and a condition that fails to evaluate leaves
 * the decision to failurePolicy. has() costs nothing; each env var and annotation costs the
 * test of its name once, so a pod at the size limit stays within the API server's CEL cost
 * limit for one expression (test/e2e/webhook-match-conditions.test.ts).
 */
const MARKERS = `[${MARKER_NAMES.map((name) => `'${name}'`).join(', ')}]`;
const ANNOTATIONS = `[${[POD_ANNOTATIONS.sidecars, POD_ANNOTATIONS.ignoreExitCode].map((key) => `'${key}'`).join(', ')}]`;

/** A test of a name, as CEL on the CEL expression of the name. */
type NameTest = (name: string) => string;
const isMarker: NameTest = (name) => `${name} in ${MARKERS}`;
/** An annotation that names or configures a sidecar. */
const isMarkerKey: NameTest = (key) => `${key} in ${ANNOTATIONS} || ${key}.startsWith('${POD_ANNOTATIONS.stopPrefix}') || ${key}.startsWith('${POD_ANNOTATIONS.gracePeriodPrefix}')`;

/**
 * Words, in upper case, of which every marker's name (env var or annotation key) holds two or
 * three: a slip in one word leaves another, so every name src/policy/near-miss.ts finds one
 * slip away from a marker, or with a word left out, added or changed, holds one of them.
 */
export const MARKER_WORDS = ['KRUISE', 'SIDECAR', 'TERMINAT'] as const;

/** A container of the list (a CEL path) with an env var whose name passes the test. */
const anyEnv = (containers: string, test: NameTest) => `${containers}.exists(c, has(c.env) && c.env.exists(e, has(e.name) && ${test('e.name')}))`;
/** A pod spec (a CEL path) with such an env var on a container or an init container. */
const specWith = (spec: string, test: NameTest) => `(has(${spec}.containers) && ${anyEnv(`${spec}.containers`, test)}) || (has(${spec}.initContainers) && ${anyEnv(`${spec}.initContainers`, test)})`;
/** The object's fields are reached one by one: each step is tested first. */
const guarded = (path: string[]) => path.map((_, index) => `has(object.${path.slice(0, index + 1).join('.')})`).join(' && ');
/** The object's pod spec at this path, with such an env var. */
const specAt = (path: string[], test: NameTest) => `${guarded(path)} && (${specWith(`object.${path.join('.')}`, test)})`;
/** The object's metadata at this path (the pod's, or its template's), with an annotation whose key passes the test. */
const annotatedAt = (path: string[], test: NameTest) => `${guarded([...path, 'annotations'])} && object.${path.join('.')}.annotations.exists(k, ${test('k')})`;

/**
 * What a test of names looks at, at most: more containers in a list, more env vars in a
 * container, more annotations, or a longer name, and the object may be marked, untested. So no
 * pod the API server stores costs more than its CEL cost limit for one expression (1,000,000
 * units), where a test of each name of a pod at its size limit would: it costs a tenth of a unit
 * per character and per word, and a few units per name.
 */
export const NAMES_TESTED = { containers: 32, envPerContainer: 128, annotations: 128, nameLength: 64 } as const;

/** Whether a name may be a marker's or a near miss of one: a marker word in it, in any case (ASCII, as CEL's upperAscii), or too long to test. What mayBeMarkerCel tests. */
export function mayBeMarker(name: string): boolean {
  if (name.length > NAMES_TESTED.nameLength) return true;
  const upper = name.replace(/[a-z]/g, (letter) => letter.toUpperCase());
  return MARKER_WORDS.some((word) => upper.includes(word));
}
const mayBeMarkerCel: NameTest = (name) => `(size(${name}) > ${NAMES_TESTED.nameLength} || ${MARKER_WORDS.map((word) => `${name}.upperAscii().contains('${word}')`).join(' || ')})`;

/** The pod template at this path (its spec is there already) with a name that may be a marker's, or too many to test. */
const mayBeMarkedAt = (path: string[]) => {
  const spec = `object.${[...path, 'spec'].join('.')}`;
  const inContainers = (list: string) =>
    `(has(${list}) && (${list}.size() > ${NAMES_TESTED.containers} || ${list}.exists(c, has(c.env) && (c.env.size() > ${NAMES_TESTED.envPerContainer} || c.env.exists(e, has(e.name) && ${mayBeMarkerCel('e.name')})))))`;
  const metadata = [...path, 'metadata'];
  const annotations = `object.${metadata.join('.')}.annotations`;
  const inAnnotations = `(${guarded([...metadata, 'annotations'])} && (${annotations}.size() > ${NAMES_TESTED.annotations} || ${annotations}.exists(k, ${mayBeMarkerCel('k')})))`;
  return `${inContainers(`${spec}.containers`)} || ${inContainers(`${spec}.initContainers`)} || ${inAnnotations}`;
};
/**
 * What the validating webhook needs to see of the pod template at this path (the pod itself:
 * none): one that can finish with a name that may be a marker's, another with a marker.
 */
const validatedTemplate = (...path: string[]) => {
  const restartPolicy = [...path, 'spec', 'restartPolicy'];
  return `${guarded(restartPolicy)} && object.${restartPolicy.join('.')} in ['Never', 'OnFailure'] ? (${mayBeMarkedAt(path)}) : (${specAt([...path, 'spec'], isMarker)}) || (${annotatedAt([...path, 'metadata'], isMarkerKey)})`;
};

export const MATCH_CONDITIONS: { mutating: V1MatchCondition[]; validating: V1MatchCondition[] } = {
  mutating: [
    {
      name: 'may-finish-or-marked',
      expression: `has(object.spec) && ((has(object.spec.restartPolicy) && object.spec.restartPolicy in ['Never', 'OnFailure']) || ${specWith('object.spec', isMarker)} || (${annotatedAt(['metadata'], isMarkerKey)}))`,
    },
  ],
  validating: [
    {
      name: 'marked',
      expression:
        `request.resource.resource == 'pods' ? (${validatedTemplate()}) : ` +
        `request.resource.resource == 'cronjobs' ? (${validatedTemplate('spec', 'jobTemplate', 'spec', 'template')}) : ` +
        `(${validatedTemplate('spec', 'template')})`,
    },
  ],
};

export function desiredWebhookConfigurations(target: WebhookTarget, caBundle: string): { mutating: V1MutatingWebhookConfiguration; validating: V1ValidatingWebhookConfiguration } {
  const common = (path: string) => ({
    clientConfig: clientConfig(target, path, caBundle),
    admissionReviewVersions: ['v1'],
    failurePolicy: target.failurePolicy,
    timeoutSeconds: target.timeoutSeconds ?? WEBHOOK_TIMEOUT_SECONDS,
    namespaceSelector: {
      ...(target.namespaceLabels && Object.keys(target.namespaceLabels).length > 0 ? { matchLabels: { ...target.namespaceLabels } } : {}),
      matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: excludedNamespaces(target.namespace, target.excludedNamespaces) }],
    },
  });
  const metadata = { name: target.name, labels: { ...MANAGED_BY_LABELS } };
  // First, so that the label webhook after it sees the pod migrated already. The API server
  // selects the namespaces from its own cache: no namespace reads, nothing to keep in sync.
  const nativeSidecars = target.nativeSidecars ?? 'none';
  const nativeCommon = common('/native-sidecars');
  const optIn: Record<string, string> = nativeSidecars === 'labelled' ? { [NATIVE_SIDECARS_NAMESPACE_LABEL.key]: NATIVE_SIDECARS_NAMESPACE_LABEL.value } : {};
  const matchLabels: Record<string, string> = { ...target.namespaceLabels, ...optIn };
  const native = nativeSidecars === 'none'
    ? []
    : [{ name: WEBHOOK_NAMES.nativeSidecars, rules: [podCreate], matchConditions: MATCH_CONDITIONS.mutating, reinvocationPolicy: 'IfNeeded', sideEffects: 'None', ...nativeCommon, namespaceSelector: { ...(Object.keys(matchLabels).length > 0 ? { matchLabels } : {}), matchExpressions: nativeCommon.namespaceSelector.matchExpressions } }];
  return {
    mutating: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata,
      // IfNeeded: called again when a later webhook changed the pod (a service mesh or log agent
      // injecting a marked sidecar), so that sidecar's pod is labelled too. Mutation is
      // idempotent: a pod labelled already gets no patch.
      webhooks: [...native, { name: WEBHOOK_NAMES.mutate, rules: [podCreate], matchConditions: MATCH_CONDITIONS.mutating, reinvocationPolicy: 'IfNeeded', sideEffects: 'None', ...common('/mutate') }],
    },
    validating: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata,
      // NoneOnDryRun: for an object a controller created despite errors it records an Event on the
      // owner, except on dry runs.
      webhooks: [{ name: WEBHOOK_NAMES.validate, rules: [podCreate, jobTemplates, ...(target.validateWorkloads ? [workloadTemplates] : [])], matchConditions: MATCH_CONDITIONS.validating, sideEffects: 'NoneOnDryRun', ...common('/validate') }],
    },
  };
}

function clientConfig(target: WebhookTarget, path: string, caBundle: string): AdmissionregistrationV1WebhookClientConfig {
  const base = { caBundle: Buffer.from(caBundle).toString('base64') };
  if (target.url) return { ...base, url: target.url.replace(/\/+$/, '') + path };
  return { ...base, service: { name: target.serviceName, namespace: target.namespace, path, port: 443 } };
}

/** Creates both configurations, or replaces them with the desired content. */
export async function registerWebhookConfigurations(api: AdmissionregistrationV1Api, target: WebhookTarget, caBundle: string): Promise<void> {
  const desired = desiredWebhookConfigurations(target, caBundle);
  const kinds = configurationApis(api);
  await createOrReplace(kinds.mutating, desired.mutating);
  await createOrReplace(kinds.validating, desired.validating);
}

/** Reads, creates and replaces one cluster-scoped kind: what createOrReplace needs. */
export interface ClusterObjectApi<T extends { metadata?: { name?: string; resourceVersion?: string } }> {
  read(name: string): Promise<T>;
  create(body: T): Promise<unknown>;
  replace(name: string, body: T): Promise<unknown>;
}

/** Creates the object, or replaces it with the desired content. */
export async function createOrReplace<T extends { metadata?: { name?: string; resourceVersion?: string } }>(kind: ClusterObjectApi<T>, body: T): Promise<void> {
  const name = body.metadata!.name!;
  // 409 means another replica created or updated it in between: read again and retry.
  for (let attempt = 1; ; attempt++) {
    try {
      const existing = await readIfExists(kind, name);
      if (!existing) await kind.create(body);
      else await kind.replace(name, { ...body, metadata: { ...body.metadata, resourceVersion: existing.metadata?.resourceVersion } });
      return;
    } catch (err) {
      if (attempt >= 5 || !isApiError(err, 409)) throw err;
    }
  }
}

/** What syncCaBundles reads of the shared certificates, fresh, before it takes a CA out of a caBundle. */
export interface StoredCaBundle {
  /** The CAs now in the store (the Secret every replica serves from): the one that signs its certificate, and the previous one while valid. */
  read(): Promise<string | undefined>;
}

/**
 * Sets caBundle on every webhook of both configurations named `name`, patching only those that
 * differ; configurations that do not exist are skipped. Returns the kinds it patched.
 *
 * Replicas race here: one may still hold the bundle another has just replaced in the Secret,
 * along with a new CA it already patched in. So each patch is a test-and-set against the
 * configuration as read (its resourceVersion: a change in between fails the patch, and it is
 * read and computed again), and a CA that the patch would take out is kept while the store
 * still holds it, read after the configuration: no replica removes the CA of the certificate
 * the others serve.
 */
export async function syncCaBundles(api: AdmissionregistrationV1Api, name: string, caBundle: string, stored?: StoredCaBundle): Promise<string[]> {
  const patched: string[] = [];
  for (const kind of Object.values(configurationApis(api))) {
    for (let attempt = 1; ; attempt++) {
      try {
        if (await syncOne(kind, name, caBundle, stored)) patched.push(kind.kind);
        break;
      } catch (err) {
        // 409: the resourceVersion moved; 422: a test of the patch failed (a webhook was renamed or reordered).
        if (attempt >= 5 || !(isApiError(err, 409) || isApiError(err, 422))) throw err;
      }
    }
  }
  return patched;
}

/**
 * The webhooks of both configurations named `name` that carry no matchConditions, although every
 * one is written with them (by --register-webhooks or the chart): an API server that drops the
 * field (Kubernetes 1.27, and 1.28 or 1.29 with the AdmissionWebhookMatchConditions feature gate
 * turned off; beta and on by default there, GA and always on from 1.30) calls them for every
 * object their rules match, as before the field existed.
 */
export async function webhooksWithoutMatchConditions(api: AdmissionregistrationV1Api, name: string): Promise<string[]> {
  const unmatched: string[] = [];
  for (const kind of Object.values(configurationApis(api))) {
    const existing = await readIfExists(kind, name);
    for (const webhook of existing?.webhooks ?? []) if (!webhook.matchConditions?.length) unmatched.push(webhook.name);
  }
  return unmatched;
}

async function syncOne(kind: ConfigurationApi, name: string, caBundle: string, stored: StoredCaBundle | undefined): Promise<boolean> {
  const existing = await readIfExists(kind, name);
  if (!existing?.webhooks?.length) return false;
  // Loaded here: the watcher imports this module (excludedNamespaces) and loads no TLS code.
  const { certificatesIn } = await import('../tls/certificates.ts');
  const wanted = certificatesIn(caBundle);
  let storedCas: Promise<string[]> | undefined;
  const ops: object[] = [];
  for (const [index, webhook] of existing.webhooks.entries()) {
    const current = certificatesIn(Buffer.from(webhook.clientConfig.caBundle ?? '', 'base64').toString());
    const removed = current.filter((ca) => !wanted.includes(ca));
    const still = removed.length > 0 && stored ? await (storedCas ??= stored.read().then((bundle) => certificatesIn(bundle ?? ''))) : [];
    const kept = removed.filter((ca) => still.includes(ca));
    const encoded = Buffer.from(kept.length === 0 ? caBundle : [...wanted, ...kept].join('')).toString('base64');
    if (webhook.clientConfig.caBundle === encoded) continue;
    // Already these CAs, in another order: a replica with a stale bundle leaves them as they are.
    if (kept.length > 0 && wanted.length + kept.length === current.length) continue;
    // Each change is guarded by a test of the webhook's name, so a concurrent reordering makes
    // the patch fail instead of touching the wrong webhook.
    ops.push({ op: 'test', path: `/webhooks/${index}/name`, value: webhook.name }, { op: 'add', path: `/webhooks/${index}/clientConfig/caBundle`, value: encoded });
  }
  if (ops.length === 0) return false;
  await kind.patch(name, [{ op: 'test', path: '/metadata/resourceVersion', value: existing.metadata?.resourceVersion }, ...ops]);
  return true;
}

async function readIfExists<T>(kind: Pick<ClusterObjectApi<T & object>, 'read'>, name: string): Promise<T | undefined> {
  try {
    return await kind.read(name);
  } catch (err) {
    if (isApiError(err, 404)) return undefined;
    throw err;
  }
}

/** The same four calls for both kinds, so the logic above is written once. */
interface ConfigurationApi extends ClusterObjectApi<WebhookConfiguration> {
  kind: string;
  /** A JSON Patch (client-node 2 sends application/json-patch+json unless told otherwise). */
  patch(name: string, ops: object[]): Promise<unknown>;
}

function configurationApis(api: AdmissionregistrationV1Api): { mutating: ConfigurationApi; validating: ConfigurationApi } {
  return {
    mutating: {
      kind: 'MutatingWebhookConfiguration',
      read: (name) => api.readMutatingWebhookConfiguration({ name }),
      create: (body) => api.createMutatingWebhookConfiguration({ body }),
      replace: (name, body) => api.replaceMutatingWebhookConfiguration({ name, body }),
      patch: (name, body) => api.patchMutatingWebhookConfiguration({ name, body }),
    },
    validating: {
      kind: 'ValidatingWebhookConfiguration',
      read: (name) => api.readValidatingWebhookConfiguration({ name }),
      create: (body) => api.createValidatingWebhookConfiguration({ body }),
      replace: (name, body) => api.replaceValidatingWebhookConfiguration({ name, body }),
      patch: (name, body) => api.patchValidatingWebhookConfiguration({ name, body }),
    },
  };
}
