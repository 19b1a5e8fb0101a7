// Which objects reach the webhooks, decided by the API server itself: the matchConditions that
// `serve --register-webhooks` writes (the chart's are the same, test/chart/render.test.ts), on a
// real API server whose controllers create the pods (no node: they stay Pending). A name that
// may be a misspelt marker takes a Job, CronJob or pod that can finish to the validating webhook;
// a pod with as many names as it tests stays within the API server's CEL cost limit, and one with
// more reaches the webhook untested. Counted twice,
// by the webhook's own sidecar_terminator_admission_requests_total and by the API server's
// apiserver_admission_webhook_request_total. And the chart's namespaceSelector: kube-system and
// the release namespace are never sent to the webhooks, whatever webhook.excludedNamespaces says.
// The webhook runs with an operator's injected-sidecar policy (--injected-sidecars, an entry with a
// namespaceSelector): it changes no registration, so every count below is the count without one.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { NAMES_TESTED } from '../../src/kube/webhook-configurations.ts';
import { ENV_WHEN_JOB_EXIT, POD_ANNOTATIONS } from '../../src/policy/index.ts';
import { render } from '../chart/helm.ts';
import { startControlPlane } from '../support/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { apiServerMetrics, scrape, sumSamples } from '../support/metrics.ts';
import { registeringWebhooks, startServe } from '../support/serve-process.ts';

const cp = await startControlPlane();
t.teardown(() => cp.stop());
const core = cp.kubeConfig.makeApiClient(CoreV1Api);
const certDir = await mkdtemp(join(tmpdir(), 'st-e2e-certs-'));
t.teardown(() => rm(certDir, { recursive: true, force: true }));
const policy = join(certDir, 'injected-sidecars.yaml');
await writeFile(policy, JSON.stringify({ entries: [{ name: 'istio', container: 'istio-proxy', stop: 'istio-proxy', namespaceSelector: { matchLabels: { 'istio-injection': 'enabled' } } }] }));
const serve = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, '--no-watcher', '--native-sidecars', 'all', '--validate-workloads', '--injected-sidecars', policy, ...registeringWebhooks(port, 'Fail')]);
t.teardown(() => serve.stop());

const WEBHOOKS = { mutate: 'mutate.sidecar-terminator.io', 'native-sidecars': 'native-sidecars.sidecar-terminator.io', validate: 'validate.sidecar-terminator.io' } as const;
type Endpoint = keyof typeof WEBHOOKS;
type Counts = Record<Endpoint, { webhook: number; apiServer: number }>;

/** Admission calls so far, per webhook: as the webhook counted them, and as the API server did. */
async function calls(): Promise<Counts> {
  const [own, apiServer] = await Promise.all([scrape(`${serve.url}/metrics`), apiServerMetrics(cp)]);
  const count = (endpoint: Endpoint) => ({
    webhook: sumSamples(own, 'sidecar_terminator_admission_requests_total', { endpoint }),
    apiServer: sumSamples(apiServer, 'apiserver_admission_webhook_request_total', { name: WEBHOOKS[endpoint] }),
  });
  return { mutate: count('mutate'), 'native-sidecars': count('native-sidecars'), validate: count('validate') };
}

/** The calls `action` caused, per webhook, both counts; each webhook's count must agree with the API server's. */
async function callsDuring(t: Test, action: () => Promise<void>): Promise<Record<Endpoint, number>> {
  const before = await calls();
  await action();
  const after = await calls();
  const delta = {} as Record<Endpoint, number>;
  for (const endpoint of Object.keys(WEBHOOKS) as Endpoint[]) {
    const webhook = after[endpoint].webhook - before[endpoint].webhook;
    t.equal(after[endpoint].apiServer - before[endpoint].apiServer, webhook, `${endpoint}: the API server counts the calls the webhook counts`);
    delta[endpoint] = webhook;
  }
  return delta;
}

async function apply(namespace: string, manifest: object): Promise<void> {
  const result = await cp.kubectl(['apply', '-f', '-'], { namespace, input: JSON.stringify(manifest) });
  if (result.code !== 0) throw new Error(`kubectl apply: ${result.stderr}`);
}

