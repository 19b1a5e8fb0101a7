// The ledger of a robustness run: what the cluster recorded, checked against what the docs promise
// (docs/guarantees.md). It reads only the cluster's record: the Jobs, pods and events listed at the
// end (the kubelet's container statuses among them) and the API server's audit log of the add-on's
// users. Never the add-on's logs: a replica that lost a write's answer, or did not know it no longer
// led, would tell its own story. Pure: run.ts lists, checkLedger judges.
import type { CoreV1Event, V1Container, V1Job, V1Pod } from '@kubernetes/client-node';
import {
  COMPONENT,
  CONDITION_REASONS,
  CRR,
  EVENT_REASONS,
  MANAGED,
  MANAGED_LABEL,
  PHASE_SET,
  PHASE_SET_ANNOTATION,
  TERMINATED_CONDITION,
  WEBHOOK_NAMES,
  crrName,
  epochMs,
  exitCodesByName,
  mainsFinishedAt,
  phaseOfMains,
  readStopRecord,
  rolesOf,
  type ContainerRole,
} from '../../src/policy/index.ts';
import { fenceName } from '../../src/kube/fence.ts';
import { FENCE_RULES, type FencedComponent } from '../../src/kube/fence-rules.ts';
import type { AuditEvent } from '../../test/support/audit.ts';

export type Outcome = 'Complete' | 'Failed';

export interface Expectation {
  namespace: string;
  /** The Job's name. */
  name: string;
  /** What its main containers give: Complete when every main exits 0 at its last run. */
  outcome: Outcome;
  /** The traffic kind that made it (for the report), e.g. 'sim-signal', 'real-crr'. */
  kind: string;
}

export interface FaultWindow {
  /** e.g. 'watcher-leader-sigkill', 'webhook-replica-sigstop', 'apiserver-sigkill', 'etcd-sigstop', 'leader-blackhole', 'kubelet-restart', 'kruise-install', 'kruise-uninstall', 'kruise-daemon-kill', 'webhook-roll', 'cert-rotate'. */
  kind: string;
  /** Epoch ms. */
  startedAt: number;
  /** Epoch ms: when the thing was back (process ready, API answering...). */
  healedAt: number;
}

export interface Recorded {
  expectations: Expectation[];
  /** Every Job of the run's namespaces, as listed at the end. */
  jobs: V1Job[];
  /** Every pod of those namespaces. */
  pods: V1Pod[];
  /** Every event of those namespaces. */
  events: CoreV1Event[];
  /** The API server's audit log: every request of the add-on's users (Metadata level). */
  audit: AuditEvent[];
  /** The audit usernames of the add-on's processes (webhook and watcher replicas). */
  addonUsers: string[];
  /** Where its Lease, Secret and events live. */
  addonNamespace: string;
  /** The add-on's webhook configurations (its own writes to them are allowed). */
  webhookConfigNames: string[];
  faults: FaultWindow[];
  /** Every Job must have finished by then: the last fault's healedAt plus the bound the docs promise. */
  finishBy: number;
}

export type Rule = 'job-not-finished' | 'job-outcome' | 'stopped-twice' | 'stopped-while-main-ran' | 'phase-differs' | 'admission-lost' | 'wrote-outside';

/** `object`: 'namespace/name' for a pod; another object with its kind or resource first ('job/namespace/name', 'configmaps/namespace/name'). */
export interface Violation {
  rule: Rule;
  object: string;
  detail: string;
}

export const RULES: Record<Rule, string> = {
  'job-not-finished': 'Every Job of the run ended (Complete or Failed) within the bound the docs promise after the last fault healed.',
  'job-outcome': 'Every Job ended as its main containers make it: Complete when each exited 0 at its last run, Failed otherwise.',
  'stopped-twice': 'No sidecar was told to stop twice: one signal container per sidecar, the stop requests of one pod from one replica, one SidecarTerminator event per pod.',
  'stopped-while-main-ran': "No sidecar was told to stop, nor ended, before the final run of its pod's last main container finished.",
  'phase-differs': "A pod whose phase or status the add-on wrote is Succeeded exactly when every main container's last exit code is 0, Failed otherwise.",
  'admission-lost':
    "The API server failed to call the add-on's webhooks only while a webhook replica, kube-apiserver or etcd was killed or stopped (and 10 s after), never through a rolling restart or a certificate rotation.",
  'wrote-outside': 'The add-on wrote only its Lease, Secret and events, its own webhook configurations and fence, the pods it manages and their ContainerRecreateRequests.',
};

