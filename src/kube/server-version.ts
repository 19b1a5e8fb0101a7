// The API server's Kubernetes version (/version, which every client may read: the built-in
// system:public-info-viewer ClusterRole grants it), for what the add-on can do on it.
import { VersionApi, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { nativeSidecarSupport, parseKubernetesVersion, type KubernetesVersion, type NativeSidecarsMode } from '../policy/index.ts';

export async function readServerVersion(kubeConfig: KubeConfig): Promise<KubernetesVersion> {
  const info = await kubeConfig.makeApiClient(VersionApi).getCode();
  const version = parseKubernetesVersion(info);
  if (!version) throw new Error(`the API server reports a version this add-on cannot read: ${JSON.stringify({ gitVersion: info.gitVersion, major: info.major, minor: info.minor })}`);
  return version;
}

/** Whether the webhook migrates pods (--native-sidecars, on a server that runs native sidecars); says so in the log. */
export async function nativeSidecarsOn(mode: NativeSidecarsMode, kubeConfig: KubeConfig, logger: Logger): Promise<boolean> {
  if (mode === 'none') return false;
  const version = await readServerVersion(kubeConfig);
  const { supported, note } = nativeSidecarSupport(version);
  if (supported) logger.info({ nativeSidecars: mode, kubernetes: version.gitVersion }, `native sidecar migration on: ${note}`);
  else logger.warn({ nativeSidecars: mode, kubernetes: version.gitVersion }, `native sidecar migration off: ${note}`);
  return supported;
}
