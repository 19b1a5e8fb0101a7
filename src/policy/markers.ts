// The OpenKruise-compatible env vars that mark a container as a sidecar, and the reading of
// them from a container, entry by entry as OpenKruise's Job Sidecar Terminator reads them; and the
// add-on's own additions: the pod annotations that name sidecars (injected by another webhook),
// and how each sidecar asks to be stopped (stop-method.ts).
import { POD_ANNOTATIONS } from './names.ts';
import { SIGNAL, parseGracePeriod, parseStopMethod, type StopMethod } from './stop-method.ts';
import { arrayOf, isRecord, type Container, type PodLike, type PodSpec } from './types.ts';

export const ENV_WHEN_JOB_EXIT = 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT';
export const ENV_WITH_IMAGE = 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE';
export const ENV_IGNORE_EXIT_CODE = 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE';

/** The add-on's own: how the sidecar is told to stop (stop-method.ts), and how long it is given. */
export const ENV_STOP = 'SIDECAR_TERMINATOR_STOP';
export const ENV_GRACE_PERIOD = 'SIDECAR_TERMINATOR_GRACE_PERIOD_SECONDS';

export const KRUISE_MARKER_NAMES = [ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, ENV_IGNORE_EXIT_CODE] as const;
export const MARKER_NAMES = [...KRUISE_MARKER_NAMES, ENV_STOP, ENV_GRACE_PERIOD] as const;
export type MarkerName = (typeof MARKER_NAMES)[number];

export function isMarkerName(name: unknown): name is MarkerName {
  return MARKER_NAMES.includes(name as MarkerName);
}

/** One marker env entry as written, before any interpretation. */
export interface MarkerEntry {
  name: MarkerName;
  /** Position in the container's env list. */
  index: number;
  /** The literal value; undefined when unset or set through valueFrom. */
  value: string | undefined;
  fromValueFrom: boolean;
}

export function markerEntries(container: Container): MarkerEntry[] {
  const entries: MarkerEntry[] = [];
  arrayOf(container.env).forEach((env, index) => {
    if (!isRecord(env) || !isMarkerName(env.name)) return;
    entries.push({
      name: env.name,
      index,
      value: typeof env.value === 'string' ? env.value : undefined,
      fromValueFrom: env.valueFrom !== undefined && env.valueFrom !== null,
    });
  });
  return entries;
}

/** What a container's markers mean. */
export interface SidecarMarkers {
  whenJobExit: boolean;
  quickExitImage: string | undefined;
  ignoreExitCode: boolean;
  /** How it is told to stop; SIGTERM unless set (a value that cannot be read counts as unset). */
  stop: StopMethod;
  /** Seconds it is given to exit before it is ended from outside; the pod's terminationGracePeriodSeconds unless set. */
  gracePeriodSeconds: number | undefined;
}

/** The pod annotations that concern one container (POD_ANNOTATIONS), as written. */
export interface ContainerAnnotations {
  /** Named in sidecar-terminator.io/sidecars. */
  sidecar: boolean;
  /** Named in sidecar-terminator.io/ignore-exit-code. */
  ignoreExitCode: boolean;
  stop: string | undefined;
  gracePeriod: string | undefined;
}

/** The container names an annotation lists: comma-separated, blanks around them ignored. */
export function annotationNames(value: unknown): string[] {
  return typeof value === 'string' ? value.split(',').map((name) => name.trim()).filter((name) => name !== '') : [];
}

/**
 * Reads the pod annotations that concern each container. The name lists are split once per pod,
 * not once per container: a pod may have thousands of containers, and classifying it must stay
 * linear in its size (a hostile pod could otherwise hold the webhook for minutes).
 */
export function annotationReader(annotations: Record<string, unknown>): (container: string) => ContainerAnnotations {
  const sidecars = new Set(annotationNames(annotations[POD_ANNOTATIONS.sidecars]));
  const ignoring = new Set(annotationNames(annotations[POD_ANNOTATIONS.ignoreExitCode]));
  const text = (key: string) => (typeof annotations[key] === 'string' ? annotations[key] : undefined);
  return (container) => ({
    sidecar: sidecars.has(container),
    ignoreExitCode: ignoring.has(container),
    stop: text(`${POD_ANNOTATIONS.stopPrefix}${container}`),
    gracePeriod: text(`${POD_ANNOTATIONS.gracePeriodPrefix}${container}`),
  });
}

