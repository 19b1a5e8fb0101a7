// What a simulated container's process does: when it exits on its own, with which code, and
// how it reacts to SIGTERM. Scripted per pod by annotations (Job pods have generated names,
// so tests describe them declaratively in the pod template), per container by API calls, and
// by simulator-wide defaults.
import type { V1Container, V1Pod } from '@kubernetes/client-node';

export const SIM_ANNOTATION_PREFIX = 'sim.sidecar-terminator.io/';

/** Pod annotation names, one per container. */
export const simAnnotations = {
  /** How long after each start the container exits on its own: "2s", "500ms", "1m" or "never". */
  exitAfter: (container: string) => `${SIM_ANNOTATION_PREFIX}exit-after.${container}`,
  /** The exit code of that exit: "1", or one per start "1,0" (the last one repeats). Default 0. */
  exitCode: (container: string) => `${SIM_ANNOTATION_PREFIX}exit-code.${container}`,
  /** The reaction to SIGTERM: exit0, exit143 or ignore. */
  onSigterm: (container: string) => `${SIM_ANNOTATION_PREFIX}on-sigterm.${container}`,
  /**
   * Containers this one's work needs, "proxy" or "proxy,sql" (a main that talks to its sidecars):
   * a run that ends on its own while one of them is not running exits NEEDS_FAILURE_EXIT_CODE.
   */
  needs: (container: string) => `${SIM_ANNOTATION_PREFIX}needs.${container}`,
};

/** The exit code of a run whose needed container was not running when it ended (simAnnotations.needs). */
export const NEEDS_FAILURE_EXIT_CODE = 1;

/** exit0 / exit143: the process exits with that code; ignore: it runs on until SIGKILL (137) after the grace period. */
export type SigtermReaction = 'exit0' | 'exit143' | 'ignore';
const sigtermReactions: readonly SigtermReaction[] = ['exit0', 'exit143', 'ignore'];

/** init: regular init container; native-sidecar: init container with restartPolicy Always; main: spec.containers. */
export type ContainerKind = 'init' | 'native-sidecar' | 'main' | 'ephemeral';

export interface OwnExit {
  afterMs: number;
  exitCode: number;
}

export interface BehaviourDefaults {
  /** When a main container (one without a sidecar marker env) exits on its own; undefined: never. */
  defaultMainExitAfterMs: number | undefined;
  /** When a regular init container exits on its own. */
  defaultInitExitAfterMs: number;
  defaultSigtermReaction: SigtermReaction;
  isQuickExitImage: (image: string, container: V1Container) => boolean;
  /** Whether the node can pull the image; the pull of any other fails (ErrImagePull, then ImagePullBackOff). */
  isPullableImage: (image: string) => boolean;
  /** The uid an image runs as without runAsUser (its Dockerfile's USER), by image; 0 (root) for the others. */
  imageUsers: Readonly<Record<string, number>>;
  /** Whether container statuses carry the user the container runs as (status.containerStatuses[].user, containerd 2). */
  reportUsers: boolean;
}

export class ContainerBehaviour {
  private readonly defaults: BehaviourDefaults;
  /** Reactions set through the API, by namespace/pod/container. */
  private readonly sigtermOverrides = new Map<string, SigtermReaction>();

  constructor(defaults: BehaviourDefaults) {
    this.defaults = defaults;
  }

  setSigtermReaction(namespace: string, podName: string, container: string, reaction: SigtermReaction): void {
    this.sigtermOverrides.set(`${namespace}/${podName}/${container}`, reaction);
  }

  sigtermReaction(pod: V1Pod, container: string): SigtermReaction {
    const override = this.sigtermOverrides.get(`${pod.metadata?.namespace}/${pod.metadata?.name}/${container}`);
    const annotated = annotation(pod, simAnnotations.onSigterm(container));
    if (annotated !== undefined && !sigtermReactions.includes(annotated as SigtermReaction)) {
      throw new Error(`${simAnnotations.onSigterm(container)}: "${annotated}" is not one of ${sigtermReactions.join(', ')}`);
    }
    return override ?? (annotated as SigtermReaction | undefined) ?? this.defaults.defaultSigtermReaction;
  }

