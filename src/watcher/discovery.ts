// Which kill mechanism the watcher uses on normal nodes, decided once when it starts.
import { ApisApi, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
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

/** The apps.kruise.io version that serves ContainerRecreateRequest, if the cluster has the CRD. */
export async function servedCrrVersion(kubeConfig: KubeConfig): Promise<string | undefined> {
  const groups = await kubeConfig.makeApiClient(ApisApi).getAPIVersions();
  const kruise = groups.groups.find((group) => group.name === 'apps.kruise.io');
  if (!kruise) return undefined;
  const preferred = kruise.preferredVersion?.version;
  const versions = kruise.versions.map((v) => v.version).sort((a, b) => Number(b === preferred) - Number(a === preferred));
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  for (const version of versions) {
    const resources = await custom.getAPIResources({ group: 'apps.kruise.io', version });
    if (resources.resources.some((resource) => resource.name === 'containerrecreaterequests')) return version;
  }
  return undefined;
}
