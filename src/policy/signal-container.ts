// The ephemeral container that stops a sidecar from inside its pod (`--kill-mechanism signal`, and
// every HTTP stop method): it runs images/stop-sidecar, joins the sidecar's PID namespace (and the
// pod's network namespace, as every container does), sends the sidecar its shutdown request or
// SIGTERM, and waits for it to exit; its exit code says what happened (STOP_EXIT_CODES). Decided
// here: its name, which must not collide with any container of the pod, its user, which must be
// allowed to signal the sidecar, and its arguments.
import { createHash } from 'node:crypto';
import type { V1Container, V1EphemeralContainer, V1Pod, V1SecurityContext } from '@kubernetes/client-node';
import { SIGNAL_CONTAINER_PREFIX } from './names.ts';
import type { KubernetesVersion } from './native-sidecars.ts';
import { HTTP_METHODS, type StopMethod } from './stop-method.ts';

/** What the signal container runs: images/stop-sidecar, the one program of --signal-image. */
export const SIGNAL_COMMAND: readonly string[] = ['/stop-sidecar'];

/** What the signal container's exit code says (images/stop-sidecar); 137 is the kernel's kill when the sidecar, PID 1, exits. */
export const STOP_EXIT_CODES = { exited: 0, signalFailed: 1, usage: 2, noHandler: 3, stillRunning: 4 } as const;

/** What the signal container does for one sidecar. */
export interface StopRequest {
  stop: StopMethod;
  /** How long it waits for the sidecar to exit before killing what it can from inside. */
  gracePeriodSeconds: number;
  /** With shareProcessNamespace: the sidecar's container ID, by which it finds the sidecar's processes. */
  containerId?: string;
}

/** The signal container's arguments (the fence holds each to its form: src/kube/fence-rules.ts). */
export function stopArguments(request: StopRequest): string[] {
  return [
    `--grace-period=${request.gracePeriodSeconds}`,
    ...(request.stop.kind === 'http' ? [`--method=${request.stop.method}`, `--url=${request.stop.url}`] : []),
    ...(request.containerId ? [`--container-id=${request.containerId}`] : []),
  ];
}

/** The forms of the signal container's arguments, as regular expressions (RE2, for the fence's CEL too). */
export const STOP_ARGUMENT_FORMS: readonly string[] = [
  '^--grace-period=[0-9]{1,6}$',
  `^--method=(${HTTP_METHODS.join('|')})$`,
  // The pod's own loopback only, whatever the watcher is told.
  '^--url=http://(localhost|127[.]0[.]0[.]1|\\[::1\\]):[0-9]{1,5}/[!-~]*$',
  '^--container-id=[A-Za-z0-9_.-]{1,128}$',
];

export interface SignalSettings {
  image: string;
  command: string[];
}

const MAX_NAME_LENGTH = 63;

/**
 * The n-th name the signal container of `sidecar` may take: `stop-<sidecar>`, then
 * `stop-<sidecar>-2`, ...; names longer than a DNS label keep 50 characters and a hash.
 */
function candidateName(sidecar: string, n: number): string {
  const suffix = n === 1 ? sidecar : `${sidecar}-${n}`;
  const name = `${SIGNAL_CONTAINER_PREFIX}${suffix}`;
  if (name.length <= MAX_NAME_LENGTH) return name;
  return `${name.slice(0, 50)}-${createHash('sha256').update(suffix).digest('hex').slice(0, 12)}`;
}

/** Every container name in the pod: containers, init containers and ephemeral containers. */
function containerNames(pod: V1Pod): Set<string> {
  const spec = pod.spec;
  return new Set([...(spec?.containers ?? []), ...(spec?.initContainers ?? []), ...(spec?.ephemeralContainers ?? [])].map((c) => c.name));
}

/**
 * The signal container already sent for `sidecar`, if any: an ephemeral container targeting it
 * with one of its names. Earlier versions named it `stop-<sidecar>` only; that name is the first
 * candidate, so their containers are recognised too, and never sent twice.
 */
export function existingSignalContainer(pod: V1Pod, sidecar: string): V1EphemeralContainer | undefined {
  // Candidates are named only when something targets the sidecar: a pod with thousands of sidecars stays cheap.
  const targeting = (pod.spec?.ephemeralContainers ?? []).filter((c) => c.targetContainerName === sidecar);
  if (targeting.length === 0) return undefined;
  const candidates = new Set(Array.from({ length: containerNames(pod).size + 1 }, (_, i) => candidateName(sidecar, i + 1)));
  return targeting.find((c) => candidates.has(c.name));
}

