// The pods of the watcher benchmark.
//
// Managed pods: what the webhook admits for a Job whose pod runs a sidecar: restartPolicy
// Never, the managed label, a main container and a sidecar marked
// KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true, env and resources as a real Job would have. They
// are created directly (no Job controller, no webhook): 2,000 Jobs and their controller would
// double the API server's work on two cores for nothing the watcher sees, and the webhook is
// measured by bench/webhook. No ownerReferences: the garbage collector deletes pods whose
// owner does not exist.
//
// Unmanaged pods: the rest of a cluster, mostly Deployment-style pods (restartPolicy Always)
// and one in five a Job pod without sidecar, 1-3 containers with 10-25 env vars each. They are
// bound to the simulated node at creation (spec.nodeName) and their status is written by the
// bench driver (Running, ready, container statuses as kubelet writes them), not by the kubelet
// simulator, which would need a read and a write per pod and a watch over 20,000 of them.
import type { V1Pod } from '@kubernetes/client-node';
import { ENV_WHEN_JOB_EXIT, MANAGED, MANAGED_LABEL } from '../../src/policy/index.ts';

export const NODE = 'sim-node';

function env(prefix: string, count: number, seed: number): Array<{ name: string; value: string }> {
  return Array.from({ length: count }, (_, i) => ({
    name: `${prefix}_SETTING_${i}`,
    value: `value-${((seed * 7919 + i * 104729) % 1_000_003).toString(36)}-${i % 3 === 0 ? 'https://service.internal.example.com:8443/api/v2' : 'on'}`,
  }));
}

export function managedPod(name: string, seq: number): V1Pod {
  return {
    metadata: {
      name,
      labels: { [MANAGED_LABEL]: MANAGED, 'job-name': `job-${seq}`, 'batch.kubernetes.io/job-name': `job-${seq}`, app: 'bench-job' },
    },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 5,
      containers: [
        {
          name: 'main',
          image: 'registry.example.com/etl/extract:4.12.0',
          command: ['/app/run', '--input=s3://bucket/in', '--output=s3://bucket/out'],
          env: env('APP', 15, seq),
          resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '256Mi' } },
        },
        {
          name: 'proxy',
          image: 'docker.io/istio/proxyv2:1.23.2',
          args: ['proxy', 'sidecar'],
          env: [...env('PROXY', 10, seq), { name: ENV_WHEN_JOB_EXIT, value: 'true' }],
          ports: [{ name: 'metrics', containerPort: 15090, protocol: 'TCP' }],
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '128Mi' } },
        },
      ],
    },
  };
}

export function unmanagedPod(name: string, seq: number): V1Pod {
  const isJob = seq % 5 === 4;
  const app = `app-${seq % 97}`;
  const containers = 1 + (seq % 3);
  return {
    metadata: {
      name,
      labels: isJob ? { 'job-name': `${app}-job`, app } : { app, 'pod-template-hash': `7d9f${(seq % 97).toString(16)}c5b`, tier: 'backend' },
      annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9090' },
    },
    spec: {
      nodeName: NODE,
      restartPolicy: isJob ? 'Never' : 'Always',
      containers: Array.from({ length: containers }, (_, i) => ({
        name: i === 0 ? 'app' : `helper-${i}`,
        image: `registry.example.com/${app}:1.${seq % 13}.${i}`,
        env: env(`C${i}`, 10 + ((seq + i * 7) % 16), seq + i),
        ports: [{ name: 'http', containerPort: 8080 + i, protocol: 'TCP' }],
        resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
        readinessProbe: isJob ? undefined : { httpGet: { path: '/ready', port: 8080 + i }, periodSeconds: 10 },
        volumeMounts: [{ name: 'cache', mountPath: '/cache' }],
      })),
      volumes: [{ name: 'cache', emptyDir: {} }],
    },
  };
}

/** The status kubelet would write for a running pod (RFC 3339 times, as kubelet sends them). */
export function runningStatus(pod: V1Pod, index: number): Record<string, unknown> {
  const time = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const ip = `10.${(index >> 16) & 255}.${(index >> 8) & 255}.${index & 255}`;
  const condition = (type: string) => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: time });
  return {
    phase: 'Running',
    conditions: ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map(condition),
    hostIP: '127.0.0.1',
    hostIPs: [{ ip: '127.0.0.1' }],
    podIP: ip,
    podIPs: [{ ip }],
    startTime: time,
    containerStatuses: (pod.spec?.containers ?? []).map((container, i) => ({
      name: container.name,
      state: { running: { startedAt: time } },
      lastState: {},
      ready: true,
      restartCount: 0,
      image: container.image,
      imageID: `${container.image}@sha256:${(index * 31 + i).toString(16).padStart(64, '0')}`,
      containerID: `containerd://${(index * 131 + i).toString(16).padStart(64, 'a')}`,
      started: true,
    })),
    qosClass: 'Burstable',
  };
}
