// How each sidecar of a pod ended, read only from what the cluster recorded: the pod's spec and
// status (its sidecars' and its signal containers' states, the SidecarTerminated condition), the
// add-on's events on it, its ContainerRecreateRequest, and the Job it came from. A Job that
// completed proves little: the tests that wait for one also say, with expectStoppedBy, which way
// each sidecar was stopped, so that a stop that fell back to another way fails them.
import type { BatchV1Api, CustomObjectsApi, V1Container, V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { Test } from 'tap';
import { SERVE_FLAGS } from '../../src/config.ts';
import { isApiError } from '../../src/kube/api-errors.ts';
import { CONDITION_REASONS, CRR, EVENT_REASONS, MIGRATED_ANNOTATION, PHASE_SET, TERMINATED_CONDITION, classifyContainers, crrName, podAnnotations, readStopRecord, type StopRecord } from '../../src/policy/index.ts';
import { eventsOf, type Clients } from './stack.ts';
import { waitFor } from './wait.ts';

/**
 * One way a sidecar was acted on, counted where it took effect. Told to stop: `signal` (a signal
 * container ran and sent SIGTERM), `http` (it sent the sidecar's shutdown request, which was
 * answered), `crr` (a ContainerRecreateRequest for it). Ended from outside: `image` (its image
 * replaced in place by a quick-exit image: the kubelet kills the container and runs that image),
 * `phase` (the pod's phase set, so the kubelet kills what still runs). `native`: a native sidecar,
 * which the kubelet stops by itself once the main containers are done. A signal container that
 * never ran, or an image written but not run before the phase was set (the kubelet starts nothing
 * in a pod once its phase is terminal), is no step: it stopped nothing.
 */
export type StopPath = 'signal' | 'http' | 'crr' | 'image' | 'phase' | 'native';

const TOLD: readonly StopPath[] = ['native', 'crr', 'http', 'signal'];

export interface SidecarEnding {
  container: string;
  /** Each way it was acted on: how it was told to stop, then how it was ended from outside (in that order). */
  steps: StopPath[];
  /** Its exit code as the kubelet last reported it; undefined while it runs. */
  exitCode: number | undefined;
  /** Its signal container, when one was added: whether it ran, its exit code and termination message (what it did, line by line). */
  signal?: { name: string; ran: boolean; exitCode: number | undefined; message: string };
  /** Its entry in the ContainerRecreateRequest's status, when there is one (kruise-daemon's progress). */
  crr?: { phase: string | undefined; message: string | undefined };
}

export interface PodEnding {
  pod: string;
  phase: string | undefined;
  sidecars: SidecarEnding[];
  /** The add-on's Warning events on the pod: each one's code (its `action`) and message. */
  warnings: { code: string; message: string }[];
  /** The add-on recorded its SidecarTerminator event (the sidecars were told to stop). */
  stopRequested: boolean;
  /** The stop record the watcher wrote in the pod's SidecarTerminated condition once the pod ended, if it has yet. */
  record?: StopRecord;
}

/** The Job (for the images its sidecars had) and the ContainerRecreateRequest are read where their clients are given. */
export type EndingClients = Pick<Clients, 'core'> & Partial<Pick<Clients, 'batch' | 'custom'>>;

export interface EndingOptions {
  /** Quick-exit images a sidecar of a pod no Job owns may have been given; default serve's --quick-exit-image. */
  quickExitImages?: readonly string[];
}

/** How each sidecar of `pod` ended, as the cluster recorded it now. */
export async function podEnding(clients: EndingClients, pod: V1Pod, options: EndingOptions = {}): Promise<PodEnding> {
  const namespace = pod.metadata!.namespace!;
  const name = pod.metadata!.name!;
  const [named, template, crr] = await Promise.all([eventsOf(clients, namespace, name), jobTemplate(clients.batch, pod), readCrr(clients.custom, pod)]);
  // This pod's, not those of an earlier pod of the same name.
  const events = named.filter((e) => e.involvedObject.uid === undefined || e.involvedObject.uid === pod.metadata?.uid);
  const migrated = new Set((pod.metadata?.annotations?.[MIGRATED_ANNOTATION] ?? '').split(',').filter((each) => each !== ''));
  // Said by the condition the watcher wrote with the phase, or, once the pod has ended, by the stop record that replaced its words.
  const record = readStopRecord(pod);
  const phaseSet =
    (pod.status?.conditions?.some((c) => c.type === TERMINATED_CONDITION && c.reason === CONDITION_REASONS.stopping && c.message?.startsWith(PHASE_SET)) ?? false) ||
    (record?.sidecars.some((sidecar) => sidecar.stoppedBy.includes('phase')) ?? false);
  const quickExitImages = options.quickExitImages ?? [SERVE_FLAGS.quickExitImage.default];
  const statuses = [...(pod.status?.containerStatuses ?? []), ...(pod.status?.initContainerStatuses ?? [])];
  const sidecars: SidecarEnding[] = [];

  for (const role of classifyContainers(pod.spec ?? {}, podAnnotations(pod)).filter((each) => each.role === 'sidecar')) {
    const steps = new Set<StopPath>();
    const status = statuses.find((s) => s.name === role.name);
    const ending: SidecarEnding = { container: role.name, steps: [], exitCode: exitCode(status) };
    const signal = pod.spec?.ephemeralContainers?.find((c) => c.targetContainerName === role.name);
    if (signal) {
      const signalStatus = pod.status?.ephemeralContainerStatuses?.find((s) => s.name === signal.name);
      const message = signalStatus?.state?.terminated?.message ?? '';
      const ran = signalStatus?.state?.running !== undefined || signalStatus?.state?.terminated !== undefined;
      ending.signal = { name: signal.name, ran, exitCode: exitCode(signalStatus), message };
      const asked = signal.args?.some((arg) => arg.startsWith('--url=')) ?? false;
      if (ran) steps.add(asked && !/sending SIGTERM instead/.test(message) ? 'http' : 'signal');
    }
    const crrEntry = crr?.containers.includes(role.name) ? crr : undefined;
    if (crrEntry) {
      steps.add('crr');
      const state = crrEntry.states.find((each) => each.name === role.name);
      ending.crr = { phase: state?.phase, message: state?.message };
    }
    const original = template?.find((c) => c.name === role.name)?.image;
    const replaced = original !== undefined ? role.image !== original : role.image !== undefined && (quickExitImages.includes(role.image) || role.image === role.markers.quickExitImage);
    // The kubelet kills a container whose image changed, then runs the new one (it reports the image
    // it last ran): a replacement ended the sidecar unless the pod's phase was set before it ran.
    if (replaced && (!phaseSet || ranImage(status, role.image))) steps.add('image');
    if (phaseSet) steps.add('phase');
    sidecars.push({ ...ending, steps: order(steps) });
  }
  for (const init of pod.spec?.initContainers ?? []) {
    if (init.restartPolicy !== 'Always' || !migrated.has(init.name)) continue;
    sidecars.push({ container: init.name, steps: ['native'], exitCode: exitCode(statuses.find((s) => s.name === init.name)) });
  }
  return {
    pod: name,
    phase: pod.status?.phase,
    sidecars,
    warnings: events.filter((e) => e.reason === EVENT_REASONS.failed || e.reason === EVENT_REASONS.exitFailedPod).map((e) => ({ code: e.action ?? '', message: e.message ?? '' })),
    stopRequested: events.some((e) => e.reason === EVENT_REASONS.stopping),
    ...(record ? { record } : {}),
  };
}

/** How it was told to stop first, then how it was ended from outside. */
function order(steps: Set<StopPath>): StopPath[] {
  const told = TOLD.filter((step) => steps.has(step));
  return [...told, ...(['image', 'phase'] as const).filter((step) => steps.has(step))];
}

/**
 * Whether the container's last run was of this image: it runs, or ran (a start time), with that
 * image; one waiting to pull it never ran it. The kubelet names `busybox:1.35` in full
 * (`docker.io/library/busybox:1.35`).
 */
function ranImage(status: V1ContainerStatus | undefined, image: string | undefined): boolean {
  const started = status?.state?.running !== undefined || status?.state?.terminated?.startedAt !== undefined;
  const full = (reference: string) => reference.replace(/^docker\.io\//, '').replace(/^library\//, '');
  return started && status?.image !== undefined && image !== undefined && full(status.image) === full(image);
}

function exitCode(status: V1ContainerStatus | undefined): number | undefined {
  return status?.state?.terminated?.exitCode;
}

/** The containers of the Job that owns the pod, as its template has them: the images before any was replaced. */
async function jobTemplate(batch: BatchV1Api | undefined, pod: V1Pod): Promise<V1Container[] | undefined> {
  const owner = pod.metadata?.ownerReferences?.find((each) => each.kind === 'Job' && each.controller);
  if (!batch || !owner) return undefined;
  try {
    return (await batch.readNamespacedJob({ namespace: pod.metadata!.namespace!, name: owner.name })).spec?.template.spec?.containers;
  } catch (error) {
    if (isApiError(error, 404)) return undefined;
    throw error;
  }
}

interface CrrView {
  containers: string[];
  states: { name: string; phase?: string; message?: string }[];
}

/** The pod's ContainerRecreateRequest (named after its uid), in whichever apps.kruise.io version the cluster serves; undefined when there is none. */
async function readCrr(custom: CustomObjectsApi | undefined, pod: V1Pod): Promise<CrrView | undefined> {
  if (!custom) return undefined;
  for (const version of ['v1beta1', 'v1alpha1']) {
    try {
      const object = (await custom.getNamespacedCustomObject({ group: CRR.group, version, plural: CRR.plural, namespace: pod.metadata!.namespace!, name: crrName(pod.metadata!.uid!) })) as {
        spec?: { containers?: { name: string }[] };
        status?: { containerRecreateStates?: { name: string; phase?: string; message?: string }[] };
      };
      return { containers: (object.spec?.containers ?? []).map((c) => c.name), states: object.status?.containerRecreateStates ?? [] };
    } catch (error) {
      // 404: no such request, or this version (or the CRD) is not served.
      if (!isApiError(error, 404)) throw error;
    }
  }
  return undefined;
}


export interface ExpectedEnding extends EndingOptions {
  /** The codes of the Warning events the pod must carry, in any order; default none. */
  warnings?: readonly string[];
}

/**
 * Asserts how each sidecar of the pod ended: the steps for each (a path alone means exactly that
 * one step), the add-on's warnings (none unless named), a SidecarTerminator event where the add-on
 * acted, and that each signal container that ran succeeded (0, or 137 when the
 * sidecar's exit ended their shared PID namespace first) unless a warning is expected. Returns
 * what it read, for the test's own checks.
 */
export async function expectStoppedBy(
  t: Test,
  clients: EndingClients,
  pod: V1Pod,
  expected: Record<string, StopPath | readonly StopPath[]>,
  options: ExpectedEnding = {},
): Promise<PodEnding> {
  const ending = await podEnding(clients, pod, options);
  const found = Object.fromEntries(ending.sidecars.map((sidecar) => [sidecar.container, sidecar.steps]));
  const wanted = Object.fromEntries(Object.entries(expected).map(([name, steps]) => [name, typeof steps === 'string' ? [steps] : [...steps]]));
  t.same(found, wanted, `pod ${ending.pod}: how each sidecar was stopped`);
  t.same(ending.warnings.map((w) => w.code).sort(), [...(options.warnings ?? [])].sort(), `pod ${ending.pod}: the add-on's warnings${ending.warnings.length > 0 ? ` (${ending.warnings.map((w) => `${w.code}: ${w.message}`).join('; ')})` : ''}`);
  const told = ending.sidecars.some((sidecar) => sidecar.steps.some((step) => step !== 'native'));
  if (told) t.ok(ending.stopRequested, `pod ${ending.pod}: the SidecarTerminator event`);
  if (ending.record) {
    // Written by the watcher once the pod ended: it must say what the cluster's own objects say.
    const recorded = Object.fromEntries(ending.record.sidecars.map((sidecar) => [sidecar.name, sidecar.stoppedBy]));
    const observed = Object.fromEntries(ending.sidecars.filter((sidecar) => !sidecar.steps.includes('native')).map((sidecar) => [sidecar.container, sidecar.steps]));
    t.same(recorded, observed, `pod ${ending.pod}: the stop record says how each sidecar was stopped`);
  }
  if (!options.warnings?.length) {
    for (const { container, signal } of ending.sidecars) {
      if (signal?.ran) t.ok(signal.exitCode === 0 || signal.exitCode === 137, `pod ${ending.pod}: ${signal.name} stopped ${container} (exit code ${signal.exitCode}${signal.message ? `: ${signal.message.trim()}` : ''})`);
    }
  }
  return ending;
}

/** The pods of a Job, once each has ended (Succeeded or Failed): what expectStoppedBy reads. */
export async function endedPodsOfJob(clients: Pick<Clients, 'core'>, namespace: string, job: string): Promise<V1Pod[]> {
  return waitFor(`the pods of Job ${job} to end`, async () => {
    const pods = (await clients.core.listNamespacedPod({ namespace, labelSelector: `job-name=${job}` })).items;
    return pods.length > 0 && pods.every((pod) => pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') && pods;
  });
}

/** expectStoppedBy for every pod of a Job, once they have ended; returns what it read of each. */
export async function expectJobStoppedBy(
  t: Test,
  clients: EndingClients,
  namespace: string,
  job: string,
  expected: Record<string, StopPath | readonly StopPath[]>,
  options: ExpectedEnding = {},
): Promise<PodEnding[]> {
  const endings: PodEnding[] = [];
  for (const pod of await endedPodsOfJob(clients, namespace, job)) endings.push(await expectStoppedBy(t, clients, pod, expected, options));
  return endings;
}

/**
 * The stop record of the Job's pod (its only pod), once the watcher has written it: the pod ended,
 * then the watcher read it once more (in the background, seconds later).
 */
export async function stopRecordOfJob(clients: EndingClients, namespace: string, job: string): Promise<StopRecord> {
  return waitFor(`the stop record of Job ${namespace}/${job}'s pod`, async () => {
    const [pod] = await endedPodsOfJob(clients, namespace, job);
    return pod && readStopRecord(pod);
  }, { timeoutMs: 60_000 });
}