const WRITES = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);
/** The faults during which the API server cannot reach a webhook replica, or cannot admit anything. */
const ADMISSION_MAY_FAIL = /^(webhook-replica|kube-apiserver|etcd)-/;
/** How long after such a fault healed the API server may still report a call it made during it (its calls time out). */
const CALL_TIMEOUT_MS = 10_000;
const OUR_WEBHOOKS: ReadonlySet<string> = new Set(Object.values(WEBHOOK_NAMES));

/** What several rules read, computed once. */
interface Index {
  jobs: Map<string, V1Job>;
  pods: Map<string, V1Pod>;
  /** Each listed pod's key by the name of its ContainerRecreateRequest (namespace/name). */
  podOfCrr: Map<string, string>;
  /** The add-on's writes that succeeded (the API server answers a write 2xx or an error, which changed nothing). */
  writes: AuditEvent[];
  /** The stop requests that succeeded, by the key of the pod they were for, the first received first. */
  stops: Map<string, AuditEvent[]>;
}

export function checkLedger(recorded: Recorded): Violation[] {
  const index = indexOf(recorded);
  return [
    ...unfinishedJobs(recorded, index),
    ...wrongOutcomes(recorded, index),
    ...stoppedTwice(recorded, index),
    ...stoppedWhileMainRan(recorded, index),
    ...phasesDiffering(recorded, index),
    ...admissionsLost(recorded),
    ...writesOutside(recorded, index),
  ];
}

/** 1. A stop lost in a fault leaves its pod, and its Job, running for ever: every expected Job has ended, within the bound. */
function unfinishedJobs(recorded: Recorded, index: Index): Violation[] {
  return recorded.expectations.flatMap((expected) => {
    const violation = (detail: string): Violation[] => [{ rule: 'job-not-finished', object: `job/${expected.namespace}/${expected.name}`, detail: `${expected.kind}: ${detail}` }];
    const job = index.jobs.get(key(expected.namespace, expected.name));
    if (!job) return violation('not listed at the end of the run');
    const end = jobEnd(job);
    if (!end) return violation('neither Complete nor Failed at the end of the run');
    if (end.at !== undefined && end.at > recorded.finishBy) return violation(`${end.outcome} at ${iso(end.at)}, ${seconds(end.at - recorded.finishBy)} after the bound (${iso(recorded.finishBy)})`);
    return [];
  });
}

/** 2. A sidecar's exit code, or a phase set wrongly, must not change what the main containers decided. */
function wrongOutcomes(recorded: Recorded, index: Index): Violation[] {
  return recorded.expectations.flatMap((expected): Violation[] => {
    const end = jobEnd(index.jobs.get(key(expected.namespace, expected.name)));
    if (!end || end.outcome === expected.outcome) return [];
    return [{ rule: 'job-outcome', object: `job/${expected.namespace}/${expected.name}`, detail: `${expected.kind}: ${end.outcome}${end.why ? ` (${end.why})` : ''}, expected ${expected.outcome}` }];
  });
}

/**
 * 3. Every stop is idempotent by name, and one replica leads at a time: a second signal container,
 * stop requests from two replicas, or a second SidecarTerminator event mean a name not found or two leaders at once.
 */
function stoppedTwice(recorded: Recorded, index: Index): Violation[] {
  const findings = new Map<string, string[]>();
  const add = (pod: string, finding: string) => findings.set(pod, [...(findings.get(pod) ?? []), finding]);
  for (const pod of recorded.pods) {
    const targets = tally((pod.spec?.ephemeralContainers ?? []).map((c) => c.targetContainerName ?? ''));
    for (const [target, n] of targets) if (n > 1) add(podKey(pod), `${n} ephemeral containers target ${target || 'no container'}`);
  }
  for (const [pod, stops] of index.stops) {
    const users = new Set(stops.map((stop) => stop.user?.username ?? ''));
    if (users.size > 1) add(pod, `stop requests from ${[...users].join(' and ')}`);
  }
  const announced = new Map<string, number>();
  for (const event of recorded.events) {
    if (event.reason !== EVENT_REASONS.stopping || (event.source?.component ?? event.reportingComponent) !== COMPONENT) continue;
    const pod = key(event.involvedObject.namespace ?? event.metadata.namespace ?? '', event.involvedObject.name ?? '');
    announced.set(pod, (announced.get(pod) ?? 0) + occurrences(event));
  }
  for (const [pod, n] of announced) if (n > 1) add(pod, `${n} ${EVENT_REASONS.stopping} events`);
  return [...findings].map(([object, each]) => ({ rule: 'stopped-twice', object, detail: each.join('; ') }));
}