async function podsCreated(namespace: string, labelSelector: string, count: number): Promise<void> {
  await waitFor(`${count} pods (${labelSelector}) in ${namespace}`, async () => (await core.listNamespacedPod({ namespace, labelSelector })).items.length === count, { timeoutMs: 60_000 });
}

const marker = [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }];
/** Marked, or with a misspelt marker alone (the env var of `kubectl apply` of a Job that hangs), or neither. */
const podSpec = (restartPolicy: string, marked: boolean | 'misspelt') => ({
  restartPolicy,
  // An ordinary name on every container: it takes nothing to the validating webhook.
  containers: [
    { name: 'main', image: 'busybox:1.36', env: [{ name: 'LOG_LEVEL', value: 'info' }] },
    { name: 'proxy', image: 'envoyproxy/envoy:v1.31.0', ...(marked === 'misspelt' ? { env: [{ name: 'KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT', value: 'true' }] } : marked ? { env: marker } : {}) },
  ],
});
const deployment = (name: string, replicas: number, marked: boolean | 'misspelt') => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name },
  spec: { replicas, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: podSpec('Always', marked) } },
});
const job = (name: string, marked: boolean | 'misspelt') => ({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name }, spec: { backoffLimit: 0, template: { spec: podSpec('Never', marked) } } });
const cronJob = (name: string, marked: boolean | 'misspelt') => ({ apiVersion: 'batch/v1', kind: 'CronJob', metadata: { name }, spec: { schedule: '0 0 1 1 *', jobTemplate: { spec: { template: { spec: podSpec('Never', marked) } } } } });
const pod = (name: string, restartPolicy: string, marked: boolean | 'misspelt') => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec: podSpec(restartPolicy, marked) });

// The API server calls a webhook a moment after it is registered: a marked bad Job is denied then.
await waitFor('the API server to call the webhooks', async () => {
  const result = await cp.kubectl(['create', '--dry-run=server', '-f', '-'], { namespace: 'default', input: JSON.stringify(job('dry-run', true)).replace('"true"', '"yes"') });
  return result.stderr.includes('denied the request');
});

t.test('the API server keeps the matchConditions serve registers, so serve has nothing to warn about', async (t) => {
  const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const webhooks = [
    ...((await admission.readMutatingWebhookConfiguration({ name: 'sidecar-terminator' })).webhooks ?? []),
    ...((await admission.readValidatingWebhookConfiguration({ name: 'sidecar-terminator' })).webhooks ?? []),
  ];
  t.same(webhooks.map((webhook) => [webhook.name, webhook.matchConditions?.map((condition) => condition.name)]), [
    ['native-sidecars.sidecar-terminator.io', ['may-finish-or-marked']],
    ['mutate.sidecar-terminator.io', ['may-finish-or-marked']],
    ['validate.sidecar-terminator.io', ['marked']],
  ]);
  t.notOk(serve.logs().some((line) => String(line.msg).includes('keeps no matchConditions')), 'no warning in the log');
});

t.test('the pods of a Deployment (restartPolicy Always, no marker) and the Deployment itself reach no webhook', async (t) => {
  const namespace = await cp.createNamespace();
  const delta = await callsDuring(t, async () => {
    await apply(namespace, deployment('web', 20, false));
    await apply(namespace, pod('bare', 'Always', false));
    await podsCreated(namespace, 'app=web', 20);
  });
  t.same(delta, { mutate: 0, 'native-sidecars': 0, validate: 0 }, '21 pods and a Deployment created, no call');
});

