// The chart's injected-sidecar policy (injectedSidecars): the ConfigMap of the enabled presets
// then the operator's entries, read by the webhook through --injected-sidecars and mounted as a
// directory (so that a change reaches it without a restart); the watcher, which applies no policy,
// gets none of it; nothing of it while no preset is enabled and no entry given; and two entries
// that serve would refuse together, refused at render time, naming the value.
import t from 'tap';
import { parse } from 'yaml';
import { parseInjectedSidecarPolicy } from '../../src/policy/injected-sidecar-file.ts';
import { argsOf, find, flagValue, get, podSpec, render, template, type Manifest } from './helm.ts';

const CONFIG_MAP = 'sidecar-terminator-injected-sidecars';

interface Mount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
  subPath?: string;
}

/** The policy file the chart rendered, as YAML reads it. */
function policyFile(manifests: Manifest[]): { entries: Array<Record<string, unknown>> } {
  const { data } = get(manifests, 'ConfigMap', CONFIG_MAP) as Manifest & { data: Record<string, string> };
  return parse(data['policy.yaml'] ?? '') as { entries: Array<Record<string, unknown>> };
}

/** Whether the component's pod has the policy's volume. */
const mountsPolicy = (manifests: Manifest[], component: 'webhook' | 'watcher') => (podSpec(manifests, component).volumes as Array<{ name: string }>).some((volume) => volume.name === 'injected-sidecars');

t.test('nothing enabled, no entry: no ConfigMap, no --injected-sidecars, no volume; the check interval is passed all the same', async (t) => {
  const variants = [{}, { injectedSidecars: { entries: [] } }, { injectedSidecars: { presets: { istio: { enabled: false, namespaceSelector: { matchLabels: { 'istio-injection': 'enabled' } } } } } }];
  for (const values of variants) {
    const manifests = await render(values);
    t.notOk(find(manifests, 'ConfigMap'), `${JSON.stringify(values)}: no ConfigMap`);
    t.equal(flagValue(argsOf(manifests, 'webhook'), 'injected-sidecars'), undefined, 'no policy file');
    t.equal(flagValue(argsOf(manifests, 'webhook'), 'injected-sidecars-check-interval'), '10s', 'the default interval');
    t.notOk(mountsPolicy(manifests, 'webhook'), 'no volume');
  }
});

t.test('each preset renders its one entry: the injector\'s container and its stop method, which serve reads', async (t) => {
  const expected: Record<string, Record<string, unknown>> = {
    istio: { name: 'istio', container: 'istio-proxy', stop: 'istio-proxy' },
    linkerd: { name: 'linkerd', container: 'linkerd-proxy', stop: 'linkerd-proxy' },
    vaultAgent: { name: 'vault-agent', container: 'vault-agent' },
    dapr: { name: 'dapr', container: 'daprd', stop: 'POST http://localhost:3500/v1.0/shutdown' },
    consul: { name: 'consul', container: 'consul-dataplane', stop: 'POST http://localhost:20600/graceful_shutdown', gracePeriodSeconds: 45 },
    cloudSqlProxy: { name: 'cloud-sql-proxy', container: 'cloud-sql-proxy', stop: 'cloud-sql-proxy' },
  };
  for (const [preset, entry] of Object.entries(expected)) {
    const file = policyFile(await render({ injectedSidecars: { presets: { [preset]: { enabled: true } } } }));
    t.same(file, { entries: [entry] }, preset);
    const parsed = parseInjectedSidecarPolicy(JSON.stringify(file));
    t.same(parsed, { policy: { entries: [{ ...entry, owners: [{ apiVersion: 'batch/v1', kind: 'Job' }] }] } }, `${preset}: serve takes it, for Job pods`);
  }
});

