// The ledger of a robustness run (bench/robustness/ledger.ts) on a run recorded by hand: a clean
// one, in which nothing is a violation, and for each rule the same run broken once in one place.
import type { CoreV1Event, V1Container, V1ContainerStatus, V1Job, V1ObjectReference, V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { checkLedger, lateAdmissions, type Outcome, type Recorded, type Rule } from '../../bench/robustness/ledger.ts';
import { COMPONENT, EVENT_REASONS, MANAGED, MANAGED_LABEL, PHASE_SET, TERMINATED_CONDITION, WEBHOOK_NAMES, CONDITION_REASONS, crrName, recordCondition } from '../../src/policy/index.ts';
import type { AuditEvent } from '../support/audit.ts';
import { FINISHED, MAINS_FINISHED_AT, QUICK_EXIT, containerStatus, ignoreExitCodeSidecar, imageSidecar, jobPod, killSidecar, main, type PodOptions } from '../support/pods.ts';

const NAMESPACE = 'robustness';
const ADDON_NAMESPACE = 'sidecar-terminator';
const [WATCHER_A, WATCHER_B, WEBHOOK] = ['watcher-a', 'watcher-b', 'webhook-a'];

/** A time `seconds` after the main containers finished (jobPod's FINISHED), as client-node reads one. */
const after = (seconds: number) => new Date(MAINS_FINISHED_AT + seconds * 1000);
/** A time of that day as the audit log writes it (microseconds): `received('00:01:00.400000')`. */
const received = (time: string) => `${FINISHED.slice(0, 11)}${time}Z`;

function job(name: string, containers: V1Container[], outcome: Outcome | undefined, restartPolicy = 'Never'): V1Job {
  return {
    metadata: { name, namespace: NAMESPACE, uid: `job-${name}` },
    spec: { template: { spec: { restartPolicy, containers } } },
    status: outcome ? { conditions: [{ type: outcome, status: 'True', lastTransitionTime: after(5) }] } : {},
  };
}

/** The one pod of Job `name` (named `name`-a, uid `uid-name`), with these container statuses. */
function pod(name: string, containers: V1Container[], statuses: V1ContainerStatus[], options: PodOptions = {}): V1Pod {
  const owner = { apiVersion: 'batch/v1', kind: 'Job', name, uid: `job-${name}`, controller: true };
  const built = jobPod(containers, {}, { phase: 'Succeeded', ...options, metadata: { name: `${name}-a`, namespace: NAMESPACE, uid: `uid-${name}`, ownerReferences: [owner], ...options.metadata } });
  built.status!.containerStatuses = statuses;
  return built;
}

/** A container that ended with `exitCode` at after(seconds). */
const ended = (name: string, exitCode: number, seconds: number, extra: Partial<V1ContainerStatus> = {}) =>
  containerStatus(name, exitCode, { state: { terminated: { exitCode, finishedAt: after(seconds) } }, ...extra });

function event(involvedObject: V1ObjectReference, reason: string, message: string, extra: Partial<CoreV1Event> = {}): CoreV1Event {
  return { metadata: { name: `${involvedObject.name}.${reason}`, namespace: NAMESPACE }, involvedObject: { namespace: NAMESPACE, ...involvedObject }, reason, message, count: 1, ...extra };
}

/** The add-on's announcement of a stop on the pod. */
const announced = (pod: string) => event({ kind: 'Pod', name: pod }, EVENT_REASONS.stopping, 'Stopping sidecars', { source: { component: COMPONENT } });

/** The Job controller's event for a pod the API server refused because it could not call a webhook. */
const refused = (job: string, at: Date, count = 1) =>
  event({ kind: 'Job', name: job }, 'FailedCreate', `Error creating: Internal error occurred: failed calling webhook "${WEBHOOK_NAMES.mutate}": failed to call webhook: connection refused`, {
    firstTimestamp: at,
    lastTimestamp: at,
    count,
  });

/**
 * The Job controller's creation of a pod of Job `job` that the API server admitted without calling
 * the mutating webhook, as its audit annotation says: its name is generated, so the audit log has
 * it only as the body's generateName (objectRef.name is empty).
 */
const failedOpen = (job: string, time: string): AuditEvent => ({
  ...write('system:kube-controller-manager', 'create', { resource: 'pods' }, time, 201, { metadata: { generateName: `${job}-`, labels: { 'batch.kubernetes.io/job-name': job, 'job-name': job } } }),
  annotations: { 'failed-open.mutation.webhook.admission.k8s.io/round_0_index_0': WEBHOOK_NAMES.mutate },
});

/** A Job created (kubectl apply) that the API server admitted without calling the validating webhook. */
const jobFailedOpen = (job: string, time: string): AuditEvent => ({
  ...write('kubernetes-admin', 'create', { resource: 'jobs', name: job }, time, 201, { metadata: { name: job } }),
  annotations: { 'failed-open.validating.webhook.admission.k8s.io/round_0_index_0': WEBHOOK_NAMES.validate },
});

function write(user: string, verb: string, objectRef: AuditEvent['objectRef'], time: string, code = 200, requestObject?: unknown): AuditEvent {
  return { verb, user: { username: user }, objectRef: { namespace: NAMESPACE, ...objectRef }, requestReceivedTimestamp: received(time), responseStatus: { code }, ...(requestObject !== undefined ? { requestObject } : {}) };
}

/** A write of the watcher's Lease by `user`, leaving `holder` holding it ('' releases it). */
const leaseWrite = (user: string, verb: string, time: string, code = 200, holder = user): AuditEvent =>
  write(user, verb, { resource: 'leases', namespace: ADDON_NAMESPACE, name: 'sidecar-terminator-watcher' }, time, code, { metadata: { name: 'sidecar-terminator-watcher' }, spec: { holderIdentity: holder, leaseDurationSeconds: 6 } });

/** The watcher's patch adding the signal container of `sidecar` (src/watcher/pod-writes.ts). */
const signalPatch = (user: string, pod: string, sidecar: string, time: string, code = 200): AuditEvent =>
  write(user, 'patch', { resource: 'pods', subresource: 'ephemeralcontainers', name: pod }, time, code, [
    { op: 'test', path: '/metadata/uid', value: `uid-${pod}` },
    { op: 'add', path: '/metadata/resourceVersion', value: '41' },
    { op: 'add', path: '/spec/ephemeralContainers', value: [{ name: `stop-${sidecar}`, image: 'stop-sidecar', targetContainerName: sidecar }] },
  ]);

/** The watcher's patch replacing the image of the pod's second container (src/watcher/pod-writes.ts). */
const imagePatch = (user: string, pod: string, container: string, time: string): AuditEvent =>
  write(user, 'patch', { resource: 'pods', name: pod }, time, 200, [
    { op: 'test', path: '/metadata/uid', value: `uid-${pod}` },
    { op: 'add', path: '/metadata/resourceVersion', value: '42' },
    { op: 'test', path: '/spec/containers/1/name', value: container },
    { op: 'replace', path: '/spec/containers/1/image', value: QUICK_EXIT },
  ]);

/**
 * A run with nothing wrong: four Jobs, one per way of stopping (a signal container, a
 * ContainerRecreateRequest, the phase set for ..._IGNORE_EXIT_CODE, an image replaced on a
 * virtual node), and a fifth whose ContainerRecreateRequest, made by watcher-a, was not acted on, so
 * that watcher-b, leader after a handover, signalled its sidecar; with the replicas' other writes,
 * and refused or unchecked creations only while a webhook replica or etcd was down. Built anew for
 * each test.
 */
function cleanRun(): Recorded {
  const signalled = pod('signal-1', [main(), killSidecar('proxy')], [ended('main', 0, 0), ended('proxy', 0, 2)], {
    spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'stop-sidecar', targetContainerName: 'proxy' }] },
  });
  const recreated = pod('crr-1', [main(), killSidecar('proxy')], [ended('main', 0, 0), ended('proxy', 0, 3)]);
  const handedOver = pod('handover-1', [main(), killSidecar('proxy')], [ended('main', 0, 0), ended('proxy', 0, 3)], {
    spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'stop-sidecar', targetContainerName: 'proxy' }] },
  });
  const phaseSet = pod('ignore-1', [main(), ignoreExitCodeSidecar('sql')], [ended('main', 1, 0), ended('sql', 137, 2)], { phase: 'Failed' });
  phaseSet.status!.conditions = [{ type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping, message: `${PHASE_SET}Failed: the main containers are done` }];
  // The kubelet killed the sidecar's own run for its new image (lastState), then ran the quick-exit image.
  const replaced = pod('image-1', [main(), imageSidecar('logs', QUICK_EXIT, { image: QUICK_EXIT })], [
    ended('main', 0, 0),
    ended('logs', 0, 2, { restartCount: 1, lastState: { terminated: { exitCode: 137, finishedAt: after(1) } } }),
  ]);
  return {
    expectations: [
      { namespace: NAMESPACE, name: 'signal-1', outcome: 'Complete', kind: 'sim-signal' },
      { namespace: NAMESPACE, name: 'crr-1', outcome: 'Complete', kind: 'real-crr' },
      { namespace: NAMESPACE, name: 'ignore-1', outcome: 'Failed', kind: 'sim-ignore-exit' },
      { namespace: NAMESPACE, name: 'image-1', outcome: 'Complete', kind: 'vk-image' },
      { namespace: NAMESPACE, name: 'handover-1', outcome: 'Complete', kind: 'real-crr' },
    ],
    jobs: [
      job('signal-1', [main(), killSidecar('proxy')], 'Complete'),
      job('crr-1', [main(), killSidecar('proxy')], 'Complete'),
      job('ignore-1', [main(), ignoreExitCodeSidecar('sql')], 'Failed'),
      job('image-1', [main(), imageSidecar('logs')], 'Complete'),
      job('handover-1', [main(), killSidecar('proxy')], 'Complete'),
    ],
    pods: [signalled, recreated, phaseSet, replaced, handedOver],
    events: [
      ...['signal-1-a', 'crr-1-a', 'ignore-1-a', 'image-1-a', 'handover-1-a'].map(announced),
      refused('signal-1', after(-45), 2),
      // Reported 8 s after etcd came back: a call made while it was stopped, timing out.
      refused('crr-1', after(-4)),
      event({ kind: 'Job', name: 'image-1' }, 'FailedCreate', 'Error creating: pods "image-1-b" is forbidden: exceeded quota', { lastTimestamp: after(-25) }),
    ],
    audit: [
      leaseWrite(WATCHER_A, 'create', '00:00:01.000000', 201),
      write(WATCHER_A, 'patch', { resource: 'pods', name: 'signal-1-a' }, '00:00:10.000000', 200, { metadata: { resourceVersion: '40', labels: { [MANAGED_LABEL]: MANAGED } } }),
      leaseWrite(WATCHER_A, 'update', '00:00:58.000000'),
      // watcher-b's attempt that the API server refused left watcher-a holding the Lease.
      leaseWrite(WATCHER_B, 'update', '00:00:58.500000', 409),
      write(WATCHER_A, 'create', { resource: 'events', name: 'signal-1-a.1' }, '00:01:00.300000', 201),
      signalPatch(WATCHER_A, 'signal-1-a', 'proxy', '00:01:00.400000'),
      imagePatch(WATCHER_A, 'image-1-a', 'logs', '00:01:00.420000'),
      write(WATCHER_A, 'create', { resource: 'containerrecreaterequests', name: crrName('uid-handover-1') }, '00:01:00.450000', 201),
      // watcher-a's term ends; watcher-b takes the Lease over.
      leaseWrite(WATCHER_B, 'update', '00:01:00.600000'),
      // A write of the leader's that the API server refused changed nothing.
      signalPatch(WATCHER_B, 'signal-1-a', 'proxy', '00:01:00.650000', 409),
      write(WATCHER_B, 'patch', { resource: 'pods', subresource: 'status', name: 'ignore-1-a' }, '00:01:00.700000'),
      write(WATCHER_B, 'create', { resource: 'containerrecreaterequests', name: crrName('uid-crr-1') }, '00:01:01.000000', 201),
      // The request watcher-a made for handover-1-a was not acted on: the new leader signals the sidecar.
      signalPatch(WATCHER_B, 'handover-1-a', 'proxy', '00:01:01.100000'),
      leaseWrite(WATCHER_B, 'update', '00:01:05.000000'),
      // watcher-b stops gracefully, releasing the Lease.
      leaseWrite(WATCHER_B, 'update', '00:01:08.000000', 200, ''),
      write(WEBHOOK, 'create', { resource: 'secrets', namespace: ADDON_NAMESPACE, name: 'sidecar-terminator-tls' }, '00:00:00.100000', 201),
      write(WEBHOOK, 'patch', { resource: 'validatingwebhookconfigurations', namespace: undefined, name: 'sidecar-terminator' }, '00:00:00.200000'),
      write(WEBHOOK, 'create', { resource: 'validatingadmissionpolicies', namespace: undefined, name: 'sidecar-terminator-watcher' }, '00:00:00.210000', 201),
      write(WEBHOOK, 'update', { resource: 'validatingadmissionpolicybindings', namespace: undefined, name: 'sidecar-terminator-webhook' }, '00:00:00.220000'),
      write(WEBHOOK, 'get', { resource: 'configmaps', name: 'settings' }, '00:00:00.300000'),
      write(WEBHOOK, 'patch', { resource: 'configmaps', name: 'settings' }, '00:00:00.400000', 403),
      // A pod and a Job admitted without the webhooks' answers (failurePolicy Ignore) while a webhook replica was killed.
      failedOpen('signal-1', '00:00:12.000000'),
      jobFailedOpen('image-1', '00:00:14.000000'),
    ],
    addonUsers: [WATCHER_A, WATCHER_B, WEBHOOK],
    addonNamespace: ADDON_NAMESPACE,
    webhookConfigNames: ['sidecar-terminator'],
    faults: [
      { kind: 'webhook-replica-sigkill', startedAt: after(-50).getTime(), healedAt: after(-40).getTime() },
      { kind: 'webhook-roll', startedAt: after(-30).getTime(), healedAt: after(-20).getTime() },
      { kind: 'etcd-sigstop', startedAt: after(-15).getTime(), healedAt: after(-12).getTime() },
      { kind: 'cert-rotate', startedAt: after(20).getTime(), healedAt: after(21).getTime() },
    ],
    finishBy: after(60).getTime(),
  };
}