const NO_ANNOTATIONS: ContainerAnnotations = { sidecar: false, ignoreExitCode: false, stop: undefined, gracePeriod: undefined };

export function isTrueValue(value: string | undefined): boolean {
  return value !== undefined && value.toLowerCase() === 'true';
}

/**
 * Reads a container's markers the way OpenKruise does, so a pod behaves the same under either
 * controller: a name defined twice counts when any of its definitions is "true" (any case), and
 * the quick-exit image is the first definition's value, even though the container's environment
 * holds the last one. Any other value (`""`, `"1"`, `"yes"`, or one set through valueFrom, which
 * cannot be read from the spec) means "not set". Validation warns about all of these.
 */
export function readMarkers(container: Container, annotated: ContainerAnnotations = NO_ANNOTATIONS): SidecarMarkers {
  const entries = markerEntries(container);
  const anyTrue = (name: MarkerName) => entries.some((entry) => entry.name === name && isTrueValue(entry.value));
  const first = (name: MarkerName) => entries.find((entry) => entry.name === name)?.value;
  const quickExitImage = first(ENV_WITH_IMAGE);
  // The pod's annotation wins over the container's env: the Job's author decides for its pods.
  const stop = parseStopMethod(annotated.stop ?? first(ENV_STOP) ?? 'signal');
  const grace = parseGracePeriod(annotated.gracePeriod ?? first(ENV_GRACE_PERIOD) ?? '');
  return {
    whenJobExit: anyTrue(ENV_WHEN_JOB_EXIT) || annotated.sidecar,
    quickExitImage: quickExitImage === '' ? undefined : quickExitImage,
    ignoreExitCode: anyTrue(ENV_IGNORE_EXIT_CODE) || annotated.ignoreExitCode,
    stop: 'method' in stop ? stop.method : SIGNAL,
    gracePeriodSeconds: 'seconds' in grace ? grace.seconds : undefined,
  };
}

/** A container is a sidecar when it asks to be stopped by kill or by a quick-exit image. */
export function isSidecar(markers: SidecarMarkers): boolean {
  return markers.whenJobExit || markers.quickExitImage !== undefined;
}

export interface ContainerRole {
  name: string;
  /** Position in spec.containers. */
  index: number;
  /** The container's image, when it is a string. */
  image: string | undefined;
  /** It sets `command`, which an image put in its place runs too. */
  hasCommand: boolean;
  role: 'main' | 'sidecar';
  markers: SidecarMarkers;
}

/**
 * Splits spec.containers into main containers and sidecars, from their env and the pod's
 * annotations (`annotations`: the pod's, or its template's). Init containers are never either.
 */
export function classifyContainers(spec: PodSpec, annotations: Record<string, unknown> = {}): ContainerRole[] {
  const annotated = annotationReader(annotations);
  return arrayOf(spec.containers).map((raw, index) => {
    const container: Container = isRecord(raw) ? raw : {};
    const name = typeof container.name === 'string' ? container.name : `#${index}`;
    const markers = readMarkers(container, annotated(name));
    return {
      name,
      index,
      image: typeof container.image === 'string' ? container.image : undefined,
      hasCommand: container.command !== undefined && container.command !== null,
      role: isSidecar(markers) ? 'sidecar' : 'main',
      markers,
    };
  });
}

/** The annotations of a pod, as classifyContainers reads them. */
export function podAnnotations(pod: { metadata?: { annotations?: unknown } | null }): Record<string, unknown> {
  const annotations = pod.metadata?.annotations;
  return isRecord(annotations) ? annotations : {};
}

/**
 * The roles of a pod's containers. A reconcile computes them once and hands them to each decision
 * it makes about the pod (decide, the stop plan, the kill mechanism), which compute them only when
 * called without them.
 */
export function rolesOf(pod: PodLike): ContainerRole[] {
  return classifyContainers(pod.spec ?? {}, podAnnotations(pod));
}
