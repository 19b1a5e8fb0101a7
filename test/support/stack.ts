// The whole system for end-to-end tests: a real control plane, the kubelet simulator, and
// `sidecar-terminator serve` (webhook and watcher) registered with the API server, as an
// operator would run it. Plus the few helpers the end-to-end tests share.
import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, BatchV1Api, CoreV1Api, CustomObjectsApi, type CoreV1Event, type KubeConfig, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { COMPONENT, EVENT_REASONS, MANAGED, MANAGED_LABEL, MIGRATED_ANNOTATION } from '../../src/policy/index.ts';
import { startControlPlane, type ControlPlane, type ControlPlaneOptions, type KubectlResult } from './control-plane.ts';
import { CRR, KubeletSimulator, type KubeletSimulatorOptions } from './kubelet-simulator.ts';
import type { CommandResult } from './command.ts';
import { waitFor } from './wait.ts';
import { jobYaml, killSidecar, main, podYaml, sidecarMarked } from './pods.ts';
import { registeringWebhooks, startServe, type ServeProcess } from './serve-process.ts';

/** The API clients the tests use. */
export interface Clients {
  core: CoreV1Api;
  batch: BatchV1Api;
  /** For ContainerRecreateRequests. */
  custom: CustomObjectsApi;
}

/** The tests' API clients of a cluster. */
export function apiClients(kubeConfig: KubeConfig): Clients {
  return { core: kubeConfig.makeApiClient(CoreV1Api), batch: kubeConfig.makeApiClient(BatchV1Api), custom: kubeConfig.makeApiClient(CustomObjectsApi) };
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
  return { cp, sim, ...apiClients(cp.kubeConfig) };
}

/**
 * A starter of serve on `cp`, registered with failurePolicy Fail. Each serve it starts stops at
 * `t`'s teardown and, unless `webhooksInEffect` is false (a serve that refuses the probes' pod), is
 * returned once the API server calls its webhooks: probed in a namespace of the starter's own, as a
 * test's --namespace or exclusions leave it served.
 */
export async function serveStarter(t: Teardown, cp: ControlPlane, serveArgs: string[] = [], webhooksInEffect = true): Promise<() => Promise<ServeProcess>> {
  const certDir = await mkdtemp(join(tmpdir(), 'st-e2e-certs-'));
  t.teardown(() => rm(certDir, { recursive: true, force: true }));
  const probes = webhooksInEffect ? await cp.createNamespace() : '';
  return async () => {
    const serve = await startServe((port) => [
      '--kubeconfig', cp.kubeconfigPath,
      '--cert-dir', certDir,
      ...registeringWebhooks(port, 'Fail'),
      ...serveArgs,
    ]);
    t.teardown(() => serve.stop());
    if (probes) await waitForWebhooksInEffect(cp, probes, `webhooks at ${serve.url}`);
    return serve;
  };
}

