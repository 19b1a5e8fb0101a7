// The codes of the watcher's decisions. Every reason to leave a pod alone or to wait for it, every
// step of a stop plan and every warning has one: the policy branches on them, the watcher writes
// them into its events (the `action` field, which `kubectl get events -o
// custom-columns=REASON:.reason,CODE:.action,MESSAGE:.message` shows), and `status` and the metrics
// read them. They are stable; the words that go with them may change. docs/operations.md lists them
// (test/policy/codes.test.ts holds that table to this one).

/** What a code names: a pod the watcher leaves alone, a wait, the end, a step of a stop, an event, a warning. */
export type CodeKind = 'ignore' | 'wait' | 'finished' | 'act' | 'step' | 'event' | 'warning';

/** How the metric `sidecar_terminator_terminations_total` counts a warning, when it counts it. */
export interface CountedAs {
  mechanism: 'crr' | 'signal' | 'image' | 'phase' | 'none';
  result: 'refused' | 'failed' | 'escalated';
}

interface CodeInfo {
  kind: CodeKind;
  /** What it means, in the words of the logs and `status`. */
  meaning: string;
  counted?: CountedAs;
  /** A pod not started, or main containers still at work: nothing is to be stopped yet. */
  waitsOnMains?: true;
  /** A warning that comes with the end of a sidecar from outside its PID namespace (stop-plan.ts): the kubelet is ending it. */
  endsFromOutside?: true;
}

