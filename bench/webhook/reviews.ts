// Realistic AdmissionReviews for the webhook benchmark, generated deterministically (seeded).
//
// What the API server really sends on a pod CREATE from the Job controller: the object after
// defaulting and after the built-in mutating admission plugins (ServiceAccount adds the
// kube-api-access projected volume and its mount in every container, DefaultTolerationSeconds
// the two not-ready/unreachable tolerations), with managedFields, owner reference, Job labels,
// and the request envelope with userInfo and options. Containers carry 10-40 env vars each
// (plain values, secretKeyRef, configMapKeyRef, fieldRef), resources, ports, probes on the
// sidecars. The sidecars carry valid markers, so /validate allows without warnings and
// /mutate answers with the managed-label patch: the full path through the policy.
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE } from '../../src/policy/index.ts';
import { seededRandom } from '../lib/stats.ts';

export type Kind = 'Pod' | 'Job' | 'CronJob';

export interface ReviewSpec {
  kind: Kind;
  containers: number;
  seed: number;
}

const IMAGES = [
  'registry.example.com/etl/extract:4.12.0',
  'registry.example.com/etl/transform:4.12.0',
  'registry.example.com/ml/trainer@sha256:3f1c0d5a1e2b4c6d8e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d',
  'python:3.12.7-slim',
  'registry.example.com/reports/renderer:2024.10.1',
];
const SIDECARS = [
  { name: 'istio-proxy', image: 'docker.io/istio/proxyv2:1.23.2', port: 15090 },
  { name: 'fluent-bit', image: 'cr.fluentbit.io/fluent/fluent-bit:3.1.9', port: 2020 },
  { name: 'cloud-sql-proxy', image: 'gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.0', port: 9801 },
  { name: 'otel-agent', image: 'otel/opentelemetry-collector-contrib:0.111.0', port: 13133 },
];
const ENV_WORDS = ['DATABASE', 'CACHE', 'QUEUE', 'BUCKET', 'REGION', 'TIMEOUT', 'RETRIES', 'ENDPOINT', 'FEATURE', 'LOG', 'TRACE', 'BATCH', 'WORKER', 'TOKEN'];

function envVars(rand: () => number, count: number, prefix: string): Record<string, unknown>[] {
  const env: Record<string, unknown>[] = [];
  const object = prefix.toLowerCase().replaceAll('_', '-');
  for (let i = 0; i < count; i++) {
    const word = ENV_WORDS[Math.floor(rand() * ENV_WORDS.length)]!;
    const name = `${prefix}_${word}_${i}`;
    const pick = rand();
    if (pick < 0.7) env.push({ name, value: valueFor(rand, word) });
    else if (pick < 0.82) env.push({ name, valueFrom: { secretKeyRef: { name: `${object}-secrets`, key: word.toLowerCase(), optional: false } } });
    else if (pick < 0.94) env.push({ name, valueFrom: { configMapKeyRef: { name: `${object}-config`, key: `${word.toLowerCase()}.${i}` } } });
    else env.push({ name, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: rand() < 0.5 ? 'metadata.namespace' : 'status.podIP' } } });
  }
  return env;
}

function valueFor(rand: () => number, word: string): string {
  switch (word) {
    case 'ENDPOINT':
    case 'DATABASE':
      return `postgres://svc-${Math.floor(rand() * 1000)}.data.svc.cluster.local:5432/warehouse?sslmode=verify-full&connect_timeout=10`;
    case 'TIMEOUT':
    case 'RETRIES':
      return String(Math.floor(rand() * 120));
    case 'FEATURE':
      return rand() < 0.5 ? 'true' : 'false';
    default:
      return `${word.toLowerCase()}-${Math.floor(rand() * 1e9).toString(36)}-${Math.floor(rand() * 1e9).toString(36)}`;
  }
}