/**
 * 4. The add-on's first promise: a sidecar is stopped only once the main containers are done, a main
 * the kubelet restarts counted as not done. The kubelet writes finishedAt truncated to the second, so
 * only a request received before that second began is surely early (the audit's microseconds read
 * as milliseconds, truncated, which keeps that comparison exact); a sidecar's end, also to the
 * second, is early when its second is before the mains'.
 */
function stoppedWhileMainRan(recorded: Recorded, index: Index): Violation[] {
  return recorded.pods.flatMap((pod): Violation[] => {
    const roles = rolesOf(pod);
    const mainsAt = mainsFinishedAt(pod, roles);
    if (mainsAt === undefined) return [];
    const findings: string[] = [];
    const first = index.stops.get(podKey(pod))?.[0];
    const requestedAt = epochMs(first?.requestReceivedTimestamp);
    if (requestedAt !== undefined && requestedAt < mainsAt) findings.push(`stop request from ${first?.user?.username} received at ${first?.requestReceivedTimestamp}, before the main containers finished at ${iso(mainsAt)}`);
    const template = jobTemplate(pod, index);
    for (const sidecar of roles.filter((role) => role.role === 'sidecar')) {
      const endedAt = ownRunEnd(pod, sidecar, template);
      if (endedAt !== undefined && second(endedAt) < second(mainsAt)) findings.push(`${sidecar.name} ended at ${iso(endedAt)}, before the main containers finished at ${iso(mainsAt)}`);
    }
    return findings.length > 0 ? [{ rule: 'stopped-while-main-ran', object: podKey(pod), detail: findings.join('; ') }] : [];
  });
}

/**
 * 5. With ..._IGNORE_EXIT_CODE the add-on sets the phase the main containers make, as the kubelet
 * would without the sidecars; any status it writes must leave that phase. A pod still running with
 * only a status write (a condition while an image cannot be pulled) is rule 1's to report.
 */
function phasesDiffering(recorded: Recorded, index: Index): Violation[] {
  const statusWriters = new Map<string, Set<string>>();
  for (const write of index.writes) {
    const { resource, subresource, namespace, name } = write.objectRef ?? {};
    if (resource !== 'pods' || subresource !== 'status') continue;
    const pod = key(namespace ?? '', name ?? '');
    statusWriters.set(pod, (statusWriters.get(pod) ?? new Set()).add(write.user?.username ?? ''));
  }
  return recorded.pods.flatMap((pod): Violation[] => {
    const phase = pod.status?.phase;
    const setBy = phaseSetBy(pod);
    const writers = statusWriters.get(podKey(pod));
    if (!setBy && !(writers && (phase === 'Succeeded' || phase === 'Failed'))) return [];
    const codes = exitCodesByName(pod);
    const mains = rolesOf(pod).filter((role) => role.role === 'main');
    const expected = phaseOfMains(mains.map((main) => codes.get(main.name)));
    if (phase === expected) return [];
    const exits = mains.map((main) => `${main.name} ${codes.has(main.name) ? `exited ${codes.get(main.name)}` : 'did not exit'}`).join(', ');
    const by = setBy ?? `its status written by ${[...writers!].join(' and ')}`;
    return [{ rule: 'phase-differs', object: podKey(pod), detail: `phase ${phase ?? 'unset'}, expected ${expected} (${exits}); ${by}` }];
  });
}

/**
 * 6. A rolling restart drains a replica before it goes, and a rotated certificate is trusted before
 * it is served: neither may make the API server fail a call to a webhook. Only a replica, the API
 * server or etcd killed or stopped may, until its calls have timed out.
 */