t.test('presets first, in the order of their keys, then the entries as given; a preset carries its namespaceSelector', async (t) => {
  const selector = { matchLabels: { 'istio-injection': 'enabled' }, matchExpressions: [{ key: 'team', operator: 'NotIn', values: ['legacy'] }] };
  const mine = [
    { name: 'otel', container: 'otc-container', gracePeriodSeconds: 20 },
    { name: 'bare-proxy', container: 'proxy', stop: 'envoy:15000', ignoreExitCode: true, owners: [{ apiVersion: 'v1', kind: 'Pod' }] },
  ];
  const presets = Object.fromEntries(['istio', 'linkerd', 'vaultAgent', 'dapr', 'consul', 'cloudSqlProxy'].map((key) => [key, { enabled: true }]));
  const file = policyFile(await render({ injectedSidecars: { presets: { ...presets, istio: { enabled: true, namespaceSelector: selector } }, entries: mine } }));
  t.same(file.entries.map((entry) => entry.name), ['cloud-sql-proxy', 'consul', 'dapr', 'istio', 'linkerd', 'vault-agent', 'otel', 'bare-proxy']);
  t.same(file.entries.find((entry) => entry.name === 'istio')?.namespaceSelector, selector);
  t.same(file.entries.slice(-2), mine, 'the entries unchanged');
  t.ok('policy' in parseInjectedSidecarPolicy(JSON.stringify(file)), 'serve takes the whole of it');
});

t.test('the webhook reads the ConfigMap: the flag names the file in the mounted directory, re-read every checkInterval; the watcher gets none of it', async (t) => {
  const manifests = await render({ injectedSidecars: { presets: { linkerd: { enabled: true } }, checkInterval: '30s' } }, { release: 'st', namespace: 'platform' });
  const configMap = get(manifests, 'ConfigMap', 'st-sidecar-terminator-injected-sidecars') as Manifest & { data: Record<string, string> };
  t.equal(configMap.metadata.namespace, 'platform');
  t.same(Object.keys(configMap.data), ['policy.yaml'], 'one file, policy.yaml');
  const pod = podSpec(manifests, 'webhook');
  const file = flagValue(argsOf(manifests, 'webhook'), 'injected-sidecars');
  t.equal(flagValue(argsOf(manifests, 'webhook'), 'injected-sidecars-check-interval'), '30s', 'checkInterval');
  const mount = (pod.containers[0]!.volumeMounts as Mount[]).find((each) => each.name === 'injected-sidecars');
  t.same(mount, { name: 'injected-sidecars', mountPath: '/etc/sidecar-terminator/injected-sidecars', readOnly: true }, 'the directory, read-only, no subPath (the kubelet updates no subPath mount)');
  t.equal(file, `${mount?.mountPath}/${Object.keys(configMap.data)[0]}`, '--injected-sidecars names the file in it');
  t.match(pod.volumes, [{ name: 'tmp' }, { name: 'injected-sidecars', configMap: { name: configMap.metadata.name } }], 'the ConfigMap');
  const watcherArgs = argsOf(manifests, 'watcher');
  t.notOk(watcherArgs.some((arg) => arg.startsWith('--injected-sidecars')) || mountsPolicy(manifests, 'watcher'), 'the watcher: no flag, no volume');
});

t.test('two entries with one name, or for one container, fail the render, naming the value', async (t) => {
  const cases: Array<[string, object, RegExp]> = [
    ['an entry named as a preset', { presets: { istio: { enabled: true } }, entries: [{ name: 'istio', container: 'sidecar' }] }, /injectedSidecars\.entries\[0\]\.name: "istio" is also the name of the istio preset \(injectedSidecars\.presets\.istio\)/],
    ['two entries of one name', { entries: [{ name: 'agent', container: 'one' }, { name: 'agent', container: 'two' }] }, /injectedSidecars\.entries\[1\]\.name: "agent" is also the name of injectedSidecars\.entries\[0\]/],
    ['an entry for a preset\'s container', { presets: { linkerd: { enabled: true } }, entries: [{ name: 'mesh', container: 'linkerd-proxy' }] }, /injectedSidecars\.entries\[0\]\.container: "linkerd-proxy" is also the container of the linkerd preset/],
  ];
  for (const [what, injectedSidecars, message] of cases) {
    const result = await template({ injectedSidecars });
    t.not(result.code, 0, `${what}: refused`);
    t.match(result.stderr, message, what);
  }
  const disabled = await template({ injectedSidecars: { presets: { istio: { enabled: false } }, entries: [{ name: 'istio', container: 'istio-proxy' }] } });
  t.equal(disabled.code, 0, `a preset that is not enabled takes no name: ${disabled.stderr}`);
});
