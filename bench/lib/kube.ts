// The bench harness's own Kubernetes client wiring (the driver and the kubelet simulator, not
// the watchers being measured): a KubeConfig whose API requests share keep-alive connections,
// through the same reuseConnections the add-on uses. Without it client-node opens a new TLS
// connection per request, and the harness would spend the two cores on handshakes while
// creating 22,000 pods and playing kubelet, slowing the system under test with them.
import { KubeConfig } from '@kubernetes/client-node';
import { reuseConnections } from '../../src/kube/client.ts';

export function pooledKubeConfig(path: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(path);
  return reuseConnections(kubeConfig);
}