function admissionsLost(recorded: Recorded): Violation[] {
  const excusing = recorded.faults.filter((fault) => ADMISSION_MAY_FAIL.test(fault.kind));
  const judge = (object: string, webhook: string, times: number[], count: string): Violation[] => {
    const unexcused = times.find((at) => !excusing.some((fault) => at + 999 >= fault.startedAt && at <= fault.healedAt + CALL_TIMEOUT_MS));
    if (unexcused === undefined) return [];
    const inside = recorded.faults.filter((fault) => unexcused + 999 >= fault.startedAt && unexcused <= fault.healedAt).map((fault) => fault.kind);
    const when = inside.length > 0 ? `during ${inside.join(', ')}` : 'outside every fault';
    return [{ rule: 'admission-lost', object, detail: `${count}failed calling webhook "${webhook}", at ${iso(unexcused)} ${when}` }];
  };
  // failurePolicy Fail: the Job controller's pod creation refused, said in its FailedCreate event.
  const refused = recorded.events.flatMap((event): Violation[] => {
    const webhook = event.reason === 'FailedCreate' ? /failed calling webhook "([^"]+)"/.exec(event.message ?? '')?.[1] : undefined;
    if (webhook === undefined || !OUR_WEBHOOKS.has(webhook)) return [];
    // Each occurrence's time is known only at the first and the last; a time to the second may be up to 999 ms later.
    const times = [event.firstTimestamp, event.eventTime, event.series?.lastObservedTime, event.lastTimestamp].flatMap((time) => epochMs(time) ?? []);
    const { kind = 'object', namespace, name = '' } = event.involvedObject;
    return judge(objectName(kind.toLowerCase(), namespace, name), webhook, times, `${occurrences(event)} × `);
  });
  // failurePolicy Ignore (the chart's default): the pod created without the webhook's answer, which
  // the API server's audit log says in an annotation of the creation (failed-open.<kind>.webhook.admission.k8s.io/round_R_index_I).
  const failedOpen = recorded.audit.flatMap((event): Violation[] => {
    if (event.verb !== 'create' || event.objectRef?.resource !== 'pods' || event.objectRef.subresource) return [];
    const webhook = Object.entries(event.annotations ?? {}).find(([key, value]) => key.startsWith('failed-open.') && OUR_WEBHOOKS.has(value))?.[1];
    if (webhook === undefined) return [];
    const { namespace, name = '' } = event.objectRef;
    return judge(objectName('pod-create', namespace, name), webhook, [epochMs(event.requestReceivedTimestamp) ?? []].flat(), '');
  });
  return [...refused, ...failedOpen];
}

/** 7. The fence allows exactly the add-on's writes; the audit log says what was written whatever the fence let through. */
function writesOutside(recorded: Recorded, index: Index): Violation[] {
  const own = { namespace: recorded.addonNamespace, configurations: new Set(recorded.webhookConfigNames) };
  const found = new Map<string, { violation: Violation; times: number }>();
  for (const write of index.writes) {
    const why = outside(write, own, index);
    if (why === undefined) continue;
    const { resource = '', subresource, namespace, name = '' } = write.objectRef ?? {};
    const object = objectName(resource, namespace, name);
    const detail = `${write.user?.username} ${write.verb} ${resource}${subresource ? `/${subresource}` : ''}: ${why}`;
    const seen = found.get(`${object} ${detail}`) ?? { violation: { rule: 'wrote-outside', object, detail }, times: 0 };
    found.set(`${object} ${detail}`, { ...seen, times: seen.times + 1 });
  }
  return [...found.values()].map(({ violation, times }) => (times > 1 ? { ...violation, detail: `${violation.detail} (${times} times)` } : violation));
}

/** Why a write is outside what the add-on may write; undefined when it is its own. */
function outside(write: AuditEvent, own: { namespace: string; configurations: ReadonlySet<string> }, index: Index): string | undefined {
  const { resource, subresource = '', namespace, name = '' } = write.objectRef ?? {};
  const managed = (pod: string | undefined) => {
    const listed = pod === undefined ? undefined : index.pods.get(pod);
    if (!listed) return 'for no pod listed at the end';
    return listed.metadata?.labels?.[MANAGED_LABEL] === MANAGED ? undefined : 'the pod is not managed';
  };
  switch (resource) {
    case 'events':
      return undefined;
    case 'leases':
    case 'secrets':
      return namespace === own.namespace ? undefined : `outside ${own.namespace}`;
    case 'mutatingwebhookconfigurations':
    case 'validatingwebhookconfigurations':
      return own.configurations.has(name) ? undefined : 'not its webhook configuration';
    // The fence: the ValidatingAdmissionPolicies (and bindings) that hold the add-on's own writes, named after its configuration.
    case 'validatingadmissionpolicies':
    case 'validatingadmissionpolicybindings':
      return [...own.configurations].some((configuration) => (Object.keys(FENCE_RULES) as FencedComponent[]).some((component) => fenceName(configuration, component) === name)) ? undefined : 'not its fence';
    case 'pods':
      // The add-on patches pods (labels, signal containers, images, status); it never creates nor deletes one.
      if (!['', 'ephemeralcontainers', 'status'].includes(subresource)) return `subresource ${subresource}`;
      if (write.verb !== 'patch' && write.verb !== 'update') return 'the add-on only patches pods';
      return managed(key(namespace ?? '', name));
    case CRR.plural:
      if (write.verb !== 'create') return 'the add-on only creates ContainerRecreateRequests';
      return managed(index.podOfCrr.get(key(namespace ?? '', name)));
    default:
      return 'not an object the add-on writes';
  }
}

