// The simulated Node objects: registration as Ready, the Lease heartbeat kubelet sends (without
// it the node lifecycle controller marks the nodes unreachable and evicts their pods), and the
// scheduling decision for a pod.
import {
  CoordinationV1Api,
  CoreV1Api,
  PatchStrategy,
  VersionApi,
  setHeaderOptions,
  type KubeConfig,
  type V1Node,
  type V1Pod,
} from '@kubernetes/client-node';
import { isApiError } from './api-errors.ts';

export const VIRTUAL_NODE_LABEL = { key: 'type', value: 'virtual-kubelet' } as const;
export const VIRTUAL_NODE_TAINT = { key: 'virtual-kubelet.io/provider', value: 'mock', effect: 'NoSchedule' } as const;

const leaseNamespace = 'kube-node-lease';
const leaseDurationSeconds = 40;
const heartbeatIntervalMs = 10_000;

export class SimulatedNodes {
  readonly normal: readonly string[];
  readonly virtual: readonly string[];
  private readonly core: CoreV1Api;
  private readonly coordination: CoordinationV1Api;
  private readonly versionApi: VersionApi;
  private readonly log: (message: string) => void;
  private heartbeat: NodeJS.Timeout | undefined;
  private nextNormal = 0;
  private nextVirtual = 0;

  constructor(kubeConfig: KubeConfig, normal: readonly string[], virtual: readonly string[], log: (message: string) => void) {
    if (normal.length === 0 || virtual.length === 0) throw new Error('the simulator needs at least one normal and one virtual node');
    this.normal = normal;
    this.virtual = virtual;
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.coordination = kubeConfig.makeApiClient(CoordinationV1Api);
    this.versionApi = kubeConfig.makeApiClient(VersionApi);
    this.log = log;
  }

  async register(): Promise<void> {
    // The simulated kubelets are of the API server's release, as a cluster's usually are.
    const kubeletVersion = `${(await this.versionApi.getCode()).gitVersion}-simulated`;
    await Promise.all([
      ...this.normal.map((name) => this.registerNode(name, false, kubeletVersion)),
      ...this.virtual.map((name) => this.registerNode(name, true, kubeletVersion)),
    ]);
    this.heartbeat = setInterval(() => void this.renewLeases(), heartbeatIntervalMs);
  }

  /** Stops the heartbeat; the Node objects stay (a restarted simulator picks them up again). */
  stop(): void {
    clearInterval(this.heartbeat);
  }

  owns(nodeName: string): boolean {
    return this.normal.includes(nodeName) || this.virtual.includes(nodeName);
  }

  /** Where the scheduler would put the pod: a virtual node when it asks for one, else a normal node (round robin). */
  choose(pod: V1Pod): string {
    if (wantsVirtualNode(pod)) return this.virtual[this.nextVirtual++ % this.virtual.length] as string;
    return this.normal[this.nextNormal++ % this.normal.length] as string;
  }

  private async registerNode(name: string, isVirtual: boolean, kubeletVersion: string): Promise<void> {
    const node: V1Node = {
      metadata: {
        name,
        labels: {
          'kubernetes.io/hostname': name,
          'kubernetes.io/os': 'linux',
          'sidecar-terminator.io/simulated': 'true',
          ...(isVirtual ? { [VIRTUAL_NODE_LABEL.key]: VIRTUAL_NODE_LABEL.value } : {}),
        },
      },
      spec: isVirtual ? { taints: [{ ...VIRTUAL_NODE_TAINT }] } : {},
    };
    try {
      await this.core.createNode({ body: node });
    } catch (err) {
      if (!isApiError(err, 409)) throw err;
    }
    // Status is written separately: the API server does not take it from a create.
    await this.core.patchNodeStatus({ name, body: { status: readyStatus(kubeletVersion) } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    await this.renewLease(name);
  }

  private async renewLeases(): Promise<void> {
    await Promise.all(
      [...this.normal, ...this.virtual].map((name) =>
        this.renewLease(name).catch((err: unknown) => this.log(`lease of node ${name}: ${(err as Error).message}`)),
      ),
    );
  }

  private async renewLease(name: string): Promise<void> {
    try {
      await this.coordination.createNamespacedLease({
        namespace: leaseNamespace,
        body: { metadata: { name }, spec: { holderIdentity: name, leaseDurationSeconds } },
      });
    } catch (err) {
      if (!isApiError(err, 409)) throw err;
    }
    await this.coordination.patchNamespacedLease(
      { name, namespace: leaseNamespace, body: { spec: { renewTime: microTime(new Date()) } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}

/** A pod asks for a virtual node by tolerating its taint or selecting its label (nodeSelector or required affinity). */
export function wantsVirtualNode(pod: V1Pod): boolean {
  const spec = pod.spec;
  const tolerates = (spec?.tolerations ?? []).some((t) => t.key === VIRTUAL_NODE_TAINT.key);
  const selects = spec?.nodeSelector?.[VIRTUAL_NODE_LABEL.key] === VIRTUAL_NODE_LABEL.value;
  const terms = spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
  const requires = terms.some((term) =>
    (term.matchExpressions ?? []).some(
      (e) => e.key === VIRTUAL_NODE_LABEL.key && e.operator === 'In' && (e.values ?? []).includes(VIRTUAL_NODE_LABEL.value),
    ),
  );
  return tolerates || selects || requires;
}

function readyStatus(kubeletVersion: string): object {
  const time = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    conditions: [
      { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'simulated kubelet is posting ready status', lastHeartbeatTime: time, lastTransitionTime: time },
    ],
    addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
    capacity: { cpu: '8', memory: '32Gi', pods: '110' },
    allocatable: { cpu: '8', memory: '32Gi', pods: '110' },
    nodeInfo: {
      kubeletVersion, architecture: 'amd64', operatingSystem: 'linux', containerRuntimeVersion: 'sim://1',
      kernelVersion: '', osImage: 'simulated', machineID: '', systemUUID: '', bootID: '', kubeProxyVersion: '',
    },
  };
}

/** Lease times are MicroTime, which the API server parses only with exactly six fractional digits. */
function microTime(date: Date): string {
  return date.toISOString().replace(/Z$/, '000Z');
}
