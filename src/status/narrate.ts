// The words of a managed pod's situation: what is awaited now, and what the user can do.
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { ENV_WITH_IMAGE, CODES, describeStop, explainRestart, isImagePullFailure, restartOfContainerAt, type Code, type ContainerRole, type Decision, type IgnoreCode } from '../policy/index.ts';
import { containerStatus } from './containers.ts';
import type { Situation } from './situation.ts';
import type { CrrView, PodReading, PodStory, StopMeans } from './story-types.ts';

export interface Narration {
  waitingFor?: string;
  advice: string[];
}

/** The pod's names and trigger rule, as the story already tells them. */
type Told = Pick<PodStory, 'namespace' | 'pod' | 'job' | 'trigger'>;

export function narrate(situation: Situation, reading: PodReading, told: Told): Narration {
  switch (situation.kind) {
    case 'stopped':
      return { advice: situation.failedBy ? [`The pod failed by a stopped sidecar's exit code: ${situation.failedBy.message ?? ''}`] : [] };
    case 'ignored':
      return { waitingFor: `nothing: the watcher ignores this pod (${CODES[situation.code].meaning})`, advice: ignoredAdvice(situation.code) };
    case 'waiting for main':
      return { waitingFor: mainWait(reading, situation.decision), advice: [mainWaitAdvice(reading, told)] };
    case 'cannot stop':
      return { waitingFor: `nothing: ${situation.containers.map((name) => `sidecar ${name} cannot be stopped on this node`).join('; ')}`, advice: stoppingAdvice(reading, told, situation.warning, true) };
    case 'warned':
      return { waitingFor: `the watcher, after it reported a problem: ${situation.event.message}`, advice: stoppingAdvice(reading, told, situation.code, false) };
    case 'ending from outside':
      return { waitingFor: `the kubelet to end the sidecar from outside: ${situation.event.message}`, advice: stoppingAdvice(reading, told, situation.code, false) };
    case 'stopping':
      return { waitingFor: sidecarsWait(reading), advice: stoppingAdvice(reading, told, undefined, false) };
  }
}

function ignoredAdvice(code: IgnoreCode): string[] {
  if (code === 'restart-policy-always') return ['Set restartPolicy: Never or OnFailure.'];
  return [];
}

function mainWaitAdvice({ roles }: PodReading, told: Told): string {
  const main = roles.find((r) => r.role === 'main')?.name ?? 'MAIN';
  return `Nothing to do for the sidecars: they are stopped once the main containers are done (${told.trigger}). To see what a main container is doing: kubectl logs -n ${told.namespace} ${told.pod} -c ${main}`;
}

/** The main containers not done: still running, or exited and to be restarted by the kubelet (with the policy's explanation). */
function mainWait({ pod, roles, exitCodes }: PodReading, decision: Decision): string {
  if (decision.outcome === 'ignore') return `the pod to start (${pod.status?.phase ?? 'Pending'})`;
  const restartOf = (main: ContainerRole) => {
    const code = exitCodes.get(main.name);
    return code === undefined ? undefined : restartOfContainerAt(pod.spec ?? {}, main.index, code);
  };
  const pending = roles.filter((r) => r.role === 'main').map((main) => ({ main, restart: restartOf(main) })).filter(({ restart }) => restart?.restarts !== false);
  const restarting = pending.flatMap(({ main, restart }) => (restart ? [`${main.name} ${explainRestart(restart)}`] : []));
  const finishing = `the main container${pending.length === 1 ? '' : 's'} to finish: ${pending.map(({ main }) => `${main.name} (${containerStatus(pod, main.name)})`).join(', ')}`;
  return [finishing, ...restarting].join('; ');
}

const runningSidecars = ({ roles, exitCodes }: PodReading) => roles.filter((r) => r.role === 'sidecar' && !exitCodes.has(r.name));

function sidecarsWait(reading: PodReading): string {
  const { pod, crr, events, stopMeans } = reading;
  return runningSidecars(reading).map((sidecar) => stopWait(sidecar, stopMeans.get(sidecar.name)!, pod, crr, events)).join('; ') || 'the sidecars to exit';
}

function stopWait(sidecar: ContainerRole, means: StopMeans, pod: V1Pod, crr: CrrView | undefined, events: CoreV1Event[]): string {
  if (means === 'image') {
    return sidecar.image === sidecar.markers.quickExitImage
      ? `kubelet to restart ${sidecar.name} with its quick-exit image ${sidecar.image}, which should exit 0 at once (${containerStatus(pod, sidecar.name)})`
      : `the watcher to replace the image of ${sidecar.name} with ${sidecar.markers.quickExitImage}`;
  }
  if (means === 'crr') return `kruise-daemon on ${pod.spec?.nodeName ?? 'the node'} to stop ${sidecar.name} (ContainerRecreateRequest ${crr?.name ?? ''}${crr?.phase ? `, phase ${crr.phase}` : ''})`;
  if (means === 'signal') return `${sidecar.name} to exit after the ${describeStop(sidecar.markers.stop)} its ephemeral container sent (or to be ended from outside once its grace period is over)`;
  return events.length === 0
    ? `the watcher to stop ${sidecar.name}: no action recorded yet`
    : `the watcher's stop of ${sidecar.name} to take effect`;
}

/** What to do while the sidecars stop, or fail to: by the warning reported, and by what stops each running sidecar. */
function stoppingAdvice(reading: PodReading, told: Told, warning: Code | undefined, cannotStop: boolean): string[] {
  const advice: string[] = [];
  if (cannotStop) {
    advice.push(`Give each sidecar a quick-exit image (env ${ENV_WITH_IMAGE}), the only way to stop a container on a virtual-kubelet node.`);
    if (told.job) advice.push(`This pod cannot finish by itself: once the Job's template is fixed, replace the Job (kubectl delete job -n ${told.namespace} ${told.job}, then create it again).`);
  }
  if (warning === 'signal-ignored' || warning === 'sigterm-unhandled') {
    advice.push('The sidecar is being ended from outside. To let it exit by itself in time: give it a SIGTERM handler, run it under an init that forwards signals (tini, dumb-init), or stop it by its own shutdown endpoint (docs/sidecars.md).');
  }
  if (warning === 'stop-failed') advice.push('The watcher retries; its logs say more.');
  advice.push(...runningSidecars(reading).flatMap((sidecar) => sidecarAdvice(sidecar, reading, told)));
  if (reading.events.length === 0) advice.push('The watcher has recorded nothing for this pod: check that it runs (its Deployment, usually <release>-watcher) and read its logs.');
  if (advice.length === 0) advice.push('Usually nothing: the sidecars are stopping. If this lasts, read the events and the watcher\'s logs.');
  return advice;
}

function sidecarAdvice(sidecar: ContainerRole, { pod, stopMeans }: PodReading, told: Told): string[] {
  const means = stopMeans.get(sidecar.name);
  const reason = pod.status?.containerStatuses?.find((s) => s.name === sidecar.name)?.state?.waiting?.reason;
  if (means === 'image' && isImagePullFailure(reason)) {
    return [`The quick-exit image ${sidecar.markers.quickExitImage} of ${sidecar.name} cannot be pulled (${reason}): fix the reference in ${ENV_WITH_IMAGE}.`];
  }
  if (means === 'crr') return [`Check that kruise-daemon runs on ${pod.spec?.nodeName ?? 'the node'}, and the request: kubectl get containerrecreaterequests -n ${told.namespace} -o yaml`];
  return [];
}
