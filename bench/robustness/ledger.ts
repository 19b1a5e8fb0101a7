// The ledger of a robustness run: what the cluster recorded, checked against what the docs promise
// (docs/guarantees.md). It reads only the cluster's record: the Jobs, pods and events listed at the
// end (the kubelet's container statuses among them) and the API server's audit log of the add-on's
// requests and of every creation of a pod, Job or CronJob (auditRules). Never the add-on's logs: a
// replica that lost a write's answer, or did not know it no longer led, would tell its own story.
// Pure: run.ts lists, checkLedger judges.
import type { CoreV1Event, V1Container, V1Job, V1ObjectMeta, V1Pod } from '@kubernetes/client-node';
import {
  CONDITION_REASONS,
  CRR,
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
import { SERVE_FLAGS } from '../../src/config.ts';
import { fenceName } from '../../src/kube/fence.ts';
import { FENCE_RULES, type FencedComponent } from '../../src/kube/fence-rules.ts';
import { auditMicros, type AuditEvent, type AuditRule } from '../../test/support/audit.ts';

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
  /** The API server's audit log, by the policy of auditRules: every request of the add-on's users, every creation of a pod, Job or CronJob. */
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
  'stopped-twice':
    "No sidecar was told to stop twice, nor by two leaders: one signal container per sidecar (in the pod's spec and in the audit log), one ContainerRecreateRequest created per pod, and every write of a watcher replica received while it held the Lease (the last successful Lease write before it was the replica's own, and no release).",
  'stopped-while-main-ran': "No sidecar was told to stop (a signal container, a ContainerRecreateRequest, its image replaced), nor ended, before the final run of its pod's last main container finished.",
  'phase-differs': "A pod whose phase or status the add-on wrote is Succeeded exactly when every main container's last exit code is 0, Failed otherwise.",
  'admission-lost':
    "No admission answer was lost to a rolling restart of the webhook or a certificate rotation: no pod creation refused, and no pod, Job or CronJob admitted without the webhooks, while one ran (calls failed elsewhere, outside the faults that stop a replica, kube-apiserver or etcd, are reported apart as late answers).",
  'wrote-outside': 'The add-on wrote only its Lease, Secret and events, its own webhook configurations and fence, the pods it manages and their ContainerRecreateRequests.',
};

/**
 * The audit policy's rules that give the ledger what it reads (the first rule matching a request
 * sets its level): the add-on's requests with their bodies (a pod patch says what it changes, a
 * Lease write whom it leaves holding), but its Secrets' metadata only (they hold key material); and
 * every creation of a pod, Job or CronJob with its body, which names the object where the API
 * server generates the name, and a pod's Job.
 */
export const auditRules = (addonGroup: string): AuditRule[] => [
  { level: 'Metadata', userGroups: [addonGroup], resources: [{ group: '', resources: ['secrets'] }] },
  { level: 'Request', userGroups: [addonGroup] },
  { level: 'Request', verbs: ['create'], resources: [{ group: '', resources: ['pods'] }, { group: 'batch', resources: ['jobs', 'cronjobs'] }] },
  { level: 'None' },
];

const WRITES = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);
/** The Lease the watcher replicas elect their leader with, in the add-on's namespace. */
const WATCHER_LEASE = SERVE_FLAGS.leaderElectionLease.default;
/** The creations the API server may admit without the webhooks (failurePolicy Ignore), by resource: the name of the kind in a violation. */
const ADMITTED_KINDS: ReadonlyMap<string, string> = new Map([['pods', 'pod'], ['jobs', 'job'], ['cronjobs', 'cronjob']]);
/** The labels the Job controller gives its pods, naming their Job (the second is the older one). */
const JOB_NAME_LABELS = ['batch.kubernetes.io/job-name', 'job-name'];
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
  stops: Map<string, Stop[]>;
}

