// The chart's hardening as `helm template` renders it: the fence's ValidatingAdmissionPolicies
// against the ones `serve --register-webhooks` writes (src/kube/fence.ts), rendered whenever it is
// on; the NetworkPolicies (on by default); which pods get a ServiceAccount token.
// test/e2e/fence.test.ts runs the installed fence against an attacker on a real API server.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { FENCE_RULES } from '../../src/kube/fence-rules.ts';
import { desiredFence, type FenceTarget } from '../../src/kube/fence.ts';
import { chartDir, find, get, podSpec, render, template, VAP_API_VERSION, type Manifest } from './helm.ts';

const served = { apiVersions: [VAP_API_VERSION] };
const fenceKinds = (manifests: Manifest[]) => manifests.filter((m) => m.kind.startsWith('ValidatingAdmissionPolicy')).map((m) => `${m.kind}/${m.metadata.name}`).sort();

t.test('charts/sidecar-terminator/files/fence-rules.json holds the rules of src/kube/fence-rules.ts', async (t) => {
  t.same(JSON.parse(readFileSync(join(chartDir, 'files/fence-rules.json'), 'utf8')), FENCE_RULES, 'up to date (node scripts/fence-rules.ts --write regenerates it)');
});

t.test('the fence is the one serve --register-webhooks writes, with the release its parameters', async (t) => {
  const cases: Array<{ values: object; release: string; namespace: string; target: FenceTarget }> = [
    {
      values: {},
      release: 'sidecar-terminator',
      namespace: 'sidecar-terminator',
      target: {
        namespace: 'sidecar-terminator',
        serviceAccounts: { watcher: 'sidecar-terminator-watcher', webhook: 'sidecar-terminator-webhook' },
        leaseName: 'sidecar-terminator-watcher',
        signalImage: 'ghcr.io/sidecar-terminator/stop-sidecar:0.1.0',
        quickExitImage: 'ghcr.io/sidecar-terminator/quick-exit:0.1.0',
        tlsSecret: 'sidecar-terminator-tls',
        configurationName: 'sidecar-terminator',
      },
    },
    {
      values: {
        image: { repository: 'registry.example.com/st', tag: '0.2.0' },
        webhook: { configurationName: 'sidecars', serviceAccount: { name: 'admission' }, tls: { secretName: 'admission-tls' } },
        watcher: { serviceAccount: { name: 'stopper' }, leaderElection: { leaseName: 'stopper' }, signalImage: 'registry.example.com/signal:1', quickExitImage: '' },
      },
      release: 'st',
      namespace: 'platform',
      target: {
        namespace: 'platform',
        serviceAccounts: { watcher: 'stopper', webhook: 'admission' },
        leaseName: 'stopper',
        signalImage: 'registry.example.com/signal:1',
        quickExitImage: '',
        tlsSecret: 'admission-tls',
        configurationName: 'sidecars',
      },
    },
  ];
  for (const { values, release, namespace, target } of cases) {
    const manifests = await render(values, { release, namespace, ...served });
    for (const [component, expected] of Object.entries(desiredFence(target))) {
      const policy = get(manifests, 'ValidatingAdmissionPolicy', expected.policy.metadata!.name);
      t.same(policy.spec, expected.policy.spec, `${release} in ${namespace}: the ${component} policy`);
      const binding = get(manifests, 'ValidatingAdmissionPolicyBinding', expected.binding.metadata!.name);
      t.same(binding.spec, expected.binding.spec, `${release} in ${namespace}: its binding`);
    }
  }
  const signalArg = podSpec(await render(cases[1]!.values, served), 'watcher').containers[0]!.args!.find((arg) => arg.startsWith('--signal-image='));
  t.equal(signalArg, '--signal-image=registry.example.com/signal:1', 'the image the policy allows is the one the watcher is given');
});

