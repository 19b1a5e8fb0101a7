// The story of one pod, told from what the add-on leaves on objects: which containers are
// sidecars and why, the trigger rule, what the watcher did and when, what is awaited now, and
// what the user can do; or, for a pod the add-on does not manage, why not. Pure: the policy's
// own decisions (classifyContainers, decide, inspectObject) explain, nothing is re-derived, and
// what the watcher did is read from the codes of its events (their `action`), never their words.
import type { CoreV1Event, V1Node, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import {
  CODES,
  CRR,
  DONE,
  ENV_WITH_IMAGE,
  MANAGED_LABEL,
  classifyContainers,
  decide,
  describeStop,
  podAnnotations,
  POD_ANNOTATIONS,
  errorsOf,
  exitCodesByName,
  explainRestart,
  formatFinding,
  inspectObject,
  markerEntries,
  migratedSidecars,
  strippedNativeSidecars,
  nodeKindOf,
  restartOfContainerAt,
  restartPolicyOf,
  setsOwnRestartPolicy,
  stopRoute,
  TERMINATED_CONDITION,
  describeStopRecord,
  isCode,
  readStopRecord,
  stopRecord,
  type Code,
  type ContainerRole,
  type Decision,
  type IgnoreCode,
  type StopRecord,
  type WaitCode,
} from '../policy/index.ts';
import { RULES } from '../policy/rules.ts';
import { SERVE_FLAGS } from '../config.ts';

export type PodState = 'waiting for main' | 'stopping' | 'stopped' | 'failed' | 'not managed';

/** What a sidecar is, or will be, stopped by: `kill` until it is known whether crr or signal. */
export type Mechanism = 'crr' | 'signal' | 'kill' | 'image' | 'none';

/** A read that may be refused: the object, or what permission was missing. */
export type Readable<T> = { value: T } | { missing: string };

/** The add-on's webhook registration, as far as it could be read. */
export interface WebhookView {
  /** Whether a mutating webhook of sidecar-terminator is registered. */
  registered: boolean;
  /** Whether its namespaceSelector leaves the pod's namespace out. */
  namespaceExcluded: boolean;
}

export interface PodFacts {
  pod: V1Pod;
  /** undefined: the pod is not on a node yet, or its node is gone. */
  node: Readable<V1Node | undefined>;
  /** The add-on's events about this pod. */
  events: Readable<CoreV1Event[]>;
  /** The pod's ContainerRecreateRequest; undefined when there is none or the cluster has no Kruise. */
  crr: Readable<CrrView | undefined>;
  /** Only looked up for pods without the managed label. */
  webhook?: Readable<WebhookView>;
  now: Date;
}

export interface CrrView {
  name: string;
  containers: string[];
  createdAt?: string;
  /** Kruise's status.phase: Pending, Recreating, Completed. */
  phase?: string;
}

export interface ContainerStory {
  name: string;
  role: 'main' | 'sidecar';
  /** The marker env lines that make it a sidecar (or that are there without making it one). */
  markers: string[];
  /** running, exited N at T, waiting (reason). */
  status: string;
  /** Sidecars: how they are stopped on this node. */
  mechanism?: Mechanism;
}

export interface Action {
  /** ISO time, when known. */
  time?: string;
  what: string;
}

export interface PodStory {
  namespace: string;
  pod: string;
  job?: string;
  node?: string;
  nodeKind: 'normal' | 'virtual' | 'unknown';
  /** The managed label's value, if any. */
  managed?: string;
  state: PodState;
  /** The code (src/policy/codes.ts) that explains the state: the watcher's decision, or the warning it reported last. */
  code?: Code;
  /** ISO time the state began: the pod's start, the last main container's exit, or the last sidecar's. */
  since?: string;
  /** The pod's mechanisms, one per kind of sidecar (`signal,image`). */
  mechanism: string;
  lastEvent?: { time?: string; type: string; reason: string; code?: Code; message: string };
  restartPolicy: string;
  containers: ContainerStory[];
  /** The trigger rule that applies. */
  trigger: string;
  actions: Action[];
  /** What is awaited now. */
  waitingFor?: string;
  /** Why the add-on does not manage the pod. */
  notManaged: string[];
  advice: string[];
  /** What could not be read, as missing permissions. */
  limits: string[];
  /**
   * How each main container and each sidecar ended, once the sidecars have stopped: the record the
   * watcher wrote in the SidecarTerminated condition when the pod ended, else read from the pod now.
   */
  result?: StopRecord;
}

/** The warnings that come with the end of a sidecar from outside its PID namespace (src/policy/stop-plan.ts). */
const ENDED_FROM_OUTSIDE: ReadonlySet<Code> = new Set(['sigterm-unhandled', 'signal-ignored', 'signal-failed', 'signal-not-started', 'signal-user-unknown', 'crr-not-done']);

/** The waits on the main containers: the watcher has nothing to do yet. */
const MAIN_WAITS: ReadonlySet<WaitCode | IgnoreCode> = new Set(['mains-running', 'main-restarting', 'pod-not-started']);

/** The code of an event the watcher wrote; undefined for one without (an earlier version's). */
export function eventCode(event: CoreV1Event | undefined): Code | undefined {
  return isCode(event?.action) ? event.action : undefined;
}

export function podStory(facts: PodFacts): PodStory {
  const { pod } = facts;
  const spec = pod.spec ?? { containers: [] };
  const managed = pod.metadata?.labels?.[MANAGED_LABEL];
  const node = 'value' in facts.node ? facts.node.value : undefined;
  // Unknown: not readable, not scheduled yet, or gone.
  const nodeKind = node ? nodeKindOf(node) : 'unknown';
  const events = 'value' in facts.events ? sortByTime(facts.events.value) : [];
  const crr = 'value' in facts.crr ? facts.crr.value : undefined;
  const roles = classifyContainers(spec, podAnnotations(pod));
  const exitCodes = exitCodesByName(pod);
  const limits = [facts.node, facts.events, facts.crr, facts.webhook].flatMap((read) => (read && 'missing' in read ? [read.missing] : []));
  const mechanisms = new Map(roles.filter((r) => r.role === 'sidecar').map((r) => [r.name, mechanismOf(r, nodeKind, pod, events, crr)]));
  const restartPolicy = restartPolicyOf(spec) ?? String(spec.restartPolicy);
  const last = events.at(-1);

  const story: PodStory = {
    namespace: pod.metadata?.namespace ?? '',
    pod: pod.metadata?.name ?? '',
    ...optional('job', pod.metadata?.ownerReferences?.find((owner) => owner.kind === 'Job')?.name),
    ...optional('node', spec.nodeName),
    nodeKind,
    ...optional('managed', managed),
    state: 'not managed',
    mechanism: [...new Set(mechanisms.values())].join(',') || '-',
    ...(last ? { lastEvent: { ...optional('time', eventTime(last)), type: last.type ?? '', reason: last.reason ?? '', ...optional('code', eventCode(last)), message: last.message ?? '' } } : {}),
    restartPolicy,
    containers: roles.map((role) => containerStory(role, pod, mechanisms.get(role.name))),
    trigger: triggerRule(restartPolicy, ownRestartPolicies(spec, roles)),
    actions: actionsOf(pod, events, crr, roles),
    notManaged: [],
    advice: [],
    limits,
  };

  if (managed === undefined) return withoutLabel(story, facts);
  // A pod is judged on a normal node when its node is unknown: the note in limits says so.
  const decision = decide(pod, nodeKind === 'virtual' ? node : undefined);
  const warnings = events.filter((event) => event.type === 'Warning');
  const lastMainExit = latest(roles.filter((r) => r.role === 'main').map((r) => finishedAt(pod, r.name)));
  const lastSidecarExit = latest(roles.filter((r) => r.role === 'sidecar').map((r) => finishedAt(pod, r.name)));

  if (managed === DONE || decision.outcome === 'finished') {
    const result = readStopRecord(pod) ?? stopRecord(pod, { crr: new Set(crr?.containers ?? []), quickExitImages: [SERVE_FLAGS.quickExitImage.default] });
    // Stopped, but a stopped sidecar's exit code failed the pod: the watcher's event says how, and what to change.
    const exitFailed = events.find((event) => eventCode(event) === 'sidecar-exit-failed-pod');
    if (exitFailed) return { ...story, state: 'stopped', code: 'sidecar-exit-failed-pod', ...optional('since', lastSidecarExit), advice: [`The pod failed by a stopped sidecar's exit code: ${exitFailed.message ?? ''}`], result };
    return { ...story, state: 'stopped', code: 'sidecars-stopped', ...optional('since', lastSidecarExit), result };
  }
  if (decision.outcome === 'ignore' || (decision.outcome === 'wait' && MAIN_WAITS.has(decision.code))) {
    if (decision.outcome === 'ignore' && !MAIN_WAITS.has(decision.code)) {
      return { ...story, state: 'failed', code: decision.code, waitingFor: `nothing: the watcher ignores this pod (${CODES[decision.code].meaning})`, advice: ignoredAdvice(decision.code) };
    }
    return {
      ...story,
      state: 'waiting for main',
      code: decision.code,
      ...optional('since', pod.status?.startTime ? iso(pod.status.startTime) : undefined),
      waitingFor: mainWait(pod, roles, exitCodes, decision),
      advice: [`Nothing to do for the sidecars: they are stopped once the main containers are done (${story.trigger}). To see what a main container is doing: kubectl logs -n ${story.namespace} ${story.pod} -c ${roles.find((r) => r.role === 'main')?.name ?? 'MAIN'}`],
    };
  }
  const cannotStop = decision.outcome === 'act' ? decision.actions.flatMap((a) => (a.type === 'cannotStop' ? [a] : [])) : [];
  const lastWarning = last?.type === 'Warning' ? eventCode(last) : undefined;
  // A warning that comes with the sidecar's end from outside: it is stopping, through the kubelet.
  const ending = lastWarning !== undefined && ENDED_FROM_OUTSIDE.has(lastWarning);
  const failed = cannotStop.length > 0 || (warnings.length > 0 && last?.type === 'Warning' && !ending);
  const running = roles.filter((r) => r.role === 'sidecar' && !exitCodes.has(r.name));
  const since = lastMainExit ?? eventTime(events[0]);
  const warning = failed || ending ? lastWarning : undefined;
  const code: Code | undefined = cannotStop[0]?.code ?? (failed || ending ? warning : decision.outcome === 'wait' ? decision.code : 'mains-done');
  return {
    ...story,
    state: failed ? 'failed' : 'stopping',
    ...optional('code', code),
    ...optional('since', since),
    waitingFor: failed
      ? cannotStop.length > 0
        ? `nothing: ${cannotStop.map((a) => `sidecar ${a.container} cannot be stopped on this node`).join('; ')}`
        : `the watcher, after it reported a problem: ${last?.message}`
      : ending
        ? `the kubelet to end the sidecar from outside: ${last?.message}`
        : running.map((sidecar) => stopWait(sidecar, mechanisms.get(sidecar.name)!, pod, crr, events)).join('; ') || 'the sidecars to exit',
    advice: stoppingAdvice(story, running, mechanisms, pod, warning, cannotStop.length > 0, events.length === 0),
  };
}

/** A pod without the managed label: why the webhook did not label it. */
function withoutLabel(story: PodStory, facts: PodFacts): PodStory {
  const { pod } = facts;
  const spec = pod.spec ?? { containers: [] };
  const reasons: string[] = [];
  const advice: string[] = [];
  const moved = migratedSidecars(pod.metadata?.annotations ?? {});
  const stripped = moved.length > 0 ? strippedNativeSidecars(spec, pod.metadata?.annotations ?? {}) : [];
  if (stripped.length > 0) {
    // Admitted past the validating webhook (down, with failurePolicy Ignore): a plain init container that never finishes.
    const names = stripped.map(({ name }) => name).join(', ');
    return {
      ...story,
      state: 'failed',
      notManaged: [`its sidecars ${names} were moved to native sidecars when it was created, but lost restartPolicy: Always afterwards: as plain init containers they never finish, and the main containers never start`],
      advice: [
        `A mutating webhook that rewrote the init containers after the native-sidecars webhook's last call dropped the field (one built on a client library older than native sidecars), or the API server's SidecarContainers feature gate is off: upgrade or exclude that webhook, or set --native-sidecars=none (chart value admission.nativeSidecars), then replace the pod${story.job ? ` (kubectl delete job -n ${story.namespace} ${story.job}, then create it again)` : ''}.`,
      ],
    };
  }
  if (moved.length > 0) {
    // Nothing for the watcher: the kubelet stops native sidecars itself.
    return { ...story, state: 'not managed', notManaged: [`its sidecars ${moved.join(', ')} were moved to native sidecars (init containers with restartPolicy: Always) when it was created: the kubelet stops them once the main containers are done`], advice: [] };
  }
  const policy = restartPolicyOf(spec);
  const sidecars = story.containers.filter((c) => c.role === 'sidecar');
  if (sidecars.length === 0) {
    const inert = story.containers.filter((c) => c.markers.length > 0);
    reasons.push(
      inert.length > 0
        ? `no container is a sidecar: the markers on ${inert.map((c) => c.name).join(', ')} do not make one (KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT must be "true", or ${ENV_WITH_IMAGE} an image)`
        : `no container is marked as a sidecar (env KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true" or KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE, or its name in the pod annotation ${POD_ANNOTATIONS.sidecars})`,
    );
    advice.push('Mark the sidecar: add env KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT: "true" to it in the Job template.');
  }
  if (policy !== 'Never' && policy !== 'OnFailure') {
    reasons.push(`restartPolicy is ${spec.restartPolicy ?? 'unset, which means Always'}: sidecars are stopped only in pods whose restartPolicy is Never or OnFailure`);
    advice.push('Set restartPolicy: Never or OnFailure in the pod template (Jobs require one of them).');
  }
  const inspection = inspectObject({ ...pod, apiVersion: 'v1', kind: 'Pod' }, []);
  const errors = inspection ? errorsOf(inspection.findings) : [];
  if (errors.length > 0) {
    reasons.push(`its sidecar configuration has ${errors.length === 1 ? 'an error' : `${errors.length} errors`}, so the webhook denies such a pod (or, with --enforcement warn, admits it without the label): ${errors.map(formatFinding).join('; ')}`);
    advice.push(...new Set(errors.map((f) => `${f.field}: ${RULES[f.rule].fix}`)));
  }
  if (reasons.length === 0) {
    const webhook = facts.webhook && 'value' in facts.webhook ? facts.webhook.value : undefined;
    if (webhook && !webhook.registered) reasons.push('no sidecar-terminator mutating webhook is registered in the cluster: the add-on is not installed, or its webhook configuration was removed');
    else if (webhook?.namespaceExcluded) reasons.push(`the namespace ${story.namespace} is excluded from the webhooks (the add-on's own namespace, kube-system and --excluded-namespaces), so nothing labels its pods`);
    else {
      reasons.push(
        'the webhook did not label it although it would: the webhook was unreachable when the pod was created (failurePolicy Ignore) and the sweeper has not labelled it yet, or the pod predates the add-on',
      );
      advice.push('The watcher\'s sweeper labels such running pods every --sweep-interval (5m by default); check that the watcher runs and look at its logs.');
    }
    if (webhook?.namespaceExcluded) advice.push('Run the Job in a namespace the webhooks serve, or remove the namespace from webhook.excludedNamespaces.');
  }
  return { ...story, state: 'not managed', notManaged: reasons, advice };
}

function mechanismOf(role: ContainerRole, nodeKind: PodStory['nodeKind'], pod: V1Pod, events: CoreV1Event[], crr: CrrView | undefined): Mechanism {
  const mechanism = stopRoute(role.markers, nodeKind === 'virtual' ? 'virtual' : 'normal');
  if (mechanism === undefined) return 'none';
  if (mechanism === 'image') return 'image';
  if (crr?.containers.includes(role.name)) return 'crr';
  if (pod.spec?.ephemeralContainers?.some((c) => c.targetContainerName === role.name)) return 'signal';
  // The request itself may be out of sight (no permission to list them): the event that announced it names it as its related object.
  if (events.some((e) => eventCode(e) === 'stop-requested' && e.related?.kind === CRR.kind)) return 'crr';
  return 'kill';
}

function containerStory(role: ContainerRole, pod: V1Pod, mechanism: Mechanism | undefined): ContainerStory {
  const raw = pod.spec?.containers?.[role.index];
  const markers = raw
    ? markerEntries(raw).map((entry) => `${entry.name}=${entry.fromValueFrom ? '(valueFrom)' : JSON.stringify(entry.value ?? '')}`)
    : [];
  return { name: role.name, role: role.role, markers, status: containerStatus(pod, role.name), ...optional('mechanism', mechanism) };
}

function containerStatus(pod: V1Pod, name: string): string {
  const status = pod.status?.containerStatuses?.find((s) => s.name === name);
  if (!status?.state) return 'not started';
  const restarts = status.restartCount ? `, ${status.restartCount} restart${status.restartCount === 1 ? '' : 's'}` : '';
  const { running, terminated, waiting } = status.state;
  if (terminated) return `exited ${terminated.exitCode}${terminated.reason && terminated.reason !== 'Completed' ? ` (${terminated.reason})` : ''} at ${iso(terminated.finishedAt)}${restarts}`;
  if (running) return `running since ${iso(running.startedAt)}${restarts}`;
  return `waiting (${waiting?.reason ?? 'unknown'}${waiting?.message ? `: ${waiting.message}` : ''})${restarts}`;
}

function triggerRule(restartPolicy: string, ownPolicies: string[]): string {
  const one = ownPolicies.length === 1;
  const own = ownPolicies.length === 0
    ? ''
    : `; ${ownPolicies.join(', ')} ${one ? 'sets its' : 'set their'} own restartPolicy, which decides instead, with ${one ? 'its' : 'their'} restartPolicyRules, whether the kubelet restarts ${one ? 'it' : 'them'}: the sidecars keep running for a restart`;
  if (restartPolicy === 'Never') return `restartPolicy Never: the sidecars are stopped once every main container has exited, whatever its exit code${own}`;
  if (restartPolicy === 'OnFailure') return `restartPolicy OnFailure: the sidecars are stopped once every main container has exited 0 (a main container that fails is restarted, and the sidecars keep running for it)${own}`;
  return `restartPolicy ${restartPolicy}: no trigger applies (only Never and OnFailure pods have their sidecars stopped)`;
}

/** The main containers that set their own restartPolicy (Kubernetes 1.35+), which the kubelet reads in place of the pod's. */
function ownRestartPolicies(spec: V1PodSpec, roles: ContainerRole[]): string[] {
  return roles.filter((role) => role.role === 'main' && setsOwnRestartPolicy(spec.containers[role.index] ?? {})).map((role) => role.name);
}

function actionsOf(pod: V1Pod, events: CoreV1Event[], crr: CrrView | undefined, roles: ContainerRole[]): Action[] {
  const actions: Action[] = [];
  for (const event of events) {
    const count = (event.count ?? 1) > 1 ? ` (${event.count} times)` : '';
    actions.push({ ...optional('time', eventTime(event)), what: `event ${event.type} ${event.reason}: ${event.message}${count}` });
  }
  if (crr) {
    actions.push({ ...optional('time', crr.createdAt), what: `ContainerRecreateRequest ${crr.name} for ${crr.containers.join(', ')}${crr.phase ? `, phase ${crr.phase}` : ''}` });
  }
  for (const ephemeral of pod.spec?.ephemeralContainers ?? []) {
    const status = pod.status?.ephemeralContainerStatuses?.find((s) => s.name === ephemeral.name)?.state;
    const started = status?.terminated?.startedAt ?? status?.running?.startedAt;
    const outcome = status?.running ? ', running' : status?.waiting ? `, waiting (${status.waiting.reason})` : '';
    actions.push({ ...optional('time', started ? iso(started) : undefined), what: `ephemeral container ${ephemeral.name} targeting ${ephemeral.targetContainerName ?? '(none)'} started${outcome}` });
    const { steps, rest } = timedLines(status?.terminated?.message ?? '');
    for (const step of steps) actions.push({ time: step.time, what: `${ephemeral.name}: ${step.what}` });
    if (status?.terminated) {
      const finished = status.terminated.finishedAt ? iso(status.terminated.finishedAt) : undefined;
      actions.push({ ...optional('time', finished), what: `ephemeral container ${ephemeral.name} exited ${status.terminated.exitCode}${rest ? `: ${rest}` : ''}` });
    }
  }
  for (const role of roles) {
    if (role.role === 'sidecar' && role.markers.quickExitImage !== undefined && role.image === role.markers.quickExitImage) {
      actions.push({ what: `sidecar ${role.name} runs its quick-exit image ${role.image} (image replaced in place)` });
    }
    const before = pod.status?.containerStatuses?.find((s) => s.name === role.name)?.lastState?.terminated;
    if (role.role === 'sidecar' && before?.finishedAt) {
      actions.push({ time: iso(before.finishedAt), what: `sidecar ${role.name} exited ${before.exitCode}${before.reason && before.reason !== 'Completed' ? ` (${before.reason})` : ''}, and the kubelet started it again${role.image ? ` with ${role.image}` : ''}` });
    }
  }
  for (const role of roles.filter((r) => r.role === 'sidecar')) {
    const exited = finishedAt(pod, role.name);
    if (exited) actions.push({ time: exited, what: `sidecar ${role.name} exited ${exitCodesByName(pod).get(role.name)}` });
  }
  // After the sidecars' exits: the stop record, written once they have ended, often in the same second.
  const condition = pod.status?.conditions?.find((c) => c.type === TERMINATED_CONDITION);
  if (condition) {
    const record = readStopRecord(pod);
    const what = record ? `stop record: ${describeStopRecord(record)}` : condition.message ?? '';
    const set = condition.lastTransitionTime ? iso(condition.lastTransitionTime) : undefined;
    // The record keeps the time the condition was first set (with the phase): it was written after the last sidecar's exit.
    const time = record ? latest([set, ...roles.filter((r) => r.role === 'sidecar').map((r) => finishedAt(pod, r.name))]) : set;
    actions.push({ ...optional('time', time), what: `condition ${TERMINATED_CONDITION}=${condition.status}: ${what}` });
  }
  if (pod.metadata?.labels?.[MANAGED_LABEL] === DONE) actions.push({ what: `label ${MANAGED_LABEL}=${DONE}: the watcher is done with the pod` });
  return actions.sort((a, b) => (a.time ?? '\uffff').localeCompare(b.time ?? '\uffff'));
}

/**
 * What a signal container wrote, one step a line, each led by its time (images/stop-sidecar); a
 * message of another form (an earlier signal container's, its log tail) is kept whole as `rest`.
 */
function timedLines(message: string): { steps: Action[]; rest: string } {
  const steps: Action[] = [];
  const rest: string[] = [];
  for (const line of message.trim().split('\n').filter(Boolean)) {
    const timed = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (.*)$/.exec(line);
    if (timed) steps.push({ time: timed[1]!, what: timed[2]! });
    else rest.push(line);
  }
  return { steps, rest: rest.join(' ') };
}

/** The main containers not done: still running, or exited and to be restarted by the kubelet (with the policy's explanation). */
function mainWait(pod: V1Pod, roles: ContainerRole[], exitCodes: Map<string, number>, decision: Decision): string {
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

function stopWait(sidecar: ContainerRole, mechanism: Mechanism, pod: V1Pod, crr: CrrView | undefined, events: CoreV1Event[]): string {
  if (mechanism === 'image') {
    return sidecar.image === sidecar.markers.quickExitImage
      ? `kubelet to restart ${sidecar.name} with its quick-exit image ${sidecar.image}, which should exit 0 at once (${containerStatus(pod, sidecar.name)})`
      : `the watcher to replace the image of ${sidecar.name} with ${sidecar.markers.quickExitImage}`;
  }
  if (mechanism === 'crr') return `kruise-daemon on ${pod.spec?.nodeName ?? 'the node'} to stop ${sidecar.name} (ContainerRecreateRequest ${crr?.name ?? ''}${crr?.phase ? `, phase ${crr.phase}` : ''})`;
  if (mechanism === 'signal') return `${sidecar.name} to exit after the ${describeStop(sidecar.markers.stop)} its ephemeral container sent (or to be ended from outside once its grace period is over)`;
  return events.length === 0
    ? `the watcher to stop ${sidecar.name}: no action recorded yet`
    : `the watcher's stop of ${sidecar.name} to take effect`;
}

function stoppingAdvice(story: PodStory, running: ContainerRole[], mechanisms: Map<string, Mechanism>, pod: V1Pod, warning: Code | undefined, cannotStop: boolean, nothingRecorded: boolean): string[] {
  const advice: string[] = [];
  if (cannotStop) {
    advice.push(`Give each sidecar a quick-exit image (env ${ENV_WITH_IMAGE}), the only way to stop a container on a virtual-kubelet node.`);
    if (story.job) advice.push(`This pod cannot finish by itself: once the Job's template is fixed, replace the Job (kubectl delete job -n ${story.namespace} ${story.job}, then create it again).`);
  }
  if (warning === 'signal-ignored' || warning === 'sigterm-unhandled') {
    advice.push('The sidecar is being ended from outside. To let it exit by itself in time: give it a SIGTERM handler, run it under an init that forwards signals (tini, dumb-init), or stop it by its own shutdown endpoint (docs/sidecars.md).');
  }
  if (warning === 'stop-failed') advice.push('The watcher retries; its logs say more.');
  for (const sidecar of running) {
    const status = pod.status?.containerStatuses?.find((s) => s.name === sidecar.name)?.state?.waiting?.reason;
    if (mechanisms.get(sidecar.name) === 'image' && (status === 'ErrImagePull' || status === 'ImagePullBackOff')) {
      advice.push(`The quick-exit image ${sidecar.markers.quickExitImage} of ${sidecar.name} cannot be pulled (${status}): fix the reference in ${ENV_WITH_IMAGE}.`);
    }
    if (mechanisms.get(sidecar.name) === 'crr') advice.push(`Check that kruise-daemon runs on ${pod.spec?.nodeName ?? 'the node'}, and the request: kubectl get containerrecreaterequests -n ${story.namespace} -o yaml`);
  }
  if (nothingRecorded) advice.push('The watcher has recorded nothing for this pod: check that it runs (its Deployment, usually <release>-watcher) and read its logs.');
  if (advice.length === 0) advice.push('Usually nothing: the sidecars are stopping. If this lasts, read the events and the watcher\'s logs.');
  return advice;
}

function ignoredAdvice(code: IgnoreCode): string[] {
  if (code === 'restart-policy-always') return ['Set restartPolicy: Never or OnFailure.'];
  return [];
}

function finishedAt(pod: V1Pod, container: string): string | undefined {
  const time = pod.status?.containerStatuses?.find((s) => s.name === container)?.state?.terminated?.finishedAt;
  return time ? iso(time) : undefined;
}

function latest(times: Array<string | undefined>): string | undefined {
  return times.filter((t): t is string => t !== undefined).sort().at(-1);
}

export function eventTime(event: CoreV1Event | undefined): string | undefined {
  const time = event?.lastTimestamp ?? event?.eventTime ?? event?.firstTimestamp ?? event?.metadata?.creationTimestamp;
  return time ? iso(time) : undefined;
}

function sortByTime(events: CoreV1Event[]): CoreV1Event[] {
  return [...events].sort((a, b) => (eventTime(a) ?? '').localeCompare(eventTime(b) ?? ''));
}

/** A time as status shows it; client-node gives Dates, a parsed JSON gives strings. */
export function iso(time: Date | string | undefined): string {
  // Kubernetes times have whole seconds.
  return time === undefined ? '?' : new Date(time).toISOString().replace('.000Z', 'Z');
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined || value === '' ? {} : { [key]: value }) as { [P in K]?: V };
}
