import { ApisApi, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';

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
