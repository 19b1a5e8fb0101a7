// The shapes of a pod's story as status tells it (text, JSON, YAML), and of what it is told from.
import type { CoreV1Event, V1Node, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import type { Code, ContainerRole, KillMechanism, StopRecord, StopRoute } from '../policy/index.ts';

/** The pod's state as status tells it. */
export type PodStoryState = 'waiting for main' | 'stopping' | 'stopped' | 'failed' | 'not managed';

/** What a sidecar is, or will be, stopped by: its route, its kill mechanism once known (`kill` until then), or nothing. */
export type StopMeans = KillMechanism | StopRoute | 'none';

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

/** What a story is told from, read once from the facts. */
export interface PodReading {
  pod: V1Pod;
  spec: V1PodSpec;
  node?: V1Node;
  /** Unknown: not readable, not scheduled yet, or gone. */
  nodeKind: PodStory['nodeKind'];
  /** The add-on's events about the pod, oldest first. */
  events: CoreV1Event[];
  crr?: CrrView;
  roles: ContainerRole[];
  exitCodes: Map<string, number>;
  /** How each sidecar is stopped, by name. */
  stopMeans: Map<string, StopMeans>;
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
  mechanism?: StopMeans;
}

/** One line of what happened to the pod. */
export interface TimelineEntry {
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
  state: PodStoryState;
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
  /** The entries of the cluster's injected-sidecar policy that named sidecars of this pod when it was admitted. */
  injectedSidecarPolicy?: string[];
  actions: TimelineEntry[];
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