const API_ACCESS_MOUNT = { name: 'kube-api-access-x7q2k', readOnly: true, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' };

function resources(rand: () => number) {
  const cpu = `${100 * (1 + Math.floor(rand() * 8))}m`;
  const memory = `${128 * (1 + Math.floor(rand() * 16))}Mi`;
  return { requests: { cpu, memory }, limits: { memory } };
}

/** The pod spec after API server defaulting, with `count` containers of which some are sidecars. */
export function podSpec(rand: () => number, count: number): Record<string, unknown> {
  const sidecarCount = count <= 2 ? 1 : count <= 5 ? 2 : 4;
  const containers: Record<string, unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const envCount = 10 + Math.floor(rand() * 31);
    const isSidecar = i >= count - sidecarCount;
    const common = {
      terminationMessagePath: '/dev/termination-log',
      terminationMessagePolicy: 'File',
      imagePullPolicy: 'IfNotPresent',
      resources: resources(rand),
    };
    if (isSidecar) {
      const sidecar = SIDECARS[(i - (count - sidecarCount)) % SIDECARS.length]!;
      const n = i - (count - sidecarCount);
      const name = n < SIDECARS.length ? sidecar.name : `${sidecar.name}-${n}`;
      // One sidecar in two declares a pinned quick-exit image as well (Kruise's kill wins on normal nodes).
      const markers = [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, ...(n % 2 === 1 ? [{ name: ENV_WITH_IMAGE, value: 'registry.example.com/quick-exit:1.0.2' }] : [])];
      containers.push({
        name,
        image: sidecar.image,
        args: ['--config', `/etc/${name}/config.yaml`, '--log-level', 'info'],
        ports: [{ name: 'metrics', containerPort: sidecar.port, protocol: 'TCP' }],
        env: [...envVars(rand, envCount, name.toUpperCase().replaceAll('-', '_')), ...markers],
        volumeMounts: [{ name: `${name}-config`, mountPath: `/etc/${name}` }, API_ACCESS_MOUNT],
        readinessProbe: {
          httpGet: { path: '/healthz', port: sidecar.port, scheme: 'HTTP' },
          timeoutSeconds: 1,
          periodSeconds: 10,
          successThreshold: 1,
          failureThreshold: 3,
        },
        securityContext: { runAsUser: 1337, runAsGroup: 1337, runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        ...common,
      });
    } else {
      containers.push({
        name: i === 0 ? 'main' : `worker-${i}`,
        image: IMAGES[i % IMAGES.length]!,
        command: ['/bin/sh', '-c'],
        args: [`exec /app/run --stage=${i} --input=s3://bucket/in/${i} --output=s3://bucket/out/${i}`],
        env: envVars(rand, envCount, `APP${i}`),
        volumeMounts: [{ name: 'work', mountPath: '/work' }, API_ACCESS_MOUNT],
        ...common,
      });
    }
  }
  const sidecarNames = containers.slice(count - sidecarCount).map((c) => c.name as string);
  return {
    volumes: [
      { name: 'work', emptyDir: {} },
      ...sidecarNames.map((name) => ({ name: `${name}-config`, configMap: { name: `${name}-config`, defaultMode: 420 } })),
      {
        name: 'kube-api-access-x7q2k',
        projected: {
          sources: [
            { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
            { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
            { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
          ],
          defaultMode: 420,
        },
      },
    ],
    containers,
    restartPolicy: 'Never',
    terminationGracePeriodSeconds: 30,
    dnsPolicy: 'ClusterFirst',
    serviceAccountName: 'etl-runner',
    serviceAccount: 'etl-runner',
    securityContext: { fsGroup: 2000, seccompProfile: { type: 'RuntimeDefault' } },
    schedulerName: 'default-scheduler',
    tolerations: [
      { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
    ],
    priority: 0,
    enableServiceLinks: true,
    preemptionPolicy: 'PreemptLowerPriority',
  };
}

/** managedFields' FieldsV1 for an object, as the API server's structured-merge-diff writes it. */
function fieldsV1(value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return {};
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    if (Array.isArray(child) && child.every((item) => item !== null && typeof item === 'object' && !Array.isArray(item))) {
      const items: Record<string, unknown> = {};
      for (const item of child as Record<string, unknown>[]) {
        const itemKey = typeof item.name === 'string' ? { name: item.name } : typeof item.containerPort === 'number' ? { containerPort: item.containerPort, protocol: item.protocol } : undefined;
        if (itemKey === undefined) continue;
        items[`k:${JSON.stringify(itemKey)}`] = { '.': {}, ...fieldsV1(item) };
      }
      out[`f:${key}`] = items;
    } else {
      out[`f:${key}`] = fieldsV1(child);
    }
  }
  return out;
}

const uid = (rand: () => number) =>
  'xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx'.replace(/[xy]/g, (c) => {
    const r = Math.floor(rand() * 16);
    return (c === 'x' ? r : (r & 0x3) | 0x8).toString(16);
  });

const CREATED = '2025-01-15T09:30:00Z';

function podObject(rand: () => number, containers: number): Record<string, unknown> {
  const jobUid = uid(rand);
  const spec = podSpec(rand, containers);
  const labels = {
    'batch.kubernetes.io/controller-uid': jobUid,
    'batch.kubernetes.io/job-name': 'nightly-etl-28963170',
    'controller-uid': jobUid,
    'job-name': 'nightly-etl-28963170',
    app: 'nightly-etl',
    team: 'data-platform',
  };
  const metadata = {
    generateName: 'nightly-etl-28963170-',
    namespace: 'data',
    uid: uid(rand),
    creationTimestamp: CREATED,
    labels,
    annotations: { 'cluster-autoscaler.kubernetes.io/safe-to-evict': 'false', 'prometheus.io/scrape': 'true' },
    ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-etl-28963170', uid: jobUid, controller: true, blockOwnerDeletion: true }],
  };
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: {
      ...metadata,
      managedFields: [
        {
          manager: 'kube-controller-manager',
          operation: 'Update',
          apiVersion: 'v1',
          time: CREATED,
          fieldsType: 'FieldsV1',
          fieldsV1: { 'f:metadata': fieldsV1({ generateName: 1, labels, annotations: metadata.annotations, ownerReferences: metadata.ownerReferences }), 'f:spec': fieldsV1(spec) },
        },
      ],
    },
    spec,
    status: { phase: 'Pending', qosClass: 'Burstable' },
  };
}

function jobSpec(rand: () => number, containers: number): Record<string, unknown> {
  const spec = podSpec(rand, containers);
  // A template has no service-account volume yet: that plugin acts on pods.
  spec.volumes = (spec.volumes as Array<{ name: string }>).filter((v) => !v.name.startsWith('kube-api-access'));
  for (const container of spec.containers as Array<{ volumeMounts: Array<{ name: string }> }>) {
    container.volumeMounts = container.volumeMounts.filter((m) => !m.name.startsWith('kube-api-access'));
  }
  delete spec.tolerations;
  return {
    parallelism: 1,
    completions: 1,
    backoffLimit: 2,
    activeDeadlineSeconds: 7200,
    ttlSecondsAfterFinished: 86400,
    completionMode: 'NonIndexed',
    suspend: false,
    podReplacementPolicy: 'TerminatingOrFailed',
    manualSelector: false,
    template: { metadata: { labels: { app: 'nightly-etl', team: 'data-platform' }, annotations: { 'prometheus.io/scrape': 'true' } }, spec },
  };
}

function objectFor(kind: Kind, rand: () => number, containers: number): Record<string, unknown> {
  if (kind === 'Pod') return podObject(rand, containers);
  const lastApplied = (object: unknown) => ({ 'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify(object) });
  if (kind === 'Job') {
    const spec = jobSpec(rand, containers);
    const base = { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'backfill-2025-01', namespace: 'data' }, spec };
    return { ...base, metadata: { ...base.metadata, uid: uid(rand), creationTimestamp: CREATED, labels: { app: 'backfill' }, annotations: lastApplied(base) }, status: {} };
  }
  const base = {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name: 'nightly-etl', namespace: 'data' },
    spec: {
      schedule: '30 2 * * *',
      timeZone: 'Etc/UTC',
      concurrencyPolicy: 'Forbid',
      suspend: false,
      successfulJobsHistoryLimit: 3,
      failedJobsHistoryLimit: 1,
      jobTemplate: { metadata: { labels: { app: 'nightly-etl' } }, spec: jobSpec(rand, containers) },
    },
  };
  return { ...base, metadata: { ...base.metadata, uid: uid(rand), creationTimestamp: CREATED, annotations: lastApplied(base) }, status: {} };
}

const RESOURCES: Record<Kind, { group: string; version: string; resource: string }> = {
  Pod: { group: '', version: 'v1', resource: 'pods' },
  Job: { group: 'batch', version: 'v1', resource: 'jobs' },
  CronJob: { group: 'batch', version: 'v1', resource: 'cronjobs' },
};

/** The AdmissionReview a kube-apiserver v1.36 sends for a CREATE of this object. */
export function admissionReview({ kind, containers, seed }: ReviewSpec): Record<string, unknown> {
  const rand = seededRandom(seed);
  const object = objectFor(kind, rand, containers);
  const { group, version, resource } = RESOURCES[kind];
  const metadata = object.metadata as { name?: string; namespace: string };
  const isPod = kind === 'Pod';
  return {
    kind: 'AdmissionReview',
    apiVersion: 'admission.k8s.io/v1',
    request: {
      uid: uid(rand),
      kind: { group, version, kind },
      resource: { group, version, resource },
      requestKind: { group, version, kind },
      requestResource: { group, version, resource },
      ...(metadata.name ? { name: metadata.name } : {}),
      namespace: metadata.namespace,
      operation: 'CREATE',
      userInfo: isPod
        ? { username: 'system:serviceaccount:kube-system:job-controller', uid: uid(rand), groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'] }
        : { username: 'jane@example.com', groups: ['data-platform', 'system:authenticated'], extra: { 'authentication.kubernetes.io/credential-id': ['X509SHA256=4f2b1d'] } },
      object,
      oldObject: null,
      dryRun: false,
      options: { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1', ...(isPod ? {} : { fieldManager: 'kubectl-client-side-apply', fieldValidation: 'Strict' }) },
    },
  };
}

export interface Scenario {
  /** Short id, e.g. `pod5-mutate`. */
  id: string;
  path: '/validate' | '/mutate';
  /** Which body it sends (several scenarios share a body and so a baseline). */
  bodyId: string;
  body: string;
  /** What the webhook must answer, checked once before the load. */
  expect: { allowed: true; patched: boolean };
}

export const BODIES: Record<string, ReviewSpec> = {
  pod2: { kind: 'Pod', containers: 2, seed: 2 },
  pod5: { kind: 'Pod', containers: 5, seed: 5 },
  pod20: { kind: 'Pod', containers: 20, seed: 20 },
  job5: { kind: 'Job', containers: 5, seed: 105 },
  cronjob5: { kind: 'CronJob', containers: 5, seed: 205 },
};

export function scenarios(): Scenario[] {
  const bodies = Object.fromEntries(Object.entries(BODIES).map(([id, spec]) => [id, JSON.stringify(admissionReview(spec))]));
  const list: Scenario[] = [];
  for (const bodyId of ['pod2', 'pod5', 'pod20']) {
    list.push({ id: `${bodyId}-validate`, path: '/validate', bodyId, body: bodies[bodyId]!, expect: { allowed: true, patched: false } });
    list.push({ id: `${bodyId}-mutate`, path: '/mutate', bodyId, body: bodies[bodyId]!, expect: { allowed: true, patched: true } });
  }
  for (const bodyId of ['job5', 'cronjob5']) {
    list.push({ id: `${bodyId}-validate`, path: '/validate', bodyId, body: bodies[bodyId]!, expect: { allowed: true, patched: false } });
  }
  return list;
}

export function bodies(): Record<string, string> {
  return Object.fromEntries(Object.entries(BODIES).map(([id, spec]) => [id, JSON.stringify(admissionReview(spec))]));
}