function indexOf(recorded: Recorded): Index {
  const users = new Set(recorded.addonUsers);
  const writes = recorded.audit.filter((event) => users.has(event.user?.username ?? '') && WRITES.has(event.verb) && (event.responseStatus?.code ?? 0) < 400);
  const podOfCrr = new Map(recorded.pods.flatMap((pod) => (pod.metadata?.uid ? [[key(pod.metadata.namespace ?? '', crrName(pod.metadata.uid)), podKey(pod)] as const] : [])));
  const stops = new Map<string, AuditEvent[]>();
  for (const write of writes) {
    const { resource, subresource, namespace = '', name = '' } = write.objectRef ?? {};
    const signal = resource === 'pods' && subresource === 'ephemeralcontainers';
    const crr = resource === CRR.plural && write.verb === 'create';
    if (!signal && !crr) continue;
    const pod = signal ? key(namespace, name) : (podOfCrr.get(key(namespace, name)) ?? key(namespace, name));
    stops.set(pod, [...(stops.get(pod) ?? []), write]);
  }
  for (const each of stops.values()) each.sort((a, b) => (epochMs(a.requestReceivedTimestamp) ?? 0) - (epochMs(b.requestReceivedTimestamp) ?? 0));
  return {
    jobs: new Map(recorded.jobs.map((job) => [key(job.metadata?.namespace ?? '', job.metadata?.name ?? ''), job])),
    pods: new Map(recorded.pods.map((pod) => [podKey(pod), pod])),
    podOfCrr,
    writes,
    stops,
  };
}

/** How a Job ended, and when; undefined while it has not. */
function jobEnd(job: V1Job | undefined): { outcome: Outcome; at: number | undefined; why: string } | undefined {
  const condition = job?.status?.conditions?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
  if (!condition) return undefined;
  return { outcome: condition.type as Outcome, at: epochMs(condition.lastTransitionTime), why: [condition.reason, condition.message].filter(Boolean).join(': ') };
}

/** Where the pod says the add-on set its phase: the words of its condition, its stop record, or the annotation written with the phase. */
function phaseSetBy(pod: V1Pod): string | undefined {
  const condition = pod.status?.conditions?.find((c) => c.type === TERMINATED_CONDITION);
  if (condition?.reason === CONDITION_REASONS.stopping && condition.message?.startsWith(PHASE_SET)) return `its ${TERMINATED_CONDITION} condition: ${condition.message}`;
  if (readStopRecord(pod)?.sidecars.some((sidecar) => sidecar.stoppedBy.includes('phase'))) return 'its stop record says the phase was set';
  const annotated = pod.metadata?.annotations?.[PHASE_SET_ANNOTATION];
  return annotated !== undefined ? `${PHASE_SET_ANNOTATION}: ${annotated}` : undefined;
}

/** The containers of the Job that owns the pod, as its template has them: the images before any was replaced. */
function jobTemplate(pod: V1Pod, index: Index): V1Container[] | undefined {
  const owner = pod.metadata?.ownerReferences?.find((each) => each.kind === 'Job' && each.controller);
  return owner && index.jobs.get(key(pod.metadata?.namespace ?? '', owner.name))?.spec?.template.spec?.containers;
}

/**
 * When the sidecar's own run ended. One whose image was replaced in place ran its own image in the
 * run the kubelet killed for the change (lastState), then the quick-exit image; without the Job's
 * template, only a replacement by its own marker's image is seen.
 */
function ownRunEnd(pod: V1Pod, sidecar: ContainerRole, template: V1Container[] | undefined): number | undefined {
  const status = pod.status?.containerStatuses?.find((each) => each.name === sidecar.name);
  const original = template?.find((each) => each.name === sidecar.name)?.image;
  const replaced = original !== undefined ? sidecar.image !== original : sidecar.image !== undefined && sidecar.image === sidecar.markers.quickExitImage;
  return epochMs((replaced ? (status?.lastState?.terminated ?? status?.state?.terminated) : status?.state?.terminated)?.finishedAt);
}

/** An event's occurrences: its series' count (events.k8s.io), else its count. */
const occurrences = (event: CoreV1Event): number => event.series?.count ?? event.count ?? 1;

function tally(values: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return counts;
}

const key = (namespace: string, name: string): string => `${namespace}/${name}`;
const podKey = (pod: V1Pod): string => key(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '');
const objectName = (kind: string, namespace: string | undefined, name: string): string => (namespace ? `${kind}/${namespace}/${name}` : `${kind}/${name}`);
const iso = (ms: number): string => new Date(ms).toISOString();
const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
/** The second a time falls in, as the kubelet truncates its times. */
const second = (ms: number): number => Math.floor(ms / 1000);