/** A cluster and serve registered with it, its webhooks in effect (see serveStarter). */
export async function startStack(t: Teardown, options: ClusterOptions & { serveArgs?: string[]; webhooksInEffect?: boolean } = {}): Promise<Stack> {
  const cluster = await startCluster(t, options);
  const { cp, sim } = cluster;
  const start = await serveStarter(t, cp, options.serveArgs, options.webhooksInEffect);
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

/** `kubectl apply -f -` as a user would, its exit code and output returned: for applies that may be denied. */
export function tryApply(cp: ControlPlane, namespace: string, yaml: string): Promise<CommandResult> {
  return cp.kubectl(['apply', '-f', '-'], { namespace, input: yaml });
}

/** `kubectl apply -f -` as a user would; fails loudly with kubectl's stderr. */
export async function apply(cp: ControlPlane, namespace: string, yaml: string): Promise<string> {
  const result = await tryApply(cp, namespace, yaml);
  if (result.code !== 0) throw new Error(`kubectl apply failed: ${result.stderr}`);
  return result.stderr;
}

/** Whether the Job controller has given the Job this condition (it ends there: Complete or Failed). */
const hasCondition = (job: V1Job, condition: 'Complete' | 'Failed') => job.status?.conditions?.some((c) => c.type === condition && c.status === 'True') ?? false;

/** Waits for one Job to be Complete or Failed and returns it as it was then. */
export async function waitForJob(stack: Pick<Clients, 'core' | 'batch'>, namespace: string, name: string, condition: 'Complete' | 'Failed', timeoutMs = 90_000) {
  return waitFor(
    `Job ${namespace}/${name} to be ${condition}`,
    async () => {
      const job = await stack.batch.readNamespacedJob({ name, namespace });
      return hasCondition(job, condition) && job;
    },
    { timeoutMs },
  );
}

/**
 * Waits for many Jobs of the namespace to complete, with one list a second however many they are
 * (waitForJob for each would read each five times a second): `jobs` of them when a number, or
 * the Jobs of these names (others of the namespace not counted). With `progress`, comments it
 * (with the count) whenever it changes.
 */
export async function waitForJobsComplete(
  t: { comment(message: string): void },
  stack: Pick<Clients, 'core' | 'batch'>,
  namespace: string,
  jobs: number | readonly string[],
  progress?: () => Promise<string>,
  timeoutMs = 360_000,
) {
  const count = typeof jobs === 'number' ? jobs : jobs.length;
  const counted = (job: V1Job) => typeof jobs === 'number' || jobs.includes(job.metadata?.name ?? '');
  let last = '';
  await waitFor(
    typeof jobs === 'number' ? `all ${count} Jobs to complete` : `${count} Jobs in ${namespace} to complete`,
    async () => {
      const listed = await stack.batch.listNamespacedJob({ namespace });
      const complete = listed.items.filter((job) => counted(job) && hasCondition(job, 'Complete')).length;
      const status = progress && `${complete} complete, ${await progress()}`;
      if (status !== undefined && status !== last) t.comment((last = status));
      return complete === count;
    },
    { timeoutMs, intervalMs: 1000 },
  );
}

export async function podsOfJob(stack: Pick<Clients, 'core'>, namespace: string, job: string): Promise<V1Pod[]> {
  return (await stack.core.listNamespacedPod({ namespace, labelSelector: `job-name=${job}` })).items;
}

export async function podOfJob(stack: Pick<Clients, 'core'>, namespace: string, job: string): Promise<V1Pod> {
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

/**
 * The API server picks up a new or changed webhook configuration a moment after it is written
 * (through its own informer), so `serve` being ready does not yet mean the API server calls it.
 * Server-side dry runs show when it does: a Job with a configuration error is denied, a good pod
 * comes back labelled. The stacks wait for it whenever they start serve, so that a test's first
 * `kubectl apply` is admitted by the webhooks, not before them or by a serve stopped since.
 */
export async function waitForWebhooksInEffect(cp: ControlPlane, namespace: string, which = 'webhooks'): Promise<void> {
  const badJob = jobYaml('dry-run-bad', { containers: [main(), sidecarMarked('yes')] });
  await waitFor(`the validating ${which} to be called`, async () => (await serverDryRun(cp, namespace, badJob)).stderr.includes('denied the request'), { intervalMs: 250 });
  await waitFor(`the mutating ${which} to be called`, async () => (await dryRunMarkedPod(cp, namespace)).labelled, { intervalMs: 250 });
}

const serverDryRun = (cp: Pick<ControlPlane, 'kubectl'>, namespace: string, yaml: string) => cp.kubectl(['apply', '--dry-run=server', '-o', 'json', '-f', '-'], { namespace, input: yaml });

/**
 * A server-side dry run of a pod with a kill sidecar, `proxy`: kubectl's result, the pod as admitted,
 * and whether the mutating webhook labelled it.
 */
export async function dryRunMarkedPod(cp: Pick<ControlPlane, 'kubectl'>, namespace: string): Promise<{ result: KubectlResult; pod?: V1Pod; labelled: boolean }> {
  const result = await serverDryRun(cp, namespace, podYaml('dry-run-good', [main(), killSidecar()]));
  const pod = result.code === 0 ? (JSON.parse(result.stdout) as V1Pod) : undefined;
  return { result, ...(pod ? { pod } : {}), labelled: pod?.metadata?.labels?.[MANAGED_LABEL] === MANAGED };
}

/**
 * The native-sidecars webhook, where serve runs with --native-sidecars, is registered with the
 * others and so is called a moment after serve is ready too. A server-side dry run of a pod with
 * a kill sidecar, `proxy`, in a namespace it serves (labelled
 * sidecar-terminator.io/native-sidecars=enabled), shows when: the pod comes back annotated as
 * migrated. Returns that annotation (the sidecars moved) for the test to check.
 */
export async function waitForNativeSidecarsInEffect(cp: ControlPlane, namespace: string): Promise<string> {
  return waitFor('the API server to call the native-sidecars webhook', async () => (await dryRunMarkedPod(cp, namespace)).pod?.metadata?.annotations?.[MIGRATED_ANNOTATION]);
}

/** One ephemeral container for the one kill sidecar (`proxy`) and one SidecarTerminator event, on every pod of the namespace. */
export async function actedOnceEach(t: { same(found: unknown, wanted: unknown, message: string): unknown }, stack: Pick<Clients, 'core'>, namespace: string): Promise<V1Pod[]> {
  const pods = (await stack.core.listNamespacedPod({ namespace })).items;
  t.same(
    pods.filter((pod) => JSON.stringify(pod.spec?.ephemeralContainers?.map((c) => c.targetContainerName)) !== '["proxy"]').map((pod) => pod.metadata?.name),
    [],
    `exactly one ephemeral container on each of the ${pods.length} pods`,
  );
  const events = (await stack.core.listNamespacedEvent({ namespace })).items.filter((e) => e.source?.component === COMPONENT && e.reason === EVENT_REASONS.stopping);
  t.same(
    pods.map((pod) => pod.metadata!.name!).filter((name) => events.filter((e) => e.involvedObject.name === name).reduce((sum, e) => sum + (e.count ?? 1), 0) !== 1),
    [],
    'exactly one SidecarTerminator event per pod',
  );
  return pods;
}