const podNamed = (run: Recorded, name: string) => run.pods.find((each) => each.metadata?.name === name)!;
const statusOf = (run: Recorded, pod: string, container: string) => podNamed(run, pod).status!.containerStatuses!.find((each) => each.name === container)!;

t.test('a clean run has no violation', async (t) => {
  t.same(checkLedger(cleanRun()), []);
});

interface Breakage {
  rule: Rule;
  object: string;
  detail: RegExp;
  breakIt: (run: Recorded) => void;
}

const BREAKAGES: Record<string, Breakage> = {
  'a Job still running at the end': {
    rule: 'job-not-finished',
    object: 'job/robustness/crr-1',
    detail: /^real-crr: neither Complete nor Failed/,
    breakIt: (run) => (run.jobs[1]!.status = {}),
  },
  'a Job that ended after the bound': {
    rule: 'job-not-finished',
    object: 'job/robustness/crr-1',
    detail: /Complete at .*, 1\.0 s after the bound/,
    breakIt: (run) => (run.jobs[1]!.status!.conditions![0]!.lastTransitionTime = after(61)),
  },
  "a Job still running, its pod's status written while a quick-exit image cannot be pulled (no phase to judge yet)": {
    rule: 'job-not-finished',
    object: 'job/robustness/image-1',
    detail: /^vk-image: neither Complete nor Failed/,
    breakIt: (run) => {
      run.jobs[3]!.status = {};
      const pod = podNamed(run, 'image-1-a');
      pod.status!.phase = 'Running';
      pod.status!.containerStatuses![1] = containerStatus('logs', { waiting: 'ErrImagePull' });
      pod.status!.conditions = [{ type: TERMINATED_CONDITION, status: 'False', reason: CONDITION_REASONS.imageNotPulled, message: 'logs waits for its quick-exit image' }];
      run.audit.push(write(WATCHER_B, 'patch', { resource: 'pods', subresource: 'status', name: 'image-1-a' }, '00:01:01.000000'));
    },
  },
  'a Job not listed': {
    rule: 'job-not-finished',
    object: 'job/robustness/signal-1',
    detail: /not listed/,
    breakIt: (run) => run.jobs.shift(),
  },
  'a Job that failed where its mains succeeded': {
    rule: 'job-outcome',
    object: 'job/robustness/signal-1',
    detail: /^sim-signal: Failed \(BackoffLimitExceeded: .*\), expected Complete$/,
    breakIt: (run) => (run.jobs[0]!.status!.conditions = [{ type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded', message: 'Job has reached the specified backoff limit', lastTransitionTime: after(5) }]),
  },
  'two signal containers for one sidecar': {
    rule: 'stopped-twice',
    object: 'robustness/signal-1-a',
    detail: /^2 ephemeral containers target proxy$/,
    breakIt: (run) => podNamed(run, 'signal-1-a').spec!.ephemeralContainers!.push({ name: 'stop-proxy-2', image: 'stop-sidecar', targetContainerName: 'proxy' }),
  },
  'a write refused, sent by the old leader after the handover': {
    rule: 'stopped-twice',
    object: 'robustness/handover-1-a',
    detail: /^watcher-a patch pods\/ephemeralcontainers \(answered 409\) received at .*T00:01:01\.200000Z, while watcher-b held the Lease \(its write received at .*T00:01:00\.600000Z\)$/,
    breakIt: (run) => run.audit.push(signalPatch(WATCHER_A, 'handover-1-a', 'proxy', '00:01:01.200000', 409)),
  },
  'a ContainerRecreateRequest created again by the old leader after the handover': {
    rule: 'stopped-twice',
    object: 'robustness/crr-1-a',
    detail: /^2 ContainerRecreateRequests created; watcher-a create containerrecreaterequests \(answered 201\) received at .*T00:01:01\.200000Z, while watcher-b held the Lease/,
    breakIt: (run) => run.audit.push(write(WATCHER_A, 'create', { resource: 'containerrecreaterequests', name: crrName('uid-crr-1') }, '00:01:01.200000', 201)),
  },
  'a ContainerRecreateRequest created twice by the leader (the first deleted meanwhile)': {
    rule: 'stopped-twice',
    object: 'robustness/crr-1-a',
    detail: /^2 ContainerRecreateRequests created$/,
    breakIt: (run) => run.audit.push(write(WATCHER_B, 'create', { resource: 'containerrecreaterequests', name: crrName('uid-crr-1') }, '00:01:04.000000', 201)),
  },
  'a second signal container sent for a sidecar, as the audit log records it': {
    rule: 'stopped-twice',
    object: 'robustness/signal-1-a',
    detail: /^2 signal containers sent for proxy$/,
    breakIt: (run) => run.audit.push(signalPatch(WATCHER_B, 'signal-1-a', 'proxy', '00:01:02.000000')),
  },
  'a write by the leader after it released the Lease': {
    rule: 'stopped-twice',
    object: 'events/robustness/crr-1-a.2',
    detail: /^watcher-b create events \(answered 201\) received at .*T00:01:09\.000000Z, while no replica held the Lease \(released by watcher-b, received at .*T00:01:08\.000000Z\)$/,
    breakIt: (run) => run.audit.push(write(WATCHER_B, 'create', { resource: 'events', name: 'crr-1-a.2' }, '00:01:09.000000', 201)),
  },
  'a write by a watcher replica before any held the Lease': {
    rule: 'stopped-twice',
    object: 'robustness/signal-1-a',
    detail: /^watcher-b patch pods \(answered 200\) received at .*T00:00:00\.500000Z, before any replica held the Lease$/,
    breakIt: (run) => run.audit.push(write(WATCHER_B, 'patch', { resource: 'pods', name: 'signal-1-a' }, '00:00:00.500000')),
  },
  'a stop request received before the second the main finished in': {
    rule: 'stopped-while-main-ran',
    object: 'robustness/signal-1-a',
    detail: /^stop request from watcher-a received at .*T00:00:59\.999999Z, before the main containers finished/,
    breakIt: (run) => (run.audit.find((each) => each.objectRef?.subresource === 'ephemeralcontainers')!.requestReceivedTimestamp = received('00:00:59.999999')),
  },
  'an image replaced before the main finished': {
    rule: 'stopped-while-main-ran',
    object: 'robustness/image-1-a',
    detail: /^stop request from watcher-a received at .*T00:00:59\.500000Z, before the main containers finished/,
    breakIt: (run) => (run.audit.find((each) => each.objectRef?.name === 'image-1-a' && each.verb === 'patch')!.requestReceivedTimestamp = received('00:00:59.500000')),
  },
  'a sidecar that ended a second before the main': {
    rule: 'stopped-while-main-ran',
    object: 'robustness/crr-1-a',
    detail: /^proxy ended at .*T00:00:59\.000Z, before the main containers finished at .*T00:01:00\.000Z$/,
    breakIt: (run) => (statusOf(run, 'crr-1-a', 'proxy').state!.terminated!.finishedAt = after(-1)),
  },
  "a replaced sidecar whose own run ended before the main (its lastState)": {
    rule: 'stopped-while-main-ran',
    object: 'robustness/image-1-a',
    detail: /^logs ended at .*T00:00:58\.000Z/,
    breakIt: (run) => (statusOf(run, 'image-1-a', 'logs').lastState!.terminated!.finishedAt = after(-2)),
  },
  'a phase set Succeeded where a main failed': {
    rule: 'phase-differs',
    object: 'robustness/ignore-1-a',
    detail: /^phase Succeeded, expected Failed \(main exited 1\); its SidecarTerminated condition: phase set to Failed/,
    breakIt: (run) => (podNamed(run, 'ignore-1-a').status!.phase = 'Succeeded'),
  },
  'a stop record that says the phase was set, on a pod of the wrong phase': {
    rule: 'phase-differs',
    object: 'robustness/ignore-1-a',
    detail: /expected Failed .*its stop record says the phase was set$/,
    breakIt: (run) => {
      const pod = podNamed(run, 'ignore-1-a');
      pod.status!.phase = 'Succeeded';
      pod.status!.conditions = [{ type: TERMINATED_CONDITION, ...recordCondition({ phase: 'Succeeded', mains: [{ name: 'main', exitCode: 1 }], sidecars: [{ name: 'sql', exitCode: 137, stoppedBy: ['phase'] }] }) }];
    },
  },
  "a pod whose status the add-on wrote, ended Failed although its mains succeeded": {
    rule: 'phase-differs',
    object: 'robustness/signal-1-a',
    detail: /^phase Failed, expected Succeeded \(main exited 0\); its status written by watcher-b$/,
    breakIt: (run) => {
      podNamed(run, 'signal-1-a').status!.phase = 'Failed';
      run.audit.push(write(WATCHER_B, 'patch', { resource: 'pods', subresource: 'status', name: 'signal-1-a' }, '00:01:03.000000'));
    },
  },
  'a webhook call failed during a rolling restart': {
    rule: 'admission-lost',
    object: 'job/robustness/signal-1',
    detail: /^2 × failed calling webhook "mutate\.sidecar-terminator\.io", at .* during webhook-roll$/,
    breakIt: (run) => Object.assign(run.events.find((each) => each.involvedObject.name === 'signal-1' && each.reason === 'FailedCreate')!, { firstTimestamp: after(-45), lastTimestamp: after(-25) }),
  },
  'a pod admitted without the webhook during a rolling restart (failurePolicy Ignore), named by its generateName and Job': {
    rule: 'admission-lost',
    object: 'pod-create/robustness/signal-1-',
    detail: /^failed calling webhook "mutate\.sidecar-terminator\.io" for a pod of Job signal-1, at .* during webhook-roll$/,
    breakIt: (run) => Object.assign(run.audit.find((each) => each.objectRef?.resource === 'pods' && each.verb === 'create')!, { requestReceivedTimestamp: received('00:00:35.000000') }),
  },
  'a Job admitted without the validating webhook during a rolling restart (failurePolicy Ignore)': {
    rule: 'admission-lost',
    object: 'job-create/robustness/image-1',
    detail: /^failed calling webhook "validate\.sidecar-terminator\.io", at .* during webhook-roll$/,
    breakIt: (run) => Object.assign(run.audit.find((each) => each.objectRef?.resource === 'jobs')!, { requestReceivedTimestamp: received('00:00:36.000000') }),
  },
  'a ConfigMap written': {
    rule: 'wrote-outside',
    object: 'configmaps/robustness/settings',
    detail: /^webhook-a patch configmaps: not an object the add-on writes \(2 times\)$/,
    breakIt: (run) => run.audit.push(write(WEBHOOK, 'patch', { resource: 'configmaps', name: 'settings' }, '00:00:05.000000'), write(WEBHOOK, 'patch', { resource: 'configmaps', name: 'settings' }, '00:00:06.000000')),
  },
  'a pod without the managed label patched': {
    rule: 'wrote-outside',
    object: 'pods/robustness/plain-1-a',
    detail: /^watcher-a patch pods: the pod is not managed$/,
    breakIt: (run) => {
      run.pods.push(pod('plain-1', [main()], [ended('main', 0, 0)], { metadata: { labels: {} } }));
      run.audit.push(write(WATCHER_A, 'patch', { resource: 'pods', name: 'plain-1-a' }, '00:00:30.000000'));
    },
  },
  'a pod not listed at the end patched': {
    rule: 'wrote-outside',
    object: 'pods/robustness/gone-a',
    detail: /^watcher-b patch pods\/ephemeralcontainers: for no pod listed at the end$/,
    breakIt: (run) => run.audit.push(write(WATCHER_B, 'patch', { resource: 'pods', subresource: 'ephemeralcontainers', name: 'gone-a' }, '00:01:03.000000')),
  },
  'a managed pod deleted': {
    rule: 'wrote-outside',
    object: 'pods/robustness/crr-1-a',
    detail: /^watcher-b delete pods: the add-on only patches pods$/,
    breakIt: (run) => run.audit.push(write(WATCHER_B, 'delete', { resource: 'pods', name: 'crr-1-a' }, '00:01:06.000000')),
  },
  'a Secret written in a namespace of the run': {
    rule: 'wrote-outside',
    object: 'secrets/robustness/sidecar-terminator-tls',
    detail: /^webhook-a create secrets: outside sidecar-terminator$/,
    breakIt: (run) => run.audit.push(write(WEBHOOK, 'create', { resource: 'secrets', name: 'sidecar-terminator-tls' }, '00:00:00.150000', 201)),
  },
  'another ValidatingAdmissionPolicy changed': {
    rule: 'wrote-outside',
    object: 'validatingadmissionpolicies/restrict-pods',
    detail: /not its fence$/,
    breakIt: (run) => run.audit.push(write(WEBHOOK, 'patch', { resource: 'validatingadmissionpolicies', namespace: undefined, name: 'restrict-pods' }, '00:00:00.260000')),
  },
  "another webhook configuration changed": {
    rule: 'wrote-outside',
    object: 'mutatingwebhookconfigurations/istio-sidecar-injector',
    detail: /not its webhook configuration$/,
    breakIt: (run) => run.audit.push(write(WEBHOOK, 'patch', { resource: 'mutatingwebhookconfigurations', namespace: undefined, name: 'istio-sidecar-injector' }, '00:00:00.250000')),
  },
};

for (const [name, breakage] of Object.entries(BREAKAGES)) {
  t.test(`${breakage.rule}: ${name}`, async (t) => {
    const run = cleanRun();
    breakage.breakIt(run);
    const found = checkLedger(run);
    t.same(found.map((each) => [each.rule, each.object]), [[breakage.rule, breakage.object]], JSON.stringify(found));
    t.match(found[0]?.detail, breakage.detail);
  });
}

t.test('a main restarted once: a stop after its final run is none, one after its first run is a violation', async (t) => {
  const restarted = (stopAt: string) => {
    const run = cleanRun();
    const containers = [main(), killSidecar('proxy')];
    run.expectations.push({ namespace: NAMESPACE, name: 'restart-1', outcome: 'Complete', kind: 'sim-restart' });
    run.jobs.push(job('restart-1', containers, 'Complete', 'OnFailure'));
    run.pods.push(
      pod('restart-1', containers, [ended('main', 0, 0, { restartCount: 1, lastState: { terminated: { exitCode: 1, finishedAt: after(-30) } } }), ended('proxy', 0, 2)], {
        spec: { restartPolicy: 'OnFailure', ephemeralContainers: [{ name: 'stop-proxy', image: 'stop-sidecar', targetContainerName: 'proxy' }] },
      }),
    );
    run.events.push(announced('restart-1-a'));
    run.audit.push(write(WATCHER_A, 'patch', { resource: 'pods', subresource: 'ephemeralcontainers', name: 'restart-1-a' }, stopAt));
    return checkLedger(run);
  };
  t.same(restarted('00:01:00.300000'), []);
  t.same(restarted('00:00:31.000000').map((each) => [each.rule, each.object]), [['stopped-while-main-ran', 'robustness/restart-1-a']]);
});

t.test('a stop request received in the second the main finished in (finishedAt truncated) is none', async (t) => {
  const run = cleanRun();
  run.audit.find((each) => each.objectRef?.subresource === 'ephemeralcontainers')!.requestReceivedTimestamp = received('00:01:00.000001');
  t.same(checkLedger(run), []);
});

t.test('a webhook call failed outside every fault (the calls of the last one timed out): a late answer, reported apart, not an answer lost to a roll or a rotation', async (t) => {
  const run = cleanRun();
  Object.assign(run.events.find((each) => each.involvedObject.name === 'crr-1' && each.reason === 'FailedCreate')!, { firstTimestamp: after(-1), lastTimestamp: after(-1) });
  t.same(checkLedger(run), [], 'no violation');
  const late = lateAdmissions(run);
  t.same(late.map((each) => [each.rule, each.object]), [['admission-lost', 'job/robustness/crr-1']]);
  t.match(late[0]?.detail, /^1 × failed calling webhook .* outside every fault$/);
  t.same(lateAdmissions(cleanRun()), [], 'none in the clean run, whose failed calls all fall in the faults that excuse them');
});
