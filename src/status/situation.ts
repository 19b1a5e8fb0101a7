// Where a managed pod stands, from the policy's own decision (decide) and the codes of the
// watcher's events: stopped, ignored, waiting for its main containers, or its sidecars stopping,
// ended from outside, or stuck. Pure; the words are narrate.ts's.
import type { CoreV1Event } from '@kubernetes/client-node';
import { DONE, decide, endsFromOutside, waitsOnMains, type Code, type Decision, type IgnoreCode } from '../policy/index.ts';
import { eventCode, eventTime, finishedAt, iso, latest } from './readings.ts';
import type { PodReading, PodStoryState } from './story-types.ts';

export type Situation =
  /** Every sidecar has stopped; `failedBy`: the watcher's event saying a stopped sidecar's exit code failed the pod. */
  | { kind: 'stopped'; code: 'sidecars-stopped' | 'sidecar-exit-failed-pod'; failedBy?: CoreV1Event }
  /** The watcher leaves the pod alone for good. */
  | { kind: 'ignored'; code: IgnoreCode }
  /** The pod has not started, or its main containers are not done. */
  | { kind: 'waiting for main'; code: Code; decision: Decision }
  /** Sidecars nothing can stop on this node. */
  | { kind: 'cannot stop'; code: Code; containers: string[]; warning?: Code }
  /** The watcher's last event is a Warning that is not about an end from outside. */
  | { kind: 'warned'; code?: Code; event: CoreV1Event }
  /** The watcher's last event says a sidecar is being ended from outside, through the kubelet. */
  | { kind: 'ending from outside'; code: Code; event: CoreV1Event }
  /** The sidecars are told to stop, or about to be. */
  | { kind: 'stopping'; code: Code };

const STATES: Record<Situation['kind'], PodStoryState> = {
  stopped: 'stopped',
  ignored: 'failed',
  'waiting for main': 'waiting for main',
  'cannot stop': 'failed',
  warned: 'failed',
  'ending from outside': 'stopping',
  stopping: 'stopping',
};

export const stateOf = (situation: Situation): PodStoryState => STATES[situation.kind];

/** The situation of a pod with the managed label. */
export function situationOf(reading: PodReading, managed: string): Situation {
  const { pod, node, nodeKind, events } = reading;
  // A pod is judged on a normal node when its node is unknown: the note in limits says so.
  const decision = decide(pod, nodeKind === 'virtual' ? node : undefined);
  if (managed === DONE || decision.outcome === 'finished') {
    // Stopped, but a stopped sidecar's exit code failed the pod: the watcher's event says how.
    const failedBy = events.find((event) => eventCode(event) === 'sidecar-exit-failed-pod');
    return failedBy ? { kind: 'stopped', code: 'sidecar-exit-failed-pod', failedBy } : { kind: 'stopped', code: 'sidecars-stopped' };
  }
  if (decision.outcome !== 'act' && waitsOnMains(decision.code)) return { kind: 'waiting for main', code: decision.code, decision };
  if (decision.outcome === 'ignore') return { kind: 'ignored', code: decision.code };
  return stopSituation(decision, events.at(-1));
}

/** Once the main containers are done: the decision, and the watcher's last event when it is a Warning. */
function stopSituation(decision: Extract<Decision, { outcome: 'wait' | 'act' }>, last: CoreV1Event | undefined): Situation {
  const warning = last?.type === 'Warning' ? last : undefined;
  const warned = eventCode(warning);
  const cannotStop = decision.outcome === 'act' ? decision.actions.flatMap((a) => (a.type === 'cannotStop' ? [a] : [])) : [];
  if (cannotStop.length > 0) return { kind: 'cannot stop', code: cannotStop[0]!.code, containers: cannotStop.map((a) => a.container), ...(warned ? { warning: warned } : {}) };
  if (warning && warned !== undefined && endsFromOutside(warned)) return { kind: 'ending from outside', code: warned, event: warning };
  if (warning) return { kind: 'warned', ...(warned ? { code: warned } : {}), event: warning };
  return { kind: 'stopping', code: decision.outcome === 'wait' ? decision.code : 'mains-done' };
}

/** When the situation began: the last sidecar's exit, the pod's start, or the last main container's exit (else the first event). */
export function sinceOf(situation: Situation, reading: PodReading): string | undefined {
  const { pod, roles, events } = reading;
  const lastExit = (role: 'main' | 'sidecar') => latest(roles.filter((r) => r.role === role).map((r) => finishedAt(pod, r.name)));
  switch (situation.kind) {
    case 'stopped': return lastExit('sidecar');
    case 'ignored': return undefined;
    case 'waiting for main': return pod.status?.startTime ? iso(pod.status.startTime) : undefined;
    default: return lastExit('main') ?? eventTime(events[0]);
  }
}
