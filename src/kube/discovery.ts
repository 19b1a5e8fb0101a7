// What the cluster serves, read from its discovery documents (`/apis`, `/apis/GROUP/VERSION`),
// which the built-in system:discovery ClusterRole lets every authenticated user read.
import { ApisApi, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { CRR } from '../policy/index.ts';

/**
 * The ContainerRecreateRequest versions the add-on writes and reads: the fields it uses (podName,
 * containers[].name, strategy.failurePolicy and forceRecreate) are the same in both. OpenKruise
 * serves v1alpha1 up to v1.8, and from v1.9.0 (as the Go module proxy has it) v1alpha1 and
 * v1beta1, storing v1beta1.
 */
export const SPOKEN_CRR_VERSIONS: readonly string[] = ['v1beta1', 'v1alpha1'];

/**
 * Which of the group's versions to try, in order: the cluster's preferred version first when the
 * add-on speaks it (no conversion on the API server's side), then the other versions it speaks,
 * newest first. A version it does not speak is never tried, preferred or not.
 */
export function crrVersionsToTry(served: readonly string[], preferred: string | undefined): string[] {
  return SPOKEN_CRR_VERSIONS.filter((version) => served.includes(version)).sort((a, b) => Number(b === preferred) - Number(a === preferred));
}

/** The apps.kruise.io version to use for ContainerRecreateRequest, if the cluster has the CRD in a version the add-on speaks. */
export async function servedCrrVersion(kubeConfig: KubeConfig): Promise<string | undefined> {
  const groups = await kubeConfig.makeApiClient(ApisApi).getAPIVersions();
  const kruise = groups.groups.find((group) => group.name === CRR.group);
  if (!kruise) return undefined;
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  for (const version of crrVersionsToTry(kruise.versions.map((v) => v.version), kruise.preferredVersion?.version)) {
    const resources = await custom.getAPIResources({ group: CRR.group, version });
    if (resources.resources.some((resource) => resource.name === CRR.plural)) return version;
  }
  return undefined;
}
