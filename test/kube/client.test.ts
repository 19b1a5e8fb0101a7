// reuseConnections: one pooled dispatcher for every API request while the TLS settings stay the same.
import t from 'tap';
import { HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { reuseConnections } from '../../src/kube/client.ts';
import { issueWithNewCa } from '../../src/tls/certificates.ts';

const ISSUE = { hosts: ['localhost'], validityMs: 24 * 3600_000, now: new Date() };

function kubeConfigWith(caPem: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from(caPem).toString('base64'), skipTLSVerify: false }],
    users: [{ name: 'u', token: 'not-a-real-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kubeConfig;
}

async function dispatcherOf(kubeConfig: KubeConfig): Promise<unknown> {
  const context = new RequestContext('https://127.0.0.1:6443/api/v1/pods', HttpMethod.GET);
  await kubeConfig.applySecurityAuthentication(context);
  return context.getDispatcher();
}

t.test('requests share one dispatcher while the TLS settings stay the same', async (t) => {
  const { caBundle } = await issueWithNewCa(ISSUE);
  const plain = kubeConfigWith(caBundle);
  t.not(await dispatcherOf(plain), await dispatcherOf(plain), "client-node alone builds a dispatcher per request (the reason for reuseConnections)");

  const pooled = reuseConnections(kubeConfigWith(caBundle));
  const first = await dispatcherOf(pooled);
  t.ok(first, 'a dispatcher is set');
  t.equal(await dispatcherOf(pooled), first, 'the second request gets the same dispatcher');
});

t.test('a changed CA gets a new dispatcher', async (t) => {
  const { caBundle } = await issueWithNewCa(ISSUE);
  const { caBundle: other } = await issueWithNewCa(ISSUE);
  const kubeConfig = reuseConnections(kubeConfigWith(caBundle));
  const first = await dispatcherOf(kubeConfig);
  // As when the CA file of a service account is rotated: the next request reads the new one.
  (kubeConfig.getCurrentCluster() as { caData?: string }).caData = Buffer.from(other).toString('base64');
  const second = await dispatcherOf(kubeConfig);
  t.not(second, first, 'new TLS settings, new dispatcher');
  t.equal(await dispatcherOf(kubeConfig), second, 'then reused again');
});