/** The first candidate name that no container of the pod, and nothing in `taken`, uses. */
export function signalContainerName(pod: V1Pod, sidecar: string, taken: ReadonlySet<string> = new Set()): string {
  const used = new Set([...containerNames(pod), ...taken]);
  let n = 1;
  while (used.has(candidateName(sidecar, n))) n++;
  return candidateName(sidecar, n);
}

export type SignalUser =
  | { securityContext: V1SecurityContext; basis: 'spec' | 'status' | 'root' }
  /** No container is sent: it could not run, or could not signal. `field` is where the fix goes. */
  | { refused: { field: string; message: string } };

/**
 * The security context of the signal container. Linux lets a process signal another only as the
 * same user, or with CAP_KILL. So it runs as the sidecar's user: the runAsUser/runAsGroup of the
 * sidecar, else of the pod; else the user the kubelet reports the running sidecar with
 * (status.containerStatuses[].user.linux, Kubernetes 1.31+ on containerd 2); else, the user being
 * unknown, as root with CAP_KILL alone, which can signal any user, unless runAsNonRoot forbids
 * root: then no container is sent, and the refusal names the field to set.
 */
export function signalUser(pod: V1Pod, sidecar: string): SignalUser {
  const index = (pod.spec?.containers ?? []).findIndex((c) => c.name === sidecar);
  const container: V1Container | undefined = pod.spec?.containers[index];
  const own = container?.securityContext;
  const podLevel = pod.spec?.securityContext;
  const hardened = { allowPrivilegeEscalation: false, seccompProfile: { type: 'RuntimeDefault' } };
  const runAsUser = own?.runAsUser ?? podLevel?.runAsUser;
  if (runAsUser !== undefined) {
    const runAsGroup = own?.runAsGroup ?? podLevel?.runAsGroup;
    return { basis: 'spec', securityContext: { runAsUser, ...(runAsGroup !== undefined ? { runAsGroup } : {}), capabilities: { drop: ['ALL'] }, ...hardened } };
  }
  const reported = pod.status?.containerStatuses?.find((s) => s.name === sidecar)?.user?.linux;
  if (reported) {
    return { basis: 'status', securityContext: { runAsUser: reported.uid, runAsGroup: reported.gid, capabilities: { drop: ['ALL'] }, ...hardened } };
  }
  if ((own?.runAsNonRoot ?? podLevel?.runAsNonRoot) === true) {
    const field = `spec.containers[${index}].securityContext.runAsUser`;
    return {
      refused: {
        field,
        message: `cannot signal ${sidecar}: its user is unknown (no runAsUser, and the kubelet reports none in status.containerStatuses[].user) and runAsNonRoot forbids the root user that could signal any user; set ${field} to the uid the sidecar runs as`,
      },
    };
  }
  return { basis: 'root', securityContext: { runAsUser: 0, capabilities: { drop: ['ALL'], add: ['KILL'] }, ...hardened } };
}

/** The signal container for `sidecar`, or why none can be sent. */
export function signalContainer(
  pod: V1Pod,
  sidecar: string,
  settings: SignalSettings,
  taken: ReadonlySet<string>,
  request: StopRequest,
): { container: V1EphemeralContainer } | { refused: { field: string; message: string } } {
  const user = signalUser(pod, sidecar);
  if ('refused' in user) return user;
  return {
    container: {
      name: signalContainerName(pod, sidecar, taken),
      image: settings.image,
      command: settings.command,
      args: stopArguments(request),
      targetContainerName: sidecar,
      // The signal's failure (EPERM, for one) is in the container's log: it becomes the termination message.
      terminationMessagePolicy: 'FallbackToLogsOnError',
      securityContext: user.securityContext,
    },
  };
}

/** The first minor release whose API server keeps status.containerStatuses[].user by default (SupplementalGroupsPolicy, beta). */
export const CONTAINER_USER_KEPT_SINCE = 33;

/**
 * What the signal mechanism loses on an API server that drops the user kubelet reports, in words
 * for the log when the watcher starts; undefined where that report reaches the watcher.
 */
export function signalUserNote(version: KubernetesVersion): string | undefined {
  if (version.major > 1 || version.minor >= CONTAINER_USER_KEPT_SINCE) return undefined;
  return (
    `Kubernetes ${version.gitVersion} drops the user a container runs as from its status (status.containerStatuses[].user, kept from 1.${CONTAINER_USER_KEPT_SINCE}): ` +
    "a signal container runs as its sidecar's runAsUser, else as root with only CAP_KILL; under runAsNonRoot a sidecar without runAsUser cannot be signalled " +
    '(a SidecarTerminationFailed event names the field to set; or use --kill-mechanism crr, or a quick-exit image)'
  );
}
