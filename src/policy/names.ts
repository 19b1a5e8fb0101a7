// The names the add-on writes on Kubernetes objects and reads back: its labels and annotations,
// the reasons of its events and of its pod condition, the names of the webhooks it registers and
// of the objects it creates. Users, their alerts and their tools filter on them, and the fence
// (src/kube/fence-rules.ts) allows exactly them, so each is written here once and imported by the
// webhook, the watcher, the fence and `status` alike.

/** Where the add-on's images are published, and the version whose tag they carry by default. */
export const IMAGE_REPOSITORY = 'ghcr.io/sidecar-terminator';
export const ADDON_VERSION = '0.1.0';

/**
 * The images the watcher runs in users' pods, by the name each is built and published under: the
 * signal container's, and the quick-exit image that ends a sidecar from outside (or in place on a
 * virtual node). serve's defaults are these, and every node of `make dev` and of the tests holds
 * them, so that no stop waits on a pull that cannot happen.
 */
export const POD_IMAGES = { signal: 'stop-sidecar', quickExit: 'quick-exit' } as const;
export type PodImage = (typeof POD_IMAGES)[keyof typeof POD_IMAGES];

/** An image of the add-on as a release publishes it: `ghcr.io/sidecar-terminator/NAME:VERSION`. */
export const publishedImage = (name: string, version: string = ADDON_VERSION, repository: string = IMAGE_REPOSITORY): string => `${repository}/${name}:${version}`;

/** The component of the add-on's events, and the `app.kubernetes.io/managed-by` of what it creates. */
export const COMPONENT = 'sidecar-terminator';
/** The labels of the objects the add-on creates itself (its certificate Secret, webhook configurations, fence). */
export const MANAGED_BY_LABELS = { 'app.kubernetes.io/managed-by': COMPONENT } as const;

/** The label the webhook sets on pods the watcher manages. */
export const MANAGED_LABEL = 'sidecar-terminator.io/managed';
export const MANAGED = 'true';
/** Set by earlier versions of the watcher on the pods it was finished with; `status --all` still lists them. */
export const DONE = 'done';
/**
 * The managed pods still in flight: a pod in a terminal phase has nothing left to stop (the kubelet
 * starts no container of it again), so the watcher's watch leaves it out, and the API server drops
 * a pod from that watch when it ends, without a write from the watcher.
 */
export const IN_FLIGHT_FIELD_SELECTOR = 'status.phase!=Succeeded,status.phase!=Failed';

/**
 * The pod annotations (on a Job's pod template) that say the same as the env vars, for containers
 * whose env the Job's author cannot write (a proxy or agent another webhook injects), by name.
 */
export const POD_ANNOTATIONS = {
  /** Comma-separated container names: each is a sidecar, as with KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true. */
  sidecars: 'sidecar-terminator.io/sidecars',
  /** Comma-separated container names: as KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=true on each. */
  ignoreExitCode: 'sidecar-terminator.io/ignore-exit-code',
  /** `stop.sidecar-terminator.io/<container>`: how that sidecar is told to stop, as SIDECAR_TERMINATOR_STOP. */
  stopPrefix: 'stop.sidecar-terminator.io/',
  /** `grace-period-seconds.sidecar-terminator.io/<container>`: as SIDECAR_TERMINATOR_GRACE_PERIOD_SECONDS. */
  gracePeriodPrefix: 'grace-period-seconds.sidecar-terminator.io/',
} as const;

/**
 * Written by the watcher in the same status write that sets a pod's terminal phase, with that
 * phase as its value. The kubelet keeps a terminal phase that another writes only once it syncs
 * the pod, and a change of status alone does not make it sync: meanwhile its status manager writes
 * its own phase back (Running), and a sidecar that then exits non-zero fails the pod. A change of
 * metadata makes it sync at once, with the phase as written.
 */
export const PHASE_SET_ANNOTATION = 'sidecar-terminator.io/phase-set';

/**
 * Written by the mutating webhook beside the POD_ANNOTATIONS it adds from the operator's
 * injected-sidecar policy: the entries applied, comma-separated, so a pod says where its sidecars
 * came from and a second admission recognises its own writing.
 */
