// AdmissionReviews shaped to make the webhook work hard, as anyone allowed to create a pod (even
// with --dry-run=server) or to reach the webhook port can send them: each shape grows with a
// count (containers, env entries, characters, map keys), up to what fits in the API server's
// 3 MiB request limit. The adversarial tests, the growth test and the hostile-review benchmark
// all build their bodies here.
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, MIGRATED_ANNOTATION, POD_ANNOTATIONS } from '../../src/policy/index.ts';
import type { AdmissionEndpoint } from '../../src/webhook/routes.ts';
import { podReview } from './reviews.ts';

/** kube-apiserver refuses request bodies larger than this (its --max-request-bytes default is for etcd; the HTTP body limit is 3 MiB). */
export const API_SERVER_REQUEST_LIMIT = 3 * 1024 * 1024;

type Json = Record<string, unknown>;

export interface HostileShape {
  id: string;
  /** What grows, in words, for the printed figures. */
  unit: string;
  /** The endpoints where the shape takes work (every endpoint is still sent it by the growth test). */
  endpoints: readonly AdmissionEndpoint[];
  /** The AdmissionReview with `count` units. */
  review(count: number): Json;
}

const main = { name: 'main', image: 'registry.example.com/batch/worker:1.0' };
const kill = { name: ENV_WHEN_JOB_EXIT, value: 'true' };
const sidecar = (name: string, env: unknown[], extra: Json = {}) => ({ name, image: 'docker.io/envoyproxy/envoy:v1.31.0', env, ...extra });
const repeat = <T>(count: number, make: (index: number) => T): T[] => Array.from({ length: count }, (_, index) => make(index));

function jobReview(spec: Json, operation: 'CREATE' | 'UPDATE', oldSpec?: Json): Json {
  const job = (podSpec: Json) => ({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'hostile', namespace: 'attack' }, spec: { template: { spec: { restartPolicy: 'Never', ...podSpec } } } });
  const review = podReview({}) as { request: Json };
  review.request = { ...review.request, kind: { group: 'batch', version: 'v1', kind: 'Job' }, resource: { group: 'batch', version: 'v1', resource: 'jobs' }, operation, object: job(spec), ...(oldSpec && { oldObject: job(oldSpec) }) };
  return review;
}

const ALL: readonly AdmissionEndpoint[] = ['validate', 'mutate', 'native-sidecars'];

