// How the add-on reaches the API server and which namespace it lives in.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';

const SERVICE_ACCOUNT_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';
const DEFAULT_NAMESPACE = 'sidecar-terminator';

/** The kubeconfig file given by flag, else $KUBECONFIG, else the pod's service account. */
export function loadKubeConfig(kubeconfigPath: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (kubeconfigPath) kubeConfig.loadFromFile(kubeconfigPath);
  // $KUBECONFIG may list several files; loadFromDefault merges them the way kubectl does.
  else if (process.env.KUBECONFIG) kubeConfig.loadFromDefault();
  else if (process.env.KUBERNETES_SERVICE_HOST) kubeConfig.loadFromCluster();
  else throw new Error('no Kubernetes API server configured: pass --kubeconfig, set $KUBECONFIG, or run in a pod');
  return kubeConfig;
}

/** The --namespace flag, else the pod's own namespace, else sidecar-terminator. */
export function resolveNamespace(flag: string): string {
  if (flag) return flag;
  try {
    return readFileSync(SERVICE_ACCOUNT_NAMESPACE, 'utf8').trim() || DEFAULT_NAMESPACE;
  } catch {
    return DEFAULT_NAMESPACE;
  }
}