export const INJECTED_POLICY_ANNOTATION = 'sidecar-terminator.io/injected-sidecar-policy';

/** Annotation by which a bare pod asks for Job-strength validation of its restartPolicy. */
export const STRICT_VALIDATION_ANNOTATION = 'sidecar-terminator.io/validation';
/** The namespace label that opts a namespace in with --native-sidecars=labelled. */
export const NATIVE_SIDECARS_NAMESPACE_LABEL = { key: 'sidecar-terminator.io/native-sidecars', value: 'enabled' } as const;
/** The pod annotation (on a Job's pod template) that keeps a pod as it is. */
export const NATIVE_SIDECARS_OPT_OUT = { key: 'sidecar-terminator.io/native-sidecars', value: 'disabled' } as const;
/** Written on a migrated pod: the containers that moved, comma-separated, in their order. */
export const MIGRATED_ANNOTATION = 'sidecar-terminator.io/native-sidecars-migrated';
/** Written on a pod that could have moved but did not: why, in the words of the findings. */
export const SKIPPED_ANNOTATION = 'sidecar-terminator.io/native-sidecars-skipped';

/** The webhooks of the two webhook configurations. */
export const WEBHOOK_NAMES = {
  validate: 'validate.sidecar-terminator.io',
  mutate: 'mutate.sidecar-terminator.io',
  nativeSidecars: 'native-sidecars.sidecar-terminator.io',
} as const;

/** Reasons of the events the watcher records on pods. */
export const EVENT_REASONS = {
  /** Normal: the sidecars are being told to stop. OpenKruise's reason, so filters written for Kruise keep working. */
  stopping: 'SidecarTerminator',
  /** Warning: a sidecar cannot be stopped, or stopping it failed; the message says why and what to do. */
  failed: 'SidecarTerminationFailed',
  /** Warning, on the pod (its Job the related object): a stopped sidecar's exit code failed a pod whose main containers succeeded. */
  exitFailedPod: 'SidecarExitFailedPod',
} as const;

/** Reason of the Normal event on the watcher's Lease: with --kill-mechanism auto, the kill mechanism followed the cluster. */
export const KILL_MECHANISM_CHANGED = 'KillMechanismChanged';

/** Reason of the Warning event the webhook records on the owner of an object it admitted despite errors. */
export const OWNER_EVENT_REASON = 'InvalidSidecarConfiguration';

/** Reason of the Warning event the webhook records on its own pod when a changed injected-sidecar policy file cannot be used. */
export const INJECTED_POLICY_INVALID_REASON = 'InjectedSidecarPolicyInvalid';

/**
 * The pod condition the watcher sets (OpenKruise's type), when the pod's status has something to
 * say that the event does not: True with the terminal phase the watcher sets (as Kruise sets it),
 * False while a sidecar cannot be stopped yet (True again once it can).
 */
export const TERMINATED_CONDITION = 'SidecarTerminated';

/** Reasons of that condition. */
export const CONDITION_REASONS = {
  /** True: the pod was moved to its terminal phase, or every sidecar was told to stop after a wait. */
  stopping: 'SidecarsStopped',
  /** False: a sidecar waits for a quick-exit image its node cannot pull. */
  imageNotPulled: 'QuickExitImageNotPulled',
} as const;

/** OpenKruise's ContainerRecreateRequest, the crr kill mechanism's request. */
export const CRR = { group: 'apps.kruise.io', plural: 'containerrecreaterequests', kind: 'ContainerRecreateRequest' } as const;

/** One ContainerRecreateRequest per pod, named after its uid as Kruise names it: a second request for the same pod finds the first. */
export const crrName = (podUid: string): string => `sidecar-termination-${podUid}`;

/** The signal container of a sidecar is named `stop-<sidecar>` (src/policy/signal-container.ts). */
export const SIGNAL_CONTAINER_PREFIX = 'stop-';

/** The keys of the certificate Secret: kubernetes.io/tls's two, and the CA's certificate and key. */
export const TLS_SECRET_KEYS = { caCert: 'ca.crt', caKey: 'ca.key', cert: 'tls.crt', key: 'tls.key' } as const;
