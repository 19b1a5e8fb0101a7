// Plays kruise-daemon for OpenKruise ContainerRecreateRequests: stops the listed containers of
// the pod and reports the outcome in the CRR status. Watches only while the CRD is installed
// (before that the list answers 404 and is retried quietly).
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig, type KubernetesListObject } from '@kubernetes/client-node';
import { describeError } from './api-errors.ts';
import { startResilientInformer, type RunningInformer } from './resilient-informer.ts';

export const CRR = { group: 'apps.kruise.io', version: 'v1alpha1', plural: 'containerrecreaterequests' } as const;

interface ContainerRecreateRequest {
  metadata?: { name?: string; namespace?: string; uid?: string };
  spec?: { podName?: string; containers?: Array<{ name?: string }> };
  status?: { phase?: string };
}

interface ContainerRecreateState {
  name: string;
  phase: 'Recreating' | 'Succeeded' | 'Failed';
  message?: string;
}

/**
 * Stops the containers of a pod on a simulated node; undefined when the pod is not on one.
 * Per container: a promise that resolves once it has exited, or 'not-found'.
 */
export type RecreateContainers = (
  namespace: string,
  podName: string,
  containers: string[],
) => Promise<Array<Promise<void> | 'not-found'> | undefined>;

export class ContainerRecreateRequestExecutor {
  private readonly kubeConfig: KubeConfig;
  private readonly api: CustomObjectsApi;
  private readonly recreate: RecreateContainers;
  private readonly log: (message: string) => void;
  /** CRRs taken on, by uid: each is executed once. */
  private readonly taken = new Set<string>();
  private informers: RunningInformer[] = [];

  constructor(kubeConfig: KubeConfig, recreate: RecreateContainers, log: (message: string) => void) {
    this.kubeConfig = kubeConfig;
    this.api = kubeConfig.makeApiClient(CustomObjectsApi);
    this.recreate = recreate;
    this.log = log;
  }

  async start(namespaces: readonly string[] | undefined): Promise<void> {
    const handlers = { changed: (crr: ContainerRecreateRequest) => this.onChanged(crr), deleted: () => undefined };
    const { group, version, plural } = CRR;
    const sources = namespaces
      ? namespaces.map((namespace) => ({
          path: `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
          list: () => this.api.listNamespacedCustomObject({ group, version, plural, namespace }),
        }))
      : [{ path: `/apis/${group}/${version}/${plural}`, list: () => this.api.listClusterCustomObject({ group, version, plural }) }];
    this.informers = await Promise.all(
      sources.map(({ path, list }) =>
        startResilientInformer(this.kubeConfig, path, list as () => Promise<KubernetesListObject<ContainerRecreateRequest>>, handlers, this.log),
      ),
    );
  }

  async stop(): Promise<void> {
    await Promise.all(this.informers.map((informer) => informer.stop()));
  }

  private onChanged(crr: ContainerRecreateRequest): void {
    const uid = crr.metadata?.uid;
    if (!uid || crr.status?.phase === 'Completed' || this.taken.has(uid)) return;
    this.taken.add(uid);
    this.execute(crr).catch((err: unknown) => {
      this.taken.delete(uid); // taken on again with its next change
      this.log(`ContainerRecreateRequest ${crr.metadata?.namespace}/${crr.metadata?.name}: ${describeError(err)}`);
    });
  }

  private async execute(crr: ContainerRecreateRequest): Promise<void> {
    const namespace = crr.metadata?.namespace ?? '';
    const names = (crr.spec?.containers ?? []).map((c) => c.name ?? '');
    const outcomes = await this.recreate(namespace, crr.spec?.podName ?? '', names);
    if (!outcomes) return; // not a pod of ours: another node's daemon would handle it
    await this.writeStatus(crr, { phase: 'Recreating', containerRecreateStates: names.map((name) => ({ name, phase: 'Recreating' })) });
    const states = await Promise.all(names.map((name, i) => stateAfter(name, outcomes[i])));
    await this.writeStatus(crr, { phase: 'Completed', completionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), containerRecreateStates: states });
  }

  private async writeStatus(crr: ContainerRecreateRequest, status: object): Promise<void> {
    const { group, version, plural } = CRR;
    await this.api.patchNamespacedCustomObjectStatus(
      { group, version, plural, namespace: crr.metadata?.namespace ?? '', name: crr.metadata?.name ?? '', body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}

async function stateAfter(name: string, outcome: Promise<void> | 'not-found' | undefined): Promise<ContainerRecreateState> {
  if (outcome === undefined || outcome === 'not-found') return { name, phase: 'Failed', message: 'container not found in the pod' };
  await outcome;
  return { name, phase: 'Succeeded' };
}