t.test("a Job's pod without a marker still reaches the mutating webhooks (a later webhook may inject a marked sidecar), not the validating one", async (t) => {
  const namespace = await cp.createNamespace();
  const delta = await callsDuring(t, async () => {
    for (const name of ['plain-1', 'plain-2', 'plain-3']) await apply(namespace, job(name, false));
    await apply(namespace, pod('on-failure', 'OnFailure', false));
    await apply(namespace, cronJob('nightly-plain', false));
    await podsCreated(namespace, 'batch.kubernetes.io/controller-uid', 3);
  });
  t.same(delta, { mutate: 4, 'native-sidecars': 4, validate: 0 }, 'one mutating call per pod (3 Jobs, 1 OnFailure pod); neither the Jobs, the CronJob nor the pods are validated');
});

t.test('marked objects reach the validating webhook, and a marked pod reaches the mutating ones whatever its restartPolicy', async (t) => {
  const namespace = await cp.createNamespace();
  const delta = await callsDuring(t, async () => {
    await apply(namespace, job('marked', true));
    await apply(namespace, cronJob('nightly', true));
    await apply(namespace, deployment('marked-web', 2, true));
    await podsCreated(namespace, 'job-name=marked', 1);
    await podsCreated(namespace, 'app=marked-web', 2);
  });
  // validate: the Job, its pod, the CronJob, the Deployment and its 2 pods; mutate: the 3 pods.
  t.same(delta, { mutate: 3, 'native-sidecars': 3, validate: 6 });
});

t.test('a name that may be a misspelt marker takes a Job, a CronJob, their pods and a bare pod to the validating webhook, not a Deployment or its pods', async (t) => {
  const namespace = await cp.createNamespace();
  const delta = await callsDuring(t, async () => {
    await apply(namespace, job('misspelt', 'misspelt'));
    await apply(namespace, cronJob('nightly-misspelt', 'misspelt'));
    await apply(namespace, pod('misspelt', 'Never', 'misspelt'));
    await apply(namespace, deployment('misspelt-web', 2, 'misspelt'));
    await podsCreated(namespace, 'job-name=misspelt', 1);
    await podsCreated(namespace, 'app=misspelt-web', 2);
  });
  // validate: the Job, its pod, the CronJob and the bare pod (restartPolicy Always: a near miss changes nothing there); mutate: the Job's pod and the bare pod.
  t.same(delta, { mutate: 2, 'native-sidecars': 2, validate: 4 });
});

t.test("a pod with as many names as the validating webhook's CEL tests is admitted without a call, within the API server's cost limit; one with more reaches the webhook", async (t) => {
  const namespace = await cp.createNamespace();
  /** A name of `length` characters holding no marker word. */
  const name = (index: number, length: number) => `E${String(index).padStart(6, '0')}`.padEnd(length, 'X');
  const containers = (prefix: string, count: number, envPerContainer: number) =>
    Array.from({ length: count }, (_, c) => ({ name: `${prefix}${c}`, image: 'busybox:1.36', env: Array.from({ length: envPerContainer }, (_, e) => ({ name: name(c * 1000 + e, NAMES_TESTED.nameLength) })) }));
  const { containers: count, envPerContainer, annotations } = NAMES_TESTED;
  const fullPod = (restartPolicy: string, more: { containers?: number; env?: number; annotations?: number; nameLength?: number } = {}) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'full', annotations: Object.fromEntries(Array.from({ length: more.annotations ?? annotations }, (_, i) => [name(i, 63).toLowerCase(), ''])) },
    spec: {
      restartPolicy,
      // A longer name on a container of its own, in place of one: the count stays.
      containers: [...containers('c', (more.containers ?? count) - (more.nameLength ? 1 : 0), more.env ?? envPerContainer), ...(more.nameLength ? [{ name: 'long', image: 'busybox:1.36', env: [{ name: name(0, more.nameLength) }] }] : [])],
      initContainers: containers('i', count, envPerContainer),
    },
  });
  /** Created with --dry-run=server; with failurePolicy Fail, a condition over the cost limit refuses it. */
  const create = async (manifest: object) => {
    const result = await cp.kubectl(['create', '--dry-run=server', '-f', '-'], { namespace, input: JSON.stringify(manifest) });
    t.equal(result.code, 0, 'admitted', { stderr: result.stderr.slice(0, 500) });
  };
  const full = fullPod('Never');
  t.ok(JSON.stringify(full).length < 1.5 * 1024 * 1024, 'within the size etcd stores');
  t.same(await callsDuring(t, () => create(full)), { mutate: 1, 'native-sidecars': 1, validate: 0 }, `${count} containers and ${count} init containers of ${envPerContainer} env vars, ${annotations} annotations, every name ${NAMES_TESTED.nameLength} characters: tested, no call`);
  t.same(await callsDuring(t, () => create(fullPod('Always'))), { mutate: 0, 'native-sidecars': 0, validate: 0 }, 'the same pod, restartPolicy Always: tested for markers, no call');
  for (const [what, more] of [
    ['a container more', { containers: count + 1 }],
    ['an env var more', { env: envPerContainer + 1 }],
    ['an annotation more', { annotations: annotations + 1 }],
    ['a name longer', { nameLength: NAMES_TESTED.nameLength + 1 }],
  ] as const) {
    t.same(await callsDuring(t, () => create(fullPod('Never', more))), { mutate: 1, 'native-sidecars': 1, validate: 1 }, `${what}: not tested, validated by the webhook`);
  }
});