/** A request to stop a pod's sidecars: a signal container for each of `sidecars`, a ContainerRecreateRequest, or a container's image replaced. */
interface Stop {
  write: AuditEvent;
  by: 'signal' | 'crr' | 'image';
  /** The sidecars a signal patch sends a container for, as its body says (none without the body). */
  sidecars: string[];
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
 * 3. Every stop is idempotent by name, and one replica leads at a time: a second signal container
 * for a sidecar or a second ContainerRecreateRequest for a pod means a name not found, and a write
 * of a replica that did not hold the Lease means two leaders at once (the fallback from a
 * ContainerRecreateRequest to a signal container may well follow a handover).
 */
function stoppedTwice(recorded: Recorded, index: Index): Violation[] {
  const findings = new Map<string, string[]>();
  const add = (object: string, finding: string) => findings.set(object, [...(findings.get(object) ?? []), finding]);
  for (const pod of recorded.pods) {
    const targets = tally((pod.spec?.ephemeralContainers ?? []).map((c) => c.targetContainerName ?? ''));
    for (const [target, n] of targets) if (n > 1) add(podKey(pod), `${n} ephemeral containers target ${target || 'no container'}`);
  }
  for (const [pod, stops] of index.stops) {
    const crrs = stops.filter((stop) => stop.by === 'crr').length;
    if (crrs > 1) add(pod, `${crrs} ContainerRecreateRequests created`);
    for (const [sidecar, n] of tally(stops.flatMap((stop) => stop.sidecars))) if (n > 1) add(pod, `${n} signal containers sent for ${sidecar}`);
  }
  for (const { object, finding } of writesOutOfTerm(recorded, index)) add(object, finding);
  return [...findings].map(([object, each]) => ({ rule: 'stopped-twice', object, detail: each.join('; ') }));
}

/**
 * The writes of a watcher replica the API server received while the Lease was not the replica's.
 * The watcher replicas are the add-on's users that ever wrote the Lease; who held it when a write
 * was received is who made the last successful Lease write before: a standby writes the Lease only
 * to take it over once it expired, a leader only to renew it (or, its body says, to release it),
 * and a leader that cannot renew stops acting before a standby may take over. A write the API
 * server refused counts: it was sent.
 */
function writesOutOfTerm(recorded: Recorded, index: Index): Array<{ object: string; finding: string }> {
  const users = new Set(recorded.addonUsers);
  const terms = recorded.audit
    .flatMap((event) => {
      const { resource, namespace, name } = event.objectRef ?? {};
      const user = event.user?.username ?? '';
      const at = auditMicros(event.requestReceivedTimestamp);
      if (resource !== 'leases' || namespace !== recorded.addonNamespace || name !== WATCHER_LEASE || !['create', 'update', 'patch'].includes(event.verb)) return [];
      if (!users.has(user) || code(event) >= 400 || at === undefined) return [];
      return [{ user, at, time: event.requestReceivedTimestamp, released: leaseHolder(event) === '' }];
    })
    .sort((a, b) => a.at - b.at);
  const watchers = new Set(terms.map((term) => term.user));
  return recorded.audit.flatMap((write) => {
    const user = write.user?.username ?? '';
    const at = auditMicros(write.requestReceivedTimestamp);
    if (!watchers.has(user) || !WRITES.has(write.verb) || write.objectRef?.resource === 'leases' || at === undefined) return [];
    const holder = lastBefore(terms, at);
    if (holder?.user === user && !holder.released) return [];
    const { resource = '', subresource, namespace = '', name = '' } = write.objectRef ?? {};
    // A pod, and a ContainerRecreateRequest, by the pod's key: the other findings of this rule name it so.
    const pod = resource === 'pods' ? key(namespace, name) : resource === CRR.plural ? index.podOfCrr.get(key(namespace, name)) : undefined;
    const object = pod ?? objectName(resource, namespace, name);
    const whose = !holder ? 'before any replica held the Lease' : holder.released ? `while no replica held the Lease (released by ${holder.user}, received at ${holder.time})` : `while ${holder.user} held the Lease (its write received at ${holder.time})`;
    return [{ object, finding: `${user} ${write.verb} ${resource}${subresource ? `/${subresource}` : ''} (answered ${code(write) || 'nothing'}) received at ${write.requestReceivedTimestamp}, ${whose}` }];
  });
}

/** The last of `sorted` (by `at`) received strictly before `at`. */
function lastBefore<T extends { at: number }>(sorted: readonly T[], at: number): T | undefined {
  let [low, high] = [0, sorted.length];
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sorted[middle]!.at < at) low = middle + 1;
    else high = middle;
  }
  return sorted[low - 1];
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
    const first = index.stops.get(podKey(pod))?.[0]?.write;
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
function failedAdmissions(recorded: Recorded): FailedCall[] {
  const excusing = recorded.faults.filter((fault) => ADMISSION_MAY_FAIL.test(fault.kind));
  const judge = (object: string, webhook: string, times: number[], count: string, whose = ''): FailedCall[] => {
    const unexcused = times.find((at) => !excusing.some((fault) => at + 999 >= fault.startedAt && at <= fault.healedAt + CALL_TIMEOUT_MS));
    if (unexcused === undefined) return [];
    const inside = recorded.faults.filter((fault) => unexcused + 999 >= fault.startedAt && unexcused <= fault.healedAt).map((fault) => fault.kind);
    const when = inside.length > 0 ? `during ${inside.join(', ')}` : 'outside every fault';
    return [{ violation: { rule: 'admission-lost', object, detail: `${count}failed calling webhook "${webhook}"${whose}, at ${iso(unexcused)} ${when}` }, during: inside }];
  };
  // failurePolicy Fail: the Job controller's pod creation refused, said in its FailedCreate event.
  const refused = recorded.events.flatMap((event): FailedCall[] => {
    const webhook = event.reason === 'FailedCreate' ? /failed calling webhook "([^"]+)"/.exec(event.message ?? '')?.[1] : undefined;
    if (webhook === undefined || !OUR_WEBHOOKS.has(webhook)) return [];
    // Each occurrence's time is known only at the first and the last; a time to the second may be up to 999 ms later.
    const times = [event.firstTimestamp, event.eventTime, event.series?.lastObservedTime, event.lastTimestamp].flatMap((time) => epochMs(time) ?? []);
    const { kind = 'object', namespace, name = '' } = event.involvedObject;
    return judge(objectName(kind.toLowerCase(), namespace, name), webhook, times, `${occurrences(event)} × `);
  });
  // failurePolicy Ignore (the chart's default): the pod, Job or CronJob created without the
  // webhook's answer, which the API server's audit log says in an annotation of the creation
  // (failed-open.<kind>.webhook.admission.k8s.io/round_R_index_I). The Job controller's pods have a
  // generated name, which only the request's body gives (as generateName), with the pod's Job.
  const failedOpen = recorded.audit.flatMap((event): FailedCall[] => {
    const kind = ADMITTED_KINDS.get(event.objectRef?.resource ?? '');
    if (event.verb !== 'create' || kind === undefined || event.objectRef?.subresource) return [];
    const webhook = Object.entries(event.annotations ?? {}).find(([key, value]) => key.startsWith('failed-open.') && OUR_WEBHOOKS.has(value))?.[1];
    if (webhook === undefined) return [];
    const metadata = requestMetadata(event);
    const name = event.objectRef?.name || metadata?.name || metadata?.generateName || '';
    const job = kind === 'pod' ? JOB_NAME_LABELS.map((label) => metadata?.labels?.[label]).find(Boolean) : undefined;
    return judge(objectName(`${kind}-create`, event.objectRef?.namespace, name), webhook, [epochMs(event.requestReceivedTimestamp) ?? []].flat(), '', job ? ` for a pod of Job ${job}` : '');
  });
  return [...refused, ...failedOpen];
}

