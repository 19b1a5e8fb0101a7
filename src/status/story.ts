// The story of one pod, told from what the add-on leaves on objects: which containers are
// sidecars and why, the trigger rule, what the watcher did and when, what is awaited now, and
// what the user can do; or, for a pod the add-on does not manage, why not. Pure: the policy's
// own decisions (classifyContainers, decide, inspectObject) explain, nothing is re-derived, and
// what the watcher did is read from the codes of its events (their `action`), never their words.
// It reads the facts (here), places the pod (situation.ts) and tells it (narrate.ts, unmanaged.ts).
import type { CoreV1Event } from '@kubernetes/client-node';
import { INJECTED_POLICY_ANNOTATION, MANAGED_LABEL, annotationNames, classifyContainers, exitCodesByName, nodeKindOf, podAnnotations, readStopRecord, restartPolicyOf, stopRecord, type StopRecord } from '../policy/index.ts';
import { SERVE_FLAGS } from '../config.ts';
import { containerStory, ownRestartPolicies, stopMeansOf, triggerRule } from './containers.ts';
import { narrate } from './narrate.ts';
import { eventCode, eventTime, optional, sortByTime } from './readings.ts';
import { sinceOf, situationOf, stateOf } from './situation.ts';
import { timelineOf } from './timeline.ts';
import type { PodFacts, PodReading, PodStory } from './story-types.ts';
import { unmanagedStory } from './unmanaged.ts';

// The story's shapes, for those that hold one.
export type * from './story-types.ts';

export function podStory(facts: PodFacts): PodStory {
  const reading = readPod(facts);
  const story = storyFrame(reading, facts);
  if (story.managed === undefined) return unmanagedStory(story, facts);
  const situation = situationOf(reading, story.managed);
  const { waitingFor, advice } = narrate(situation, reading, story);
  return {
    ...story,
    state: stateOf(situation),
    ...optional('code', 'code' in situation ? situation.code : undefined),
    ...optional('since', sinceOf(situation, reading)),
    ...optional('waitingFor', waitingFor),
    advice,
    ...(situation.kind === 'stopped' ? { result: resultOf(reading) } : {}),
  };
}

function readPod(facts: PodFacts): PodReading {
  const { pod } = facts;
  const node = 'value' in facts.node ? facts.node.value : undefined;
  const nodeKind = node ? nodeKindOf(node) : 'unknown';
  const events = 'value' in facts.events ? sortByTime(facts.events.value) : [];
  const crr = 'value' in facts.crr ? facts.crr.value : undefined;
  const roles = classifyContainers(pod.spec ?? { containers: [] }, podAnnotations(pod));
  const stopMeans = new Map(roles.filter((r) => r.role === 'sidecar').map((r) => [r.name, stopMeansOf(r, nodeKind, pod, events, crr)]));
  return { pod, spec: pod.spec ?? { containers: [] }, ...(node ? { node } : {}), nodeKind, events, ...(crr ? { crr } : {}), roles, exitCodes: exitCodesByName(pod), stopMeans };
}

/** What every story tells, whatever the pod's state: who it is, its containers, what happened. */
function storyFrame(reading: PodReading, facts: PodFacts): PodStory {
  const { pod, spec, events, roles, stopMeans } = reading;
  const restartPolicy = restartPolicyOf(spec) ?? String(spec.restartPolicy);
  const last = events.at(-1);
  return {
    namespace: pod.metadata?.namespace ?? '',
    pod: pod.metadata?.name ?? '',
    ...optional('job', pod.metadata?.ownerReferences?.find((owner) => owner.kind === 'Job')?.name),
    ...optional('node', spec.nodeName),
    nodeKind: reading.nodeKind,
    ...optional('managed', pod.metadata?.labels?.[MANAGED_LABEL]),
    state: 'not managed',
    mechanism: [...new Set(stopMeans.values())].join(',') || '-',
    ...(last ? { lastEvent: lastEvent(last) } : {}),
    restartPolicy,
    containers: roles.map((role) => containerStory(role, pod, stopMeans.get(role.name))),
    trigger: triggerRule(restartPolicy, ownRestartPolicies(spec, roles)),
    ...optional('injectedSidecarPolicy', policyEntries(pod)),
    actions: timelineOf(pod, events, reading.crr, roles),
    notManaged: [],
    advice: [],
    limits: [facts.node, facts.events, facts.crr, facts.webhook].flatMap((read) => (read && 'missing' in read ? [read.missing] : [])),
  };
}

/** The entries of the injected-sidecar policy the webhook applied to the pod at admission, as its annotation names them. */
function policyEntries(pod: PodReading['pod']): string[] | undefined {
  const entries = annotationNames(pod.metadata?.annotations?.[INJECTED_POLICY_ANNOTATION]);
  return entries.length > 0 ? entries : undefined;
}

function lastEvent(event: CoreV1Event): NonNullable<PodStory['lastEvent']> {
  return { ...optional('time', eventTime(event)), type: event.type ?? '', reason: event.reason ?? '', ...optional('code', eventCode(event)), message: event.message ?? '' };
}

/** How the containers ended: the record the watcher wrote, else read from the pod and its ContainerRecreateRequest. */
function resultOf({ pod, crr }: PodReading): StopRecord {
  return readStopRecord(pod) ?? stopRecord(pod, { crr: new Set(crr?.containers ?? []), quickExitImages: [SERVE_FLAGS.quickExitImage.default] });
}
