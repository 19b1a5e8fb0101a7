// Pods, as the API server returns them, for the watcher's unit tests: containers marked as Kruise
// sidecars, and container states written the way the kubelet writes them.
import type { V1Container, V1ContainerStatus, V1Node, V1Pod } from '@kubernetes/client-node';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE } from '../../src/policy/index.ts';

export const QUICK_EXIT = 'registry.example.com/quick-exit:1.0';

export const main = (name = 'main'): V1Container => ({ name, image: 'busybox:1.36' });
export const killSidecar = (name = 'proxy', extra: Partial<V1Container> = {}): V1Container => ({
  name,
  image: 'envoyproxy/envoy:v1.31.0',
  env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }],
  ...extra,
});
export const ignoreExitCodeSidecar = (name = 'sql'): V1Container => ({
  ...killSidecar(name),
  env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, { name: ENV_IGNORE_EXIT_CODE, value: 'true' }],
});
export const imageSidecar = (name = 'logs', image = 'fluent/fluent-bit:3.1'): V1Container => ({ name, image, env: [{ name: ENV_WITH_IMAGE, value: QUICK_EXIT }] });

export type State = number | 'running' | { waiting: string; message?: string };

const FINISHED = '2026-01-01T00:01:00Z';

export function status(name: string, state: State, extra: Partial<V1ContainerStatus> = {}): V1ContainerStatus {
  const common = { name, image: '', imageID: '', ready: state === 'running', restartCount: 0 };
  if (state === 'running') return { ...common, state: { running: { startedAt: new Date('2026-01-01T00:00:00Z') } }, ...extra };
  if (typeof state === 'number') return { ...common, state: { terminated: { exitCode: state, finishedAt: new Date(FINISHED) } }, ...extra };
  return { ...common, state: { waiting: { reason: state.waiting, message: state.message } }, ...extra };
}

/** A running Job pod with these containers in these states (by name; no entry: no status yet). */
export function jobPod(containers: V1Container[], states: Record<string, State>, spec: Partial<NonNullable<V1Pod['spec']>> = {}, phase = 'Running'): V1Pod {
  return {
    metadata: { name: 'job-abc', namespace: 'default', uid: 'uid-1', resourceVersion: '100', labels: { 'sidecar-terminator.io/managed': 'true' } },
    spec: { restartPolicy: 'Never', nodeName: 'node-a', containers, ...spec },
    status: { phase, containerStatuses: Object.entries(states).map(([name, state]) => status(name, state)) },
  };
}

export const normalNode: V1Node = { metadata: { name: 'node-a' } };
export const virtualNode: V1Node = { metadata: { name: 'vk', labels: { type: 'virtual-kubelet' } } };

/** When the main containers of jobPod finished, in epoch milliseconds. */
export const MAINS_FINISHED_AT = Date.parse(FINISHED);
