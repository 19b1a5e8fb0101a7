// The whole system for end-to-end tests: a real control plane, the kubelet simulator, and
// `sidecar-terminator serve` (webhook and watcher) registered with the API server, as an
// operator would run it. Plus the few helpers the watcher tests share.
import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, BatchV1Api, CoreV1Api, type CoreV1Event, type V1Pod } from '@kubernetes/client-node';
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, EVENT_REASONS, MANAGED, MANAGED_LABEL } from '../../src/policy/index.ts';
import { startControlPlane, type ControlPlane, type ControlPlaneOptions } from './control-plane.ts';
import { CRR, KubeletSimulator, waitFor, type KubeletSimulatorOptions } from './kubelet-simulator.ts';
import { registeringWebhooks, startServe, type ServeProcess } from './serve-process.ts';

/** The API clients the tests use. */
export interface Clients {
  core: CoreV1Api;
  batch: BatchV1Api;
}

/** A real control plane and the kubelet simulator, with the API clients the tests use. */
export interface Cluster extends Clients {
  cp: ControlPlane;
  sim: KubeletSimulator;
}

export interface Stack extends Cluster {
  serve: ServeProcess;
  /** Starts serve again with the same flags (after it was stopped or killed). */
  restartServe(): Promise<ServeProcess>;
  stop(): Promise<void>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

interface ClusterOptions {
  sim?: KubeletSimulatorOptions;
  installCrrCrd?: boolean;
  controlPlane?: ControlPlaneOptions;
}

/** Starts a cluster; both parts stop at `t`'s teardown. */
export async function startCluster(t: Teardown, options: ClusterOptions = {}): Promise<Cluster> {
  const cp = await startControlPlane(options.controlPlane);
  t.teardown(() => cp.stop());
  if (options.installCrrCrd) await installCrrCrd(cp);
  const sim = new KubeletSimulator(cp.kubeConfig, options.sim);
  await sim.start();
  t.teardown(() => sim.stop());
  return { cp, sim, core: cp.kubeConfig.makeApiClient(CoreV1Api), batch: cp.kubeConfig.makeApiClient(BatchV1Api) };
}

export async function startStack(t: Teardown, options: ClusterOptions & { serveArgs?: string[] } = {}): Promise<Stack> {
  const cluster = await startCluster(t, options);
  const { cp, sim } = cluster;
  const certDir = await mkdtemp(join(tmpdir(), 'st-e2e-certs-'));
  t.teardown(() => rm(certDir, { recursive: true, force: true }));
  const start = () =>
    startServe((port) => [
      '--kubeconfig', cp.kubeconfigPath,
      '--cert-dir', certDir,
      ...registeringWebhooks(port, 'Fail'),
      ...(options.serveArgs ?? []),
    ]);
  const stack: Stack = {
    ...cluster,
    serve: await start(),
    async restartServe() {
      stack.serve = await start();
      return stack.serve;
    },
    async stop() {
      await stack.serve.stop();
      await sim.stop();
      await cp.stop();
    },
  };
  t.teardown(() => stack.serve.stop());
  return stack;
}

export async function installCrrCrd(cp: ControlPlane): Promise<void> {
  const applied = await cp.kubectl(['apply', '-f', '-'], { input: readFileSync(new URL('../fixtures/kruise-crr-crd.yaml', import.meta.url), 'utf8') });
  if (applied.code !== 0) throw new Error(`installing the CRR CRD failed: ${applied.stderr}`);
  const extensions = cp.kubeConfig.makeApiClient(ApiextensionsV1Api);
  await waitFor('the CRR CRD to be established', async () => {
    const crd = await extensions.readCustomResourceDefinition({ name: `${CRR.plural}.${CRR.group}` });
    return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
  });
}

/** `kubectl apply -f -` as a user would; fails loudly with kubectl's stderr. */
export async function apply(cp: ControlPlane, namespace: string, yaml: string): Promise<string> {
  const result = await cp.kubectl(['apply', '-f', '-'], { namespace, input: yaml });
  if (result.code !== 0) throw new Error(`kubectl apply failed: ${result.stderr}`);
  return result.stderr;
}

export async function waitForJob(stack: Clients, namespace: string, name: string, condition: 'Complete' | 'Failed', timeoutMs = 90_000) {
  return waitFor(
    `Job ${namespace}/${name} to be ${condition}`,
    async () => {
      const job = await stack.batch.readNamespacedJob({ name, namespace });
      return job.status?.conditions?.some((c) => c.type === condition && c.status === 'True') && job;
    },
    { timeoutMs },
  );
}

/** Waits for `count` complete Jobs in the namespace, commenting `progress()` (with the count) whenever it changes. */
export async function waitForJobsComplete(t: { comment(message: string): void }, stack: Clients, namespace: string, count: number, progress: () => Promise<string>, timeoutMs = 360_000) {
  let last = '';
  await waitFor(
    `all ${count} Jobs to complete`,
    async () => {
      const jobs = await stack.batch.listNamespacedJob({ namespace });
      const complete = jobs.items.filter((job) => job.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True')).length;
      const status = `${complete} complete, ${await progress()}`;
      if (status !== last) t.comment((last = status));
      return complete === count;
    },
    { timeoutMs, intervalMs: 1000 },
  );
}

export async function podsOfJob(stack: Clients, namespace: string, job: string): Promise<V1Pod[]> {
  return (await stack.core.listNamespacedPod({ namespace, labelSelector: `job-name=${job}` })).items;
}

export async function podOfJob(stack: Clients, namespace: string, job: string): Promise<V1Pod> {
  return waitFor(`a pod of Job ${job}`, async () => (await podsOfJob(stack, namespace, job))[0]);
}

export async function eventsOf(stack: Pick<Clients, 'core'>, namespace: string, pod: string): Promise<CoreV1Event[]> {
  const events = await stack.core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${pod}` });
  return events.items.filter((e) => e.source?.component === 'sidecar-terminator');
}

/**
 * The first of the pods the watcher is finished with: labelled managed, ended (the watcher's watch
 * leaves a pod in a terminal phase out), with the watcher's SidecarTerminator event.
 */
export async function finishedByWatcher(stack: Pick<Clients, 'core'>, pods: V1Pod[]): Promise<V1Pod | undefined> {
  for (const pod of pods) {
    if (pod.metadata?.labels?.[MANAGED_LABEL] !== MANAGED || (pod.status?.phase !== 'Succeeded' && pod.status?.phase !== 'Failed')) continue;
    const events = await eventsOf(stack, pod.metadata.namespace!, pod.metadata.name!);
    if (events.some((event) => event.reason === EVENT_REASONS.stopping)) return pod;
  }
  return undefined;
}

/** YAML for a Job's container list: `main`, then one sidecar stopped by kill (KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT) per name. */
export function mainAndKillSidecars(...sidecars: string[]): string {
  const sidecar = (name: string) => `        - name: ${name}
          image: envoyproxy/envoy:v1.31.0
          env:
            - name: ${ENV_WHEN_JOB_EXIT}
              value: "true"`;
  return [`        - name: main\n          image: busybox:1.36`, ...sidecars.map(sidecar)].join('\n');
}

/** A Job manifest: `containers` is YAML for the container list, indented by the caller's template. */
export function jobYaml(name: string, options: { restartPolicy?: 'Never' | 'OnFailure'; annotations?: Record<string, string>; containers: string; spec?: string }): string {
  const annotations = Object.entries(options.annotations ?? {})
    .map(([key, value]) => `\n        ${key}: ${JSON.stringify(value)}`)
    .join('');
  return `apiVersion: batch/v1
kind: Job
metadata:
  name: ${name}
spec:
  backoffLimit: ${options.restartPolicy === 'OnFailure' ? 3 : 0}
  template:
    metadata:
      annotations:${annotations || ' {}'}
    spec:
      restartPolicy: ${options.restartPolicy ?? 'Never'}${options.spec ?? ''}
      containers:
${options.containers}`;
}

export type EnvVars = ReadonlyArray<readonly [name: string, yamlValue: string]>;

/** One container, indented for jobYaml's `containers`; each env value is written as the YAML given (quote it when it needs quotes). */
export function containerYaml(name: string, image: string, env: EnvVars = [], args: readonly string[] = []): string {
  const lines = [`        - name: ${name}`, `          image: ${image}`];
  if (args.length > 0) lines.push(`          args: ${JSON.stringify(args)}`);
  if (env.length > 0) lines.push('          env:', ...env.flatMap(([key, value]) => [`            - name: ${key}`, `              value: ${value}`]));
  return lines.join('\n');
}

/** The main container `main`. */
export const mainContainer = (env: EnvVars = []): string => containerYaml('main', 'busybox:1.36', env);

/** The sidecar `proxy`, stopped by the kill mechanism: ..._WHEN_JOB_EXIT set to `value`, after `env`. */
export const killSidecar = (value = '"true"', env: EnvVars = []): string => containerYaml('proxy', 'envoyproxy/envoy:v1.31.0', [...env, [ENV_WHEN_JOB_EXIT, value]]);

/** The sidecar `logs`, stopped by its quick-exit image(s): one ..._WITH_IMAGE per image, after `env`. */
export const imageSidecar = (images: readonly string[] = ['registry.example.com/quick-exit:1.0'], env: EnvVars = []): string =>
  containerYaml('logs', 'fluent/fluent-bit:3.1', [...env, ...images.map((image) => [ENV_WITH_IMAGE, `"${image}"`] as const)]);

/** One ephemeral container for the one kill sidecar (`proxy`) and one SidecarTerminator event, on every pod of the namespace. */
export async function actedOnceEach(t: { same(found: unknown, wanted: unknown, message: string): unknown }, stack: Pick<Clients, 'core'>, namespace: string): Promise<V1Pod[]> {
  const pods = (await stack.core.listNamespacedPod({ namespace })).items;
  t.same(
    pods.filter((pod) => JSON.stringify(pod.spec?.ephemeralContainers?.map((c) => c.targetContainerName)) !== '["proxy"]').map((pod) => pod.metadata?.name),
    [],
    `exactly one ephemeral container on each of the ${pods.length} pods`,
  );
  const events = (await stack.core.listNamespacedEvent({ namespace })).items.filter((e) => e.source?.component === 'sidecar-terminator' && e.reason === EVENT_REASONS.stopping);
  t.same(
    pods.map((pod) => pod.metadata!.name!).filter((name) => events.filter((e) => e.involvedObject.name === name).reduce((sum, e) => sum + (e.count ?? 1), 0) !== 1),
    [],
    'exactly one SidecarTerminator event per pod',
  );
  return pods;
}