t.test('on by default, whatever helm knows of the cluster; off only when told, and the chart then says what that costs', async (t) => {
  const fence = [
    'ValidatingAdmissionPolicy/sidecar-terminator-watcher',
    'ValidatingAdmissionPolicy/sidecar-terminator-webhook',
    'ValidatingAdmissionPolicyBinding/sidecar-terminator-watcher',
    'ValidatingAdmissionPolicyBinding/sidecar-terminator-webhook',
  ];
  t.same(fenceKinds(await render({}, served)), fence);
  t.same(fenceKinds(await render()), fence, '`helm template` (GitOps) knows nothing of the cluster: the fence is rendered all the same');
  t.same(fenceKinds(await render({ fence: { enabled: false } }, served)), [], 'fence.enabled=false');
  const chart = parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')) as { kubeVersion: string };
  t.equal(chart.kubeVersion, '>=1.30.0-0', 'kubeVersion: the release that serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy');
  const values = readFileSync(join(chartDir, 'values.yaml'), 'utf8');
  t.match(values, /Turning it off costs that protection: a stolen watcher token can then\n# patch any pod/, 'values.yaml says what turning it off costs');
});

t.test('ServiceAccount tokens: mounted only into the two Deployments, which call the API server', async (t) => {
  const manifests = await render();
  for (const component of ['webhook', 'watcher'] as const) {
    const account = get(manifests, 'ServiceAccount', `sidecar-terminator-${component}`);
    t.equal(account.automountServiceAccountToken, false, `${component}: the ServiceAccount mounts no token by default`);
    t.equal(podSpec(manifests, component).automountServiceAccountToken, true, `${component}: its pods ask for one`);
  }
});

t.test('NetworkPolicies: on by default, the webhook port from the API server alone, the watcher metrics only when asked', async (t) => {
  const spec = (manifests: Manifest[], component: string) => get(manifests, 'NetworkPolicy', `sidecar-terminator-${component}`).spec as Record<string, unknown>;
  t.notOk(find(await render({ networkPolicy: { enabled: false } }), 'NetworkPolicy'), 'networkPolicy.enabled=false: none');

  // helm template reads nothing from a cluster: no API server address to admit, so every source (NOTES.txt warns on install).
  const unknown = await render();
  t.same(spec(unknown, 'webhook'), {
    podSelector: { matchLabels: { 'app.kubernetes.io/name': 'sidecar-terminator', 'app.kubernetes.io/instance': 'sidecar-terminator', 'app.kubernetes.io/component': 'webhook' } },
    policyTypes: ['Ingress'],
    ingress: [{ ports: [{ port: 9443, protocol: 'TCP' }] }],
  }, 'the webhook: its HTTPS port (admission and metrics); from anywhere when the API server is unknown');
  t.same(spec(unknown, 'watcher').ingress, [], 'the watcher: nothing');

  const apiServer = await render({ networkPolicy: { apiServerCIDRs: ['10.0.0.10/32', 'fd00::10/128'] } });
  t.same(spec(apiServer, 'webhook').ingress, [{ ports: [{ port: 9443, protocol: 'TCP' }], from: [{ ipBlock: { cidr: '10.0.0.10/32' } }, { ipBlock: { cidr: 'fd00::10/128' } }] }], 'the webhook: from the API server');
  const monitoring = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }];
  const scraped = await render({ networkPolicy: { apiServerCIDRs: ['10.0.0.10/32'], metrics: { enabled: true, from: monitoring } } });
  t.same(spec(scraped, 'webhook').ingress, [{ ports: [{ port: 9443, protocol: 'TCP' }], from: [{ ipBlock: { cidr: '10.0.0.10/32' } }] }, { ports: [{ port: 9443, protocol: 'TCP' }], from: monitoring }], 'the webhook: and its scrapers');
  t.same(spec(scraped, 'watcher').ingress, [{ ports: [{ port: 8081, protocol: 'TCP' }], from: monitoring }], 'the watcher: its metrics port, from the given peers');
  const peers = [{ podSelector: { matchLabels: { app: 'konnectivity-agent' } }, namespaceSelector: {} }];
  t.same(spec(await render({ networkPolicy: { webhookFrom: peers } }), 'webhook').ingress, [{ ports: [{ port: 9443, protocol: 'TCP' }], from: peers }], 'the webhook: from the given peers');
  const noProbes = await render({ networkPolicy: { metrics: { enabled: true } }, watcher: { probePort: 0 } });
  t.same(spec(noProbes, 'watcher').ingress, [], 'no metrics port, no ingress');
  t.equal((await template({ networkPolicy: { apiServerCIDRs: ['10.0.0.10'] } })).code, 1, 'an address without a prefix length is refused by the schema');
});

t.test('NetworkPolicies keep scraping open whenever a ServiceMonitor is on', async (t) => {
  const spec = (manifests: Manifest[], component: string) => get(manifests, 'NetworkPolicy', `sidecar-terminator-${component}`).spec as Record<string, unknown>;
  const apiServers = [{ ipBlock: { cidr: '10.0.0.0/24' } }];
  const monitoring = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }];
  const scraped = await render({ serviceMonitor: { enabled: true }, networkPolicy: { enabled: true, webhookFrom: apiServers } });
  t.same(spec(scraped, 'watcher').ingress, [{ ports: [{ port: 8081, protocol: 'TCP' }] }], 'the watcher: its metrics port, though networkPolicy.metrics.enabled is false');
  t.same(spec(scraped, 'webhook').ingress, [{ ports: [{ port: 9443, protocol: 'TCP' }], from: apiServers }, { ports: [{ port: 9443, protocol: 'TCP' }] }], 'the webhook: the port narrowed to the API server, and open again for the scrapes of its /metrics');
  const narrowed = await render({ serviceMonitor: { enabled: true }, networkPolicy: { enabled: true, webhookFrom: apiServers, metrics: { enabled: false, from: monitoring } } });
  t.same(spec(narrowed, 'webhook').ingress, [{ ports: [{ port: 9443, protocol: 'TCP' }], from: apiServers }, { ports: [{ port: 9443, protocol: 'TCP' }], from: monitoring }], 'from networkPolicy.metrics.from when given');
  t.same(spec(narrowed, 'watcher').ingress, [{ ports: [{ port: 8081, protocol: 'TCP' }], from: monitoring }]);
  const open = await render({ serviceMonitor: { enabled: true }, networkPolicy: { enabled: true } });
  t.same(spec(open, 'webhook').ingress, [{ ports: [{ port: 9443, protocol: 'TCP' }] }], 'a webhook port open to every source needs no second rule');
});