/** A webhook call that failed outside the faults that excuse it, with the kinds of fault it fell in. */
interface FailedCall {
  violation: Violation;
  during: string[];
}

/** Kinds of fault that must lose no admission answer: the replicas change, the Service keeps answering. */
const NO_ANSWER_LOST = new Set(['webhook-roll', 'cert-rotate']);
const lostToRollOrRotation = (call: FailedCall): boolean => call.during.some((kind) => NO_ANSWER_LOST.has(kind));

/**
 * The failed calls that fall in a rolling restart or a certificate rotation: answers lost to them.
 * Those outside every fault are reported apart (lateAdmissions): on a machine loaded past what it can
 * serve, a webhook answers after the API server's timeout, which no rule of the add-on's can prevent;
 * what they cost the Jobs, rules 1 and 2 judge.
 */
function admissionsLost(recorded: Recorded): Violation[] {
  return failedAdmissions(recorded).filter(lostToRollOrRotation).map((call) => call.violation);
}

/** The failed calls outside the faults that excuse them and outside any rolling restart or rotation: late answers, for the report. */
export function lateAdmissions(recorded: Recorded): Violation[] {
  return failedAdmissions(recorded).filter((call) => !lostToRollOrRotation(call)).map((call) => call.violation);
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
  const writes = recorded.audit.filter((event) => users.has(event.user?.username ?? '') && WRITES.has(event.verb) && code(event) < 400);
  const podOfCrr = new Map(recorded.pods.flatMap((pod) => (pod.metadata?.uid ? [[key(pod.metadata.namespace ?? '', crrName(pod.metadata.uid)), podKey(pod)] as const] : [])));
  const stops = new Map<string, Stop[]>();
  for (const write of writes) {
    const stop = stopOf(write);
    if (!stop) continue;
    const { namespace = '', name = '' } = write.objectRef ?? {};
    const pod = stop.by === 'crr' ? (podOfCrr.get(key(namespace, name)) ?? key(namespace, name)) : key(namespace, name);
    stops.set(pod, [...(stops.get(pod) ?? []), stop]);
  }
  for (const each of stops.values()) each.sort((a, b) => (auditMicros(a.write.requestReceivedTimestamp) ?? 0) - (auditMicros(b.write.requestReceivedTimestamp) ?? 0));
  return {
    jobs: new Map(recorded.jobs.map((job) => [key(job.metadata?.namespace ?? '', job.metadata?.name ?? ''), job])),
    pods: new Map(recorded.pods.map((pod) => [podKey(pod), pod])),
    podOfCrr,
    writes,
    stops,
  };
}

