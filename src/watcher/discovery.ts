// Which kill mechanism the watcher uses on normal nodes, decided once when it starts.
import type { KubeConfig } from '@kubernetes/client-node';
import { servedCrrVersion } from '../kube/discovery.ts';
import type { KillMechanism } from '../policy/index.ts';

export type ResolvedKillMechanism = { mechanism: 'crr'; crrVersion: string } | { mechanism: 'signal' };

/** crr when asked for or, with auto, when the cluster serves Kruise's ContainerRecreateRequest; signal otherwise. */
export async function resolveKillMechanism(kubeConfig: KubeConfig, option: 'auto' | KillMechanism): Promise<ResolvedKillMechanism> {
  if (option === 'signal') return { mechanism: 'signal' };
  const crrVersion = await servedCrrVersion(kubeConfig);
  if (crrVersion) return { mechanism: 'crr', crrVersion };
  if (option === 'crr') {
    throw new Error('--kill-mechanism crr: the cluster does not serve apps.kruise.io ContainerRecreateRequest; install OpenKruise or use --kill-mechanism signal');
  }
  return { mechanism: 'signal' };
}
