// What the cluster serves, read from its discovery documents (`/apis`, `/apis/GROUP/VERSION`),
// which the built-in system:discovery ClusterRole lets every authenticated user read.
import { ApisApi, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { CRR } from '../policy/index.ts';

/** The apps.kruise.io version that serves ContainerRecreateRequest, if the cluster has the CRD. */
export async function servedCrrVersion(kubeConfig: KubeConfig): Promise<string | undefined> {
  const groups = await kubeConfig.makeApiClient(ApisApi).getAPIVersions();
  const kruise = groups.groups.find((group) => group.name === CRR.group);
  if (!kruise) return undefined;
  const preferred = kruise.preferredVersion?.version;
  const versions = kruise.versions.map((v) => v.version).sort((a, b) => Number(b === preferred) - Number(a === preferred));
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  for (const version of versions) {
    const resources = await custom.getAPIResources({ group: CRR.group, version });
    if (resources.resources.some((resource) => resource.name === CRR.plural)) return version;
  }
  return undefined;
}