export const CODES = {
  'restart-policy-always': { kind: 'ignore', meaning: 'restartPolicy is neither Never nor OnFailure' },
  'pod-deleting': { kind: 'ignore', meaning: 'the pod is being deleted' },
  'pod-not-started': { kind: 'ignore', meaning: 'the pod has not started', waitsOnMains: true },
  'no-sidecar': { kind: 'ignore', meaning: 'the pod has no sidecar' },

  'mains-running': { kind: 'wait', meaning: 'main containers are still running', waitsOnMains: true },
  'main-restarting': { kind: 'wait', meaning: 'a main container exited and the kubelet will restart it (restartPolicy OnFailure, or its own restartPolicy or restartPolicyRules)', waitsOnMains: true },
  'sidecars-restarting': { kind: 'wait', meaning: 'sidecars are restarting' },
  'sidecars-stopping': { kind: 'wait', meaning: 'sidecars are stopping' },
  'containers-not-reported': { kind: 'wait', meaning: 'every container is a sidecar, and not all of them are reported yet' },

  'sidecars-stopped': { kind: 'finished', meaning: 'every sidecar has stopped' },
  'mains-done': { kind: 'act', meaning: 'the main containers are done' },

  'replace-image': { kind: 'step', meaning: "the sidecar's image is replaced in place with its quick-exit image" },
  'mark-terminal': { kind: 'step', meaning: "the pod's phase is set from the main containers, with the SidecarTerminated condition" },
  'create-crr': { kind: 'step', meaning: 'an OpenKruise ContainerRecreateRequest is created for the kill sidecars' },
  'add-signal-containers': { kind: 'step', meaning: 'an ephemeral container per sidecar sends it SIGTERM, or its HTTP shutdown request, and waits for it to exit' },
  'set-condition': { kind: 'step', meaning: 'the SidecarTerminated condition says why the pod waits, or that the wait is over' },
  warn: { kind: 'step', meaning: 'a Warning event, with a warning code' },
  'escalate-image': { kind: 'step', meaning: "a sidecar still running after its grace period gets a quick-exit image in place of its own: the kubelet kills it through the runtime and runs that image" },
  'escalate-phase': { kind: 'step', meaning: "a sidecar still running after its grace period, where no quick-exit image can run: the pod's phase is set from the main containers, and the kubelet kills it" },
  finish: { kind: 'step', meaning: 'nothing is written: the pod leaves the watch once its phase is terminal, and then gets its stop record' },

  'stop-requested': { kind: 'event', meaning: 'the sidecars are told to stop (the Normal SidecarTerminator event)' },

  'virtual-node-without-image': {
    kind: 'warning',
    meaning: 'the pod runs on a virtual-kubelet node, which cannot kill a container, and the sidecar declares no quick-exit image (KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE)',
    counted: { mechanism: 'none', result: 'refused' },
  },
  'quick-exit-image-not-allowed': { kind: 'warning', meaning: 'the quick-exit image is not in --quick-exit-image-allowlist', counted: { mechanism: 'image', result: 'refused' } },
  'signal-user-unknown': { kind: 'warning', meaning: "the sidecar's user is unknown and runAsNonRoot forbids the root user that could signal it: it is ended from outside", counted: { mechanism: 'signal', result: 'refused' }, endsFromOutside: true },
  'signal-failed': { kind: 'warning', meaning: 'the signal container exited non-zero without stopping the sidecar: it is ended from outside', counted: { mechanism: 'signal', result: 'failed' }, endsFromOutside: true },
  'signal-not-started': { kind: 'warning', meaning: 'the signal container cannot start: the sidecar is ended from outside', counted: { mechanism: 'signal', result: 'failed' }, endsFromOutside: true },
  'sigterm-unhandled': { kind: 'warning', meaning: "the sidecar's PID 1 has no SIGTERM handler, so the kernel drops SIGTERM sent from inside its PID namespace: it is ended from outside at once", counted: { mechanism: 'signal', result: 'escalated' }, endsFromOutside: true },
  'signal-ignored': { kind: 'warning', meaning: 'the sidecar still runs a grace period after SIGTERM or its shutdown request: it is ended from outside', counted: { mechanism: 'signal', result: 'escalated' }, endsFromOutside: true },
  'crr-not-done': {
    kind: 'warning',
    meaning: 'the sidecar still runs a grace period and a minute after the main containers finished, though asked to stop by a ContainerRecreateRequest (no kruise-daemon serves the node, it failed, or the request was refused): it is ended from outside',
    counted: { mechanism: 'crr', result: 'escalated' },
    endsFromOutside: true,
  },
  'quick-exit-image-not-pulled': { kind: 'warning', meaning: "the sidecar's node cannot pull its quick-exit image", counted: { mechanism: 'image', result: 'failed' } },
  'node-missing': { kind: 'warning', meaning: "the pod's node does not exist" },
  'sidecar-exit-failed-pod': {
    kind: 'warning',
    meaning: "the pod failed although its main containers succeeded: a sidecar exited non-zero when it was stopped (restartPolicy Never), and the Job counted the pod as failed or a podFailurePolicy rule judged the sidecar's exit code",
  },
  'stop-failed': { kind: 'warning', meaning: 'a request that stops the sidecars failed; it is retried' },
  'request-refused': { kind: 'warning', meaning: 'the API server refused a request for the pod in a way retrying cannot fix (403 from RBAC or the fence, 422); it is retried after 15s, then less and less often, up to every 5m' },
} as const satisfies Record<string, CodeInfo>;

export type Code = keyof typeof CODES;
/** The codes of one kind. */
export type CodeOf<K extends CodeKind> = { [C in Code]: (typeof CODES)[C]['kind'] extends K ? C : never }[Code];
export type IgnoreCode = CodeOf<'ignore'>;
export type WaitCode = CodeOf<'wait'>;
export type StepCode = CodeOf<'step'>;
export type WarningCode = CodeOf<'warning'>;

/** Whether a string is one of the codes (an event's `action`, read back). */
export function isCode(value: unknown): value is Code {
  return typeof value === 'string' && Object.hasOwn(CODES, value);
}

/** How the terminations metric counts a warning of this code; undefined when it does not count it. */
export function countedAs(code: WarningCode): CountedAs | undefined {
  const info: CodeInfo = CODES[code];
  return info.counted;
}

/** Whether the code is a wait on the pod's start or its main containers. */
export function waitsOnMains(code: Code): boolean {
  const info: CodeInfo = CODES[code];
  return info.waitsOnMains === true;
}

/** Whether the code is a warning that comes with the end of a sidecar from outside: it is stopping, not stuck. */
export function endsFromOutside(code: Code): boolean {
  const info: CodeInfo = CODES[code];
  return info.endsFromOutside === true;
}