export const HOSTILE_SHAPES: readonly HostileShape[] = [
  {
    id: 'duplicate-markers',
    unit: `identical ${ENV_WHEN_JOB_EXIT} entries in one container`,
    endpoints: ALL,
    review: (count) => podReview({ containers: [main, sidecar('proxy', repeat(count, () => kill))] }),
  },
  {
    id: 'distinct-bad-values',
    unit: 'marker entries with a distinct invalid value each (one error each)',
    endpoints: ALL,
    review: (count) => podReview({ containers: [main, sidecar('proxy', [kill, ...repeat(count, (i) => ({ name: ENV_IGNORE_EXIT_CODE, value: `bad-${i}` }))])] }),
  },
  {
    id: 'many-sidecars',
    unit: 'marked sidecar containers',
    endpoints: ALL,
    review: (count) => podReview({ containers: [main, ...repeat(count, (i) => sidecar(`s${i}`, [kill]))] }),
  },
  {
    id: 'many-bad-containers',
    unit: 'containers with an invalid marker value each',
    endpoints: ALL,
    review: (count) => podReview({ containers: [main, sidecar('proxy', [kill]), ...repeat(count, (i) => sidecar(`b${i}`, [{ name: ENV_WHEN_JOB_EXIT, value: 'yes' }]))] }),
  },
  {
    id: 'many-env',
    unit: 'ordinary env entries in a sidecar',
    endpoints: ALL,
    review: (count) => podReview({ containers: [main, sidecar('proxy', [kill, ...repeat(count, (i) => ({ name: `SETTING_${i}`, value: 'x' }))])] }),
  },
  {
    id: 'named-sidecars',
    unit: 'containers named as sidecars by the pod annotations (no env), each with its own stop annotation',
    endpoints: ALL,
    review: (count) => {
      const names = repeat(count, (i) => `s${i}`);
      return podReview(
        { containers: [main, ...names.map((name) => ({ name, image: 'envoy:1' }))] },
        {
          annotations: {
            [POD_ANNOTATIONS.sidecars]: names.join(','),
            [POD_ANNOTATIONS.ignoreExitCode]: names.join(','),
            ...Object.fromEntries(names.map((name) => [`${POD_ANNOTATIONS.stopPrefix}${name}`, 'signal'])),
          },
        },
      );
    },
  },
  {
    id: 'long-keys',
    unit: 'characters in a stop annotation key and a label key, each invalid',
    endpoints: ALL,
    review: (count) => {
      const half = Math.max(1, Math.floor(count / 2));
      return podReview({ containers: [main, sidecar('proxy', [kill])] }, { labels: { [`example.com/${'l'.repeat(half)}`]: 'v' }, annotations: { [`${POD_ANNOTATIONS.stopPrefix}${'k'.repeat(half)}`]: 'signal' } });
    },
  },
  {
    id: 'many-init-containers',
    unit: 'native sidecars listed as migrated, each with a marker',
    endpoints: ALL,
    review: (count) =>
      podReview(
        { initContainers: repeat(count, (i) => sidecar(`n${i}`, [kill], { restartPolicy: 'Always' })), containers: [main, sidecar('proxy', [kill])] },
        { annotations: { [MIGRATED_ANNOTATION]: repeat(count, (i) => `n${i}`).join(',') } },
      ),
  },
  {
    id: 'lost-native-sidecars',
    unit: 'migrated init containers without restartPolicy (one denial reason each)',
    endpoints: ['validate'],
    review: (count) =>
      podReview(
        { initContainers: repeat(count, (i) => ({ name: `n${i}`, image: 'envoy:1' })), containers: [main] },
        { annotations: { [MIGRATED_ANNOTATION]: repeat(count, (i) => `n${i}`).join(',') } },
      ),
  },
  {
    id: 'many-ephemeral-containers',
    unit: 'ephemeral containers',
    endpoints: ALL,
    review: (count) => podReview({ containers: [main, sidecar('proxy', [kill])], ephemeralContainers: repeat(count, (i) => ({ name: `debug-${i}`, image: 'busybox:1.36', env: [kill] })) }),
  },
  {
    id: 'long-values',
    unit: 'characters in a quick-exit image and a marker value',
    endpoints: ALL,
    review: (count) => {
      const half = Math.max(1, Math.floor(count / 2));
      // An image reference of the allowed characters that fails only at its end: the worst case for its grammar.
      const image = `registry.example.com/${'a-'.repeat(Math.floor(half / 2))}!`;
      return podReview({ containers: [main, sidecar('proxy', [kill, { name: ENV_WITH_IMAGE, value: image }, { name: ENV_IGNORE_EXIT_CODE, value: 'y'.repeat(half) }])] });
    },
  },
  {
    id: 'many-labels-and-annotations',
    unit: 'labels and annotations',
    endpoints: ALL,
    review: (count) => {
      const keys = (prefix: string) => Object.fromEntries(repeat(Math.ceil(count / 2), (i) => [`example.com/${prefix}-${i}`, 'v']));
      return podReview({ containers: [main, sidecar('proxy', [kill])] }, { labels: keys('label'), annotations: keys('note') });
    },
  },
  {
    id: 'many-tolerations',
    unit: 'tolerations and node affinity terms',
    endpoints: ALL,
    review: (count) =>
      podReview({
        containers: [main, sidecar('proxy', [kill])],
        tolerations: repeat(Math.ceil(count / 2), (i) => ({ key: `example.com/t${i}`, operator: 'Exists' })),
        affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: repeat(Math.ceil(count / 2), (i) => ({ matchExpressions: [{ key: `k${i}`, operator: 'In', values: ['v'] }] })) } } },
      }),
  },
  {
    id: 'many-owner-references',
    unit: 'owner references that are not the controller',
    endpoints: ALL,
    review: (count) =>
      podReview(
        { containers: [main, sidecar('proxy', [{ name: ENV_WHEN_JOB_EXIT, value: 'yes' }])] },
        { ownerReferences: repeat(count, (i) => ({ apiVersion: 'v1', kind: 'ConfigMap', name: `c${i}`, uid: `u${i}` })) },
      ),
  },
  {
    id: 'job-update-ratchet',
    unit: 'invalid marker values in a Job template, old and new (UPDATE)',
    endpoints: ['validate'],
    review: (count) => {
      const spec = (suffix: string) => ({ containers: [main, sidecar('proxy', [kill, ...repeat(count, (i) => ({ name: ENV_IGNORE_EXIT_CODE, value: `bad-${i}-${suffix}` }))])] });
      return jobReview(spec('new'), 'UPDATE', spec('old'));
    },
  },
];

/** The shape's review as a JSON body. */
export function hostileBody(shape: HostileShape, count: number): string {
  return JSON.stringify(shape.review(count));
}

/** The largest count whose body stays within `limit` bytes (the API server's 3 MiB by default), found by bisection. */
export function countWithin(shape: HostileShape, limit = API_SERVER_REQUEST_LIMIT): number {
  let low = 1;
  let high = 2;
  while (Buffer.byteLength(hostileBody(shape, high)) <= limit) [low, high] = [high, high * 2];
  while (high - low > Math.max(1, low / 200)) {
    const middle = Math.floor((low + high) / 2);
    if (Buffer.byteLength(hostileBody(shape, middle)) <= limit) low = middle;
    else high = middle;
  }
  return low;
}
