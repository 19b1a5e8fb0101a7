// Small builders for pod specs, pods and nodes used by the policy tests.
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE } from '../../src/policy/index.ts';

export interface TestContainer {
  name: string;
  image: string;
  command?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: unknown }>;
  restartPolicy?: string;
}

export const main = (name = 'main', image = 'busybox:1.36'): TestContainer => ({ name, image });

/** A sidecar stopped by the kill mechanism. */
export const killSidecar = (name = 'proxy', extraEnv: TestContainer['env'] = []): TestContainer => ({
  name,
  image: 'envoyproxy/envoy:v1.31.0',
  env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, ...extraEnv],
});

/** A sidecar stopped by replacing its image. */
export const imageSidecar = (name = 'logs', quickExit = 'registry.example.com/quick-exit:1.0'): TestContainer => ({
  name,
  image: 'fluent/fluent-bit:3.1',
  env: [{ name: ENV_WITH_IMAGE, value: quickExit }],
});

export const ignoreExitCodeSidecar = (name = 'sql-proxy'): TestContainer =>
  killSidecar(name, [{ name: ENV_IGNORE_EXIT_CODE, value: 'true' }]);

export interface ContainerOutcome {
  /** Exit code when terminated; 'running' or 'waiting' otherwise; absent status when missing. */
  [container: string]: number | 'running' | 'waiting';
}

export function podSpec(containers: TestContainer[], restartPolicy = 'Never', extra: Record<string, unknown> = {}) {
  return { restartPolicy, containers, ...extra };
}

export function pod(
  containers: TestContainer[],
  outcome: ContainerOutcome,
  options: { restartPolicy?: string; phase?: string; deleting?: boolean; spec?: Record<string, unknown> } = {},
) {
  const containerStatuses = Object.entries(outcome).map(([name, state]) => ({
    name,
    restartCount: 0,
    state:
      state === 'running'
        ? { running: { startedAt: '2026-01-01T00:00:00Z' } }
        : state === 'waiting'
          ? { waiting: { reason: 'ContainerCreating' } }
          : { terminated: { exitCode: state, finishedAt: '2026-01-01T00:01:00Z' } },
  }));
  return {
    metadata: { name: 'job-abc', namespace: 'default', ...(options.deleting ? { deletionTimestamp: '2026-01-01T00:02:00Z' } : {}) },
    spec: podSpec(containers, options.restartPolicy ?? 'Never', options.spec),
    status: { phase: options.phase ?? 'Running', containerStatuses },
  };
}

export const normalNode = { metadata: { name: 'node-1', labels: { 'kubernetes.io/hostname': 'node-1' } }, spec: {} };
export const virtualNodeByLabel = { metadata: { name: 'vk-1', labels: { type: 'virtual-kubelet' } }, spec: {} };
export const virtualNodeByTaint = {
  metadata: { name: 'vk-2', labels: {} },
  spec: { taints: [{ key: 'virtual-kubelet.io/provider', value: 'eci', effect: 'NoSchedule' }] },
};