/**
 * The stop request a successful write of the add-on is, if it is one: an ephemeral container added
 * (the signal container), a ContainerRecreateRequest created, or a pod patch that writes a
 * container's image (in place of a sidecar on a virtual node, or to end one from outside).
 */
function stopOf(write: AuditEvent): Stop | undefined {
  const { resource, subresource } = write.objectRef ?? {};
  if (resource === CRR.plural) return write.verb === 'create' ? { write, by: 'crr', sidecars: [] } : undefined;
  if (resource !== 'pods' || write.verb !== 'patch') return undefined;
  const containers = patchedContainers(write.requestObject);
  if (subresource === 'ephemeralcontainers') {
    const sidecars = containers.flatMap(({ list, fields }) => (list === 'ephemeralContainers' && typeof fields.targetContainerName === 'string' ? [fields.targetContainerName] : []));
    return { write, by: 'signal', sidecars };
  }
  return !subresource && containers.some(({ list, fields }) => (list === 'containers' || list === 'initContainers') && 'image' in fields) ? { write, by: 'image', sidecars: [] } : undefined;
}

/**
 * The containers a pod patch writes, by the list of the spec they are in, each with the fields it
 * sets: from a JSON patch (the watcher's, src/watcher/pod-writes.ts: `/spec/containers/1/image`,
 * `/spec/ephemeralContainers/-`) or a merge patch (`{spec: {containers: [...]}}`).
 */
function patchedContainers(body: unknown): Array<{ list: string; fields: Record<string, unknown> }> {
  const lists = new Set(['containers', 'initContainers', 'ephemeralContainers']);
  if (!Array.isArray(body)) {
    return Object.entries(asRecord(asRecord(body).spec)).flatMap(([list, items]) => (lists.has(list) && Array.isArray(items) ? items.map((item) => ({ list, fields: asRecord(item) })) : []));
  }
  return body.flatMap((operation) => {
    const { op, path, value } = asRecord(operation);
    const [, list = '', item, field] = /^\/spec\/([^/]+)(?:\/(\d+|-)(?:\/([^/]+))?)?$/.exec(typeof path === 'string' ? path : '') ?? [];
    if ((op !== 'add' && op !== 'replace') || !lists.has(list)) return [];
    if (field !== undefined) return [{ list, fields: { [field]: value } }];
    if (item !== undefined) return [{ list, fields: asRecord(value) }];
    return Array.isArray(value) ? value.map((each) => ({ list, fields: asRecord(each) })) : [];
  });
}

/** The metadata of a request's body (a creation's object), when the audit log holds the body. */
function requestMetadata(event: AuditEvent): V1ObjectMeta | undefined {
  const metadata = asRecord(event.requestObject).metadata;
  return metadata === undefined ? undefined : asRecord(metadata);
}

/** Whom a Lease write leaves holding the Lease, as its body says ('' for a release); undefined without the body. */
function leaseHolder(write: AuditEvent): string | undefined {
  const holder = asRecord(asRecord(write.requestObject).spec).holderIdentity;
  return typeof holder === 'string' || holder === null ? (holder ?? '') : undefined;
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

/** A value of a request's body read as an object: {} when it is none. */
const asRecord = (value: unknown): Record<string, unknown> => (typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {});
/** The HTTP status the API server answered a request with; 0 when the log has none. */
const code = (event: AuditEvent): number => event.responseStatus?.code ?? 0;

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