t.test('a sidecar named by the pod annotation, with no env marker, marks the object just the same', async (t) => {
  const namespace = await cp.createNamespace();
  const named = { annotations: { [POD_ANNOTATIONS.sidecars]: 'proxy' } };
  /** The manifest with the annotation on its pod template (`template` finds it). */
  const withAnnotation = <T>(manifest: T, template: (m: T) => object): T => {
    const at = template(manifest) as { metadata?: object };
    at.metadata = { ...at.metadata, ...named };
    return manifest;
  };
  const delta = await callsDuring(t, async () => {
    await apply(namespace, withAnnotation(job('named', false), (m) => m.spec.template));
    await apply(namespace, withAnnotation(cronJob('nightly-named', false), (m) => m.spec.jobTemplate.spec.template));
    await apply(namespace, withAnnotation(deployment('named-web', 1, false), (m) => m.spec.template));
    await podsCreated(namespace, 'job-name=named', 1);
    await podsCreated(namespace, 'app=named-web', 1);
  });
  // validate: the Job, its pod, the CronJob, the Deployment and its pod; mutate: the 2 pods (the Job's can finish anyway).
  t.same(delta, { mutate: 2, 'native-sidecars': 2, validate: 5 });
});

t.test("the chart's webhooks skip kube-system and the release namespace even when webhook.excludedNamespaces lists neither", async (t) => {
  for (const name of ['st-platform', 'team-x']) await cp.createNamespace(name);
  // Nothing serves the chart's Service here: with failurePolicy Fail, every call fails and refuses the pod.
  const rendered = await render({ webhook: { excludedNamespaces: ['team-x'], failurePolicy: 'Fail' } }, { release: 'excluded', namespace: 'st-platform' });
  const configurations = rendered.filter((m) => m.kind === 'MutatingWebhookConfiguration' || m.kind === 'ValidatingWebhookConfiguration');
  t.equal(configurations.length, 2);
  await apply('default', { apiVersion: 'v1', kind: 'List', items: configurations });
  t.teardown(() => cp.kubectl(['delete', 'mutatingwebhookconfiguration,validatingwebhookconfiguration', 'excluded-sidecar-terminator']));
  const served = await cp.createNamespace();
  const create = (namespace: string) => cp.kubectl(['create', '-f', '-'], { namespace, input: JSON.stringify(pod(`probe-${Date.now()}`, 'Never', true)) });
  await waitFor("the API server to call the chart's webhooks", async () => (await create(served)).stderr.includes('failed calling webhook'));

  const refused = await create(served);
  t.not(refused.code, 0, 'a served namespace: refused, as no webhook answers');
  t.match(refused.stderr, /failed calling webhook ".*sidecar-terminator\.io"/);
  for (const namespace of ['kube-system', 'st-platform', 'team-x']) {
    const result = await create(namespace);
    t.equal(result.code, 0, `${namespace}: created without calling the webhooks`, { stderr: result.stderr });
  }
});