  isQuickExitImage(image: string, container: V1Container): boolean {
    return this.defaults.isQuickExitImage(image, container);
  }

  get reportsUsers(): boolean {
    return this.defaults.reportUsers;
  }

  isPullableImage(image: string): boolean {
    return this.defaults.isPullableImage(image);
  }

  /** The user a container runs as, as the runtime resolves it: runAsUser/runAsGroup (container, then pod), else the image's USER. */
  userOf(pod: V1Pod, container: Pick<V1Container, 'image' | 'securityContext'>): { uid: number; gid: number } {
    const podLevel = pod.spec?.securityContext;
    const uid = container.securityContext?.runAsUser ?? podLevel?.runAsUser ?? this.defaults.imageUsers[container.image ?? ''] ?? 0;
    return { uid, gid: container.securityContext?.runAsGroup ?? podLevel?.runAsGroup ?? uid };
  }

  /** The containers a container's work needs (simAnnotations.needs); none without the annotation. */
  needs(pod: V1Pod, container: string): string[] {
    const text = annotation(pod, simAnnotations.needs(container)) ?? '';
    return text.split(',').map((name) => name.trim()).filter((name) => name !== '');
  }

  /** How the `run`-th start (1 = first) of a container ends by itself, if it does. */
  ownExit(pod: V1Pod, container: V1Container, kind: ContainerKind, run: number): OwnExit | undefined {
    const afterText = annotation(pod, simAnnotations.exitAfter(container.name));
    const afterMs = afterText !== undefined ? parseDuration(afterText) : this.defaultExitAfterMs(container, kind);
    if (afterMs === undefined) return undefined;
    return { afterMs, exitCode: exitCodeOfRun(pod, container.name, run) };
  }

  private defaultExitAfterMs(container: V1Container, kind: ContainerKind): number | undefined {
    if (kind === 'init') return this.defaults.defaultInitExitAfterMs;
    if (kind === 'main' && !isMarkedSidecar(container)) return this.defaults.defaultMainExitAfterMs;
    return undefined;
  }
}

/** The default pull rule: images of a registry under the reserved `.invalid` domain (RFC 2606) cannot be pulled. */
export function isPullableImageByDefault(image: string): boolean {
  return !/^[^/]+\.invalid(:\d+)?\//.test(image);
}

/** The default quick-exit rule: the container's own quick-exit image, or any image named like one. */
export function isQuickExitImageByDefault(image: string, container: V1Container): boolean {
  return image === envValue(container, 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE') || image.includes('quick-exit');
}

/** Sidecars in the Kruise API sense: they run until stopped, they never exit on their own. */
function isMarkedSidecar(container: V1Container): boolean {
  return (
    envValue(container, 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT')?.toLowerCase() === 'true' ||
    !!envValue(container, 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE')
  );
}

function envValue(container: V1Container, name: string): string | undefined {
  return container.env?.find((e) => e.name === name)?.value;
}

function annotation(pod: V1Pod, key: string): string | undefined {
  return pod.metadata?.annotations?.[key];
}

function exitCodeOfRun(pod: V1Pod, container: string, run: number): number {
  const key = simAnnotations.exitCode(container);
  const codes = (annotation(pod, key) ?? '0').split(',').map((text) => Number(text.trim()));
  if (codes.some((code) => !Number.isInteger(code) || code < 0 || code > 255)) {
    throw new Error(`${key}: "${annotation(pod, key)}" is not a comma-separated list of exit codes`);
  }
  return codes[Math.min(run, codes.length) - 1] ?? 0;
}

/** "2s", "500ms", "1m", "1.5s" -> milliseconds; "never" -> undefined. */
export function parseDuration(text: string): number | undefined {
  if (text.trim() === 'never') return undefined;
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)\s*$/.exec(text);
  if (!match) throw new Error(`"${text}" is not a duration like 500ms, 2s, 1m or never`);
  const unitMs = { ms: 1, s: 1000, m: 60_000 }[match[2] as 'ms' | 's' | 'm'];
  return Number(match[1]) * unitMs;
}
