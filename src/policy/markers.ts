// The OpenKruise-compatible env vars that mark a container as a sidecar, and the reading of
// them from a container. README.md's first table says what each means.
import { arrayOf, isRecord, type Container, type PodSpec } from './types.ts';

export const ENV_WHEN_JOB_EXIT = 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT';
export const ENV_WITH_IMAGE = 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE';
export const ENV_IGNORE_EXIT_CODE = 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE';

export const MARKER_NAMES = [ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, ENV_IGNORE_EXIT_CODE] as const;
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
}

export function isTrueValue(value: string | undefined): boolean {
  return value !== undefined && value.toLowerCase() === 'true';
}

/**
 * Reads a container's markers. When a name is defined twice the last entry wins, as it does
 * in the container's environment (validation warns about the duplicate).
 */
export function readMarkers(container: Container): SidecarMarkers {
  const last = new Map<MarkerName, MarkerEntry>();
  for (const entry of markerEntries(container)) last.set(entry.name, entry);
  const quickExitImage = last.get(ENV_WITH_IMAGE)?.value;
  return {
    whenJobExit: isTrueValue(last.get(ENV_WHEN_JOB_EXIT)?.value),
    quickExitImage: quickExitImage === '' ? undefined : quickExitImage,
    ignoreExitCode: isTrueValue(last.get(ENV_IGNORE_EXIT_CODE)?.value),
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
  role: 'main' | 'sidecar';
  markers: SidecarMarkers;
}

/** Splits spec.containers into main containers and sidecars. Init containers are never either. */
export function classifyContainers(spec: PodSpec): ContainerRole[] {
  return arrayOf(spec.containers).map((raw, index) => {
    const container: Container = isRecord(raw) ? raw : {};
    const markers = readMarkers(container);
    return {
      name: typeof container.name === 'string' ? container.name : `#${index}`,
      index,
      image: typeof container.image === 'string' ? container.image : undefined,
      role: isSidecar(markers) ? 'sidecar' : 'main',
      markers,
    };
  });
}
