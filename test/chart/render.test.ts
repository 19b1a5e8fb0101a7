// The Helm chart as `helm lint` and `helm template` see it: which objects it renders, how the
// values become serve flags (read back with the CLI's own parser), the webhook configurations
// against the ones src/kube/webhook-configurations.ts registers, probes and security settings.
import t from 'tap';
import { parseFlags } from '../../src/cli.ts';
import { SERVE_FLAGS } from '../../src/config.ts';
import { desiredWebhookConfigurations } from '../../src/kube/webhook-configurations.ts';
import { CHART_SETTINGS, type Component } from '../support/config-reference.ts';
import { argsOf, chartDir, find, flagValue, get, helm, podSpec, render, template, valuesAt, valuesFile, type Manifest } from './helm.ts';

const COMPONENTS: Component[] = ['webhook', 'watcher'];
const defaults = await render();

/** Values that switch on every optional object, for checks that must hold for all of them. */
const everything = {
  serviceMonitor: { enabled: true },
  prometheusRule: { enabled: true },
  grafanaDashboard: { enabled: true },
  watcher: { namespaces: ['team-a', 'team-b'], replicas: 2 },
  admission: { quickExitImageAllowlist: ['registry.example.com/quick-exit:*'] },
  webhook: { tls: { extraHosts: ['webhook.example.com'] }, namespaceLabels: { 'sidecar-terminator.io/enabled': 'true' } },
  injectedSidecars: { presets: { istio: { enabled: true, namespaceSelector: { matchLabels: { 'istio-injection': 'enabled' } } } }, entries: [{ name: 'otel', container: 'otc-container' }] },
};

t.test('helm lint --strict passes, with the default values and with every option on', async (t) => {
  const plain = await helm(['lint', '--strict', chartDir]);
  t.equal(plain.code, 0, plain.stdout + plain.stderr);
  const file = valuesFile(everything);
  t.teardown(file.cleanup);
  const full = await helm(['lint', '--strict', chartDir, '--values', file.path]);
  t.equal(full.code, 0, full.stdout + full.stderr);
});

t.test('the default release renders the two Deployments and what they need, and no Secret', async (t) => {
  const kinds = defaults.map((m) => `${m.kind}/${m.metadata.name}`).sort();
  t.same(kinds, [
    'ClusterRole/sidecar-terminator-watcher',
    'ClusterRole/sidecar-terminator-webhook',
    'ClusterRole/sidecar-terminator-webhooks-cleanup',
    'ClusterRoleBinding/sidecar-terminator-watcher',
    'ClusterRoleBinding/sidecar-terminator-webhook',
    'ClusterRoleBinding/sidecar-terminator-webhooks-cleanup',
    'Deployment/sidecar-terminator-watcher',
    'Deployment/sidecar-terminator-webhook',
    'Job/sidecar-terminator-webhooks-cleanup',
    'MutatingWebhookConfiguration/sidecar-terminator',
    'NetworkPolicy/sidecar-terminator-watcher',
    'NetworkPolicy/sidecar-terminator-webhook',
    'PodDisruptionBudget/sidecar-terminator-webhook',
    'Role/sidecar-terminator-watcher-leader',
    'Role/sidecar-terminator-webhook',
    'RoleBinding/sidecar-terminator-watcher-leader',
    'RoleBinding/sidecar-terminator-webhook',
    'Service/sidecar-terminator',
    'ServiceAccount/sidecar-terminator-watcher',
    'ServiceAccount/sidecar-terminator-webhook',
    'ServiceAccount/sidecar-terminator-webhooks-cleanup',
    'ValidatingAdmissionPolicy/sidecar-terminator-watcher',
    'ValidatingAdmissionPolicy/sidecar-terminator-webhook',
    'ValidatingAdmissionPolicyBinding/sidecar-terminator-watcher',
    'ValidatingAdmissionPolicyBinding/sidecar-terminator-webhook',
    'ValidatingWebhookConfiguration/sidecar-terminator',
  ]);
  for (const manifest of [...defaults, ...(await render(everything))]) {
    t.not(manifest.kind, 'Secret', 'the TLS Secret is never pre-created: the webhook creates it with its own type');
    t.equal(manifest.metadata.labels?.['app.kubernetes.io/instance'], 'sidecar-terminator', `${manifest.kind}/${manifest.metadata.name} carries the release labels`);
    const clusterScoped = ['ClusterRole', 'ClusterRoleBinding', 'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'].includes(manifest.kind);
    t.equal(manifest.metadata.namespace === undefined, clusterScoped, `${manifest.kind}/${manifest.metadata.name}: namespace set exactly when namespaced`);
  }
});

t.test('webhook: serve --no-watcher, two replicas under a PodDisruptionBudget that never blocks a drain, HTTPS probes', async (t) => {
  const deployment = get(defaults, 'Deployment', 'sidecar-terminator-webhook');
  const spec = deployment.spec as { replicas: number; strategy: { rollingUpdate: { maxUnavailable: number } }; selector: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string> } } };
  t.equal(spec.replicas, 2);
  t.equal(spec.strategy.rollingUpdate.maxUnavailable, 0, 'a rollout never takes a replica away first');
  t.match(spec.template.metadata.labels, spec.selector.matchLabels, 'the selector matches the pods');
  const container = podSpec(defaults, 'webhook').containers[0]!;
  t.same(container.args!.slice(0, 2), ['serve', '--no-watcher']);
  t.match(container.ports, [{ name: 'https', containerPort: 9443 }]);
  t.match(container.livenessProbe, { httpGet: { path: '/healthz', port: 'https', scheme: 'HTTPS' } });
  t.match(container.readinessProbe, { httpGet: { path: '/readyz', port: 'https', scheme: 'HTTPS' } });
  t.same(container.lifecycle, { preStop: { sleep: { seconds: 5 } } }, 'a preStop sleep: the pod serves on while its endpoint removal spreads');
  t.equal(flagValue(container.args!, 'shutdown-drain'), '3s', 'then the drain of --shutdown-drain');
  t.notOk(podSpec(await render({ webhook: { shutdown: { preStopSleepSeconds: 0, drain: '3s' } } }), 'webhook').containers[0]!.lifecycle, 'preStopSleepSeconds 0: no preStop');

  const pdb = get(defaults, 'PodDisruptionBudget') as Manifest & { spec: { minAvailable?: number; maxUnavailable: number; unhealthyPodEvictionPolicy: string; selector: { matchLabels: Record<string, string> } } };
  t.equal(pdb.spec.maxUnavailable, 1, 'one pod at a time: with one replica a drain still goes through (minAvailable: 1 would block it)');
  t.equal(pdb.spec.minAvailable, undefined);
  t.equal(pdb.spec.unhealthyPodEvictionPolicy, 'AlwaysAllow', 'a replica that is not ready never holds a drain up');
  t.same(pdb.spec.selector.matchLabels, spec.selector.matchLabels, 'the budget covers the webhook pods');
  const service = get(defaults, 'Service', 'sidecar-terminator') as Manifest & { spec: { selector: Record<string, string>; ports: unknown[] } };
  t.same(service.spec.selector, spec.selector.matchLabels, 'the Service sends to the webhook pods only');
  t.same(service.spec.ports, [{ name: 'https', port: 443, targetPort: 'https', protocol: 'TCP' }]);
  t.notOk(find(await render({ webhook: { podDisruptionBudget: { enabled: false } } }), 'PodDisruptionBudget'), 'the budget can be turned off');
});

t.test('watcher: serve --no-webhook, one replica, leader election, plain-HTTP probes on --probe-address', async (t) => {
  const deployment = get(defaults, 'Deployment', 'sidecar-terminator-watcher');
  t.match(deployment.spec, { replicas: 1, strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0 } } });
  const container = podSpec(defaults, 'watcher').containers[0]!;
  t.same(container.args!.slice(0, 2), ['serve', '--no-webhook']);
  t.equal(flagValue(container.args!, 'leader-elect'), true);
  t.equal(flagValue(container.args!, 'probe-address'), '0.0.0.0:8081');
  t.match(container.ports, [{ name: 'http-probes', containerPort: 8081 }]);
  t.match(container.livenessProbe, { httpGet: { path: '/healthz', port: 'http-probes' } });
  t.match(container.readinessProbe, { httpGet: { path: '/readyz', port: 'http-probes' } });
  t.notOk((container.livenessProbe as { httpGet: { scheme?: string } }).httpGet.scheme, 'plain HTTP');

  const single = await render({ watcher: { leaderElection: { enabled: false } } });
  t.match(get(single, 'Deployment', 'sidecar-terminator-watcher').spec, { replicas: 1, strategy: { type: 'Recreate' } }, 'without leader election, never two watchers at once');
  t.equal(flagValue(argsOf(single, 'watcher'), 'leader-elect'), undefined);
  t.notOk(find(single, 'Role', 'sidecar-terminator-watcher-leader'), 'and no Lease permissions');

  const noProbes = podSpec(await render({ watcher: { probePort: 0 } }), 'watcher').containers[0]!;
  t.equal(flagValue(noProbes.args!, 'probe-address'), undefined, 'probePort 0: no listener');
  t.notOk(noProbes.livenessProbe ?? noProbes.readinessProbe ?? noProbes.ports, 'and no probes or ports');
});

t.test('both containers: non-root, read-only root filesystem, no capabilities, RuntimeDefault seccomp, requests', async (t) => {
  for (const component of COMPONENTS) {
    const pod = podSpec(defaults, component);
    const container = pod.containers[0]!;
    t.match(pod.securityContext, { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } }, `${component}: pod`);
    t.match(
      container.securityContext,
      { runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } },
      `${component}: container`,
    );
    t.match(container.resources, { requests: { cpu: String, memory: String }, limits: { memory: String } }, `${component}: resources`);
    t.equal(container.image, 'ghcr.io/sidecar-terminator/sidecar-terminator:0.1.0', `${component}: the chart's appVersion`);
    t.equal(pod.serviceAccountName, `sidecar-terminator-${component}`, `${component}: its own ServiceAccount`);
    t.ok((pod.terminationGracePeriodSeconds as number) > 20, `${component}: longer than --shutdown-grace`);
  }
});

t.test('the webhook configurations are the ones serve --register-webhooks writes, pointed at the Service, without caBundle', async (t) => {
  const cases = [
    { values: {}, release: 'sidecar-terminator', namespace: 'sidecar-terminator', target: { name: 'sidecar-terminator', serviceName: 'sidecar-terminator', failurePolicy: 'Ignore' } },
    { values: { webhook: { failurePolicy: 'Fail' } }, release: 'st', namespace: 'platform', target: { name: 'st-sidecar-terminator', serviceName: 'st-sidecar-terminator', failurePolicy: 'Fail' } },
    { values: { webhook: { configurationName: 'sidecars' } }, release: 'sidecar-terminator', namespace: 'kube-system', target: { name: 'sidecars', serviceName: 'sidecar-terminator', failurePolicy: 'Ignore' } },
    { values: { webhook: { excludedNamespaces: ['batch-legacy'] } }, release: 'sidecar-terminator', namespace: 'sidecar-terminator', target: { name: 'sidecar-terminator', serviceName: 'sidecar-terminator', failurePolicy: 'Ignore', excludedNamespaces: ['batch-legacy'] } },
    { values: { admission: { nativeSidecars: 'labelled' } }, release: 'sidecar-terminator', namespace: 'sidecar-terminator', target: { name: 'sidecar-terminator', serviceName: 'sidecar-terminator', failurePolicy: 'Ignore', nativeSidecars: 'labelled' as const } },
    { values: { admission: { nativeSidecars: 'all' }, webhook: { failurePolicy: 'Fail' } }, release: 'st', namespace: 'platform', target: { name: 'st-sidecar-terminator', serviceName: 'st-sidecar-terminator', failurePolicy: 'Fail', nativeSidecars: 'all' as const } },
    { values: { admission: { nativeSidecars: 'labelled' }, webhook: { namespaceLabels: { team: 'batch' } } }, release: 'sidecar-terminator', namespace: 'sidecar-terminator', target: { name: 'sidecar-terminator', serviceName: 'sidecar-terminator', failurePolicy: 'Ignore', nativeSidecars: 'labelled' as const, namespaceLabels: { team: 'batch' } } },
    { values: { admission: { validateWorkloads: true }, webhook: { timeoutSeconds: 7 } }, release: 'sidecar-terminator', namespace: 'sidecar-terminator', target: { name: 'sidecar-terminator', serviceName: 'sidecar-terminator', failurePolicy: 'Ignore', validateWorkloads: true, timeoutSeconds: 7 } },
  ];
  for (const { values, release, namespace, target } of cases) {
    const manifests = await render(values, { release, namespace });
    const desired = desiredWebhookConfigurations({ excludedNamespaces: [], ...target, namespace, url: '' }, '');
    for (const [kind, expected] of [['MutatingWebhookConfiguration', desired.mutating], ['ValidatingWebhookConfiguration', desired.validating]] as const) {
      const rendered = get(manifests, kind, target.name) as Manifest & { webhooks: Array<{ clientConfig: Record<string, unknown> }> };
      for (const webhook of rendered.webhooks) t.notOk('caBundle' in webhook.clientConfig, `${kind}: the chart leaves caBundle to the webhook`);
      const withoutCa = expected.webhooks!.map((webhook) => ({ ...webhook, clientConfig: { service: webhook.clientConfig.service } }));
      t.same(rendered.webhooks, withoutCa, `${kind} in ${namespace}: same webhooks, rules, paths, policies and selectors`);
    }
    t.equal(flagValue(argsOf(manifests, 'webhook'), 'webhook-config-name'), target.name, 'the webhook patches the caBundle of these');
    t.equal(flagValue(argsOf(manifests, 'webhook'), 'service-name'), target.serviceName, 'and its certificate names this Service');
    t.ok(find(manifests, 'Service', target.serviceName), 'which exists');
  }

  const custom = await render({ webhook: { excludedNamespaces: ['istio-system'], namespaceLabels: { team: 'batch' }, timeoutSeconds: 5 } });
  const webhook = (get(custom, 'ValidatingWebhookConfiguration') as Manifest & { webhooks: Array<Record<string, unknown>> }).webhooks[0];
  t.same(webhook?.namespaceSelector, {
    matchLabels: { team: 'batch' },
    matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'istio-system', 'sidecar-terminator'] }],
  }, 'more exclusions, opt-in labels; kube-system and the release namespace stay excluded');
  t.equal(webhook?.timeoutSeconds, 5);

  const native = await render({ admission: { nativeSidecars: 'labelled' }, webhook: { namespaceLabels: { team: 'batch' } } });

t.test('kube-system and the release namespace are excluded from every webhook, whatever webhook.excludedNamespaces says', async (t) => {
  const lists = [[], ['team-x'], ['team-x', 'kube-system'], ['platform', 'team-x']];
  for (const excludedNamespaces of lists) {
    const manifests = await render({ webhook: { excludedNamespaces }, admission: { nativeSidecars: 'all' } }, { namespace: 'platform' });
    const webhooks = ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration'].flatMap((kind) => (get(manifests, kind) as Manifest & { webhooks: Array<{ name: string; namespaceSelector: { matchExpressions: Array<{ key: string; operator: string; values: string[] }> } }> }).webhooks);
    t.equal(webhooks.length, 3, 'native-sidecars, mutate and validate');
    for (const webhook of webhooks) {
      const [excluded, ...more] = webhook.namespaceSelector.matchExpressions;
      t.same(more, [], `${webhook.name}: one expression`);
      t.match(excluded, { key: 'kubernetes.io/metadata.name', operator: 'NotIn' });
      t.same(excluded?.values, [...new Set(['kube-system', ...excludedNamespaces, 'platform'])], `${webhook.name}, excludedNamespaces ${JSON.stringify(excludedNamespaces)}: kube-system, the list, the release namespace`);
    }
  }
});

t.test('webhook.tls.certManager: a Certificate from the chosen issuer, cainjector\'s annotation, the Secret mounted, no certificate permissions', async (t) => {
  const values = { webhook: { tls: { extraHosts: ['webhook.example.com', '10.0.0.7'], certManager: { enabled: true, issuerRef: { name: 'corp-ca', kind: 'ClusterIssuer', group: 'cert-manager.io' }, duration: '2160h', renewBefore: '' } } } };
  const manifests = await render(values, { release: 'st', namespace: 'platform' });
  const certificate = get(manifests, 'Certificate', 'st-sidecar-terminator-serving') as Manifest & { spec: Record<string, unknown> };
  t.equal(certificate.apiVersion, 'cert-manager.io/v1');
  t.same(certificate.spec, {
    secretName: 'st-sidecar-terminator-tls',
    dnsNames: ['st-sidecar-terminator', 'st-sidecar-terminator.platform', 'st-sidecar-terminator.platform.svc', 'st-sidecar-terminator.platform.svc.cluster.local', 'webhook.example.com'],
    ipAddresses: ['10.0.0.7'],
    issuerRef: { name: 'corp-ca', kind: 'ClusterIssuer', group: 'cert-manager.io' },
    privateKey: { algorithm: 'ECDSA', size: 256, rotationPolicy: 'Always' },
    usages: ['digital signature', 'server auth'],
    duration: '2160h',
  }, "the names of the webhook's own certificate, for the Secret the webhook serves");
  for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) {
    t.same(get(manifests, kind).metadata.annotations, { 'cert-manager.io/inject-ca-from': 'platform/st-sidecar-terminator-serving' }, `${kind}: cainjector writes its caBundle`);
  }
  const webhook = podSpec(manifests, 'webhook');
  t.equal(flagValue(webhook.containers[0]!.args!, 'tls-cert-dir'), '/tls');
  t.match(webhook.containers[0], { volumeMounts: [{ name: 'tmp' }, { name: 'tls', mountPath: '/tls', readOnly: true }] });
  t.match(webhook.volumes, [{ name: 'tmp' }, { name: 'tls', secret: { secretName: 'st-sidecar-terminator-tls' } }]);
  t.notOk(find(manifests, 'Role', 'st-sidecar-terminator-webhook'), 'no Secret permissions');
  t.same((get(manifests, 'ClusterRole', 'st-sidecar-terminator-webhook') as Manifest & { rules: Array<{ resources: string[] }> }).rules.map((rule) => rule.resources), [['events'], ['jobs', 'cronjobs']], 'and none on the webhook configurations: events, and the owners they are about read back');
  t.notOk(find(defaults, 'Certificate'), 'off by default');
  t.notOk(get(defaults, 'MutatingWebhookConfiguration').metadata.annotations, 'and no annotation then');
});

t.test('every webhook carries matchConditions: the mutating ones for pods that can finish or are marked, the validating one for names that may be markers on what can finish, markers elsewhere', async (t) => {
  const manifests = await render({ admission: { nativeSidecars: 'labelled', validateWorkloads: true } });
  const webhooksOf = (kind: string) => (get(manifests, kind) as Manifest & { webhooks: Array<{ name: string; matchConditions?: Array<{ name: string; expression: string }> }> }).webhooks;
  for (const webhook of webhooksOf('MutatingWebhookConfiguration')) {
    t.same(webhook.matchConditions?.map((c) => c.name), ['may-finish-or-marked'], webhook.name);
    t.match(webhook.matchConditions?.[0]?.expression, "object.spec.restartPolicy in ['Never', 'OnFailure']", `${webhook.name}: every pod that can finish, marked or not`);
  }
  const [validating] = webhooksOf('ValidatingWebhookConfiguration');
  t.same(validating?.matchConditions?.map((c) => c.name), ['marked'], 'the validating webhook');
  const expression = validating?.matchConditions?.[0]?.expression ?? '';
  t.match(expression, "object.spec.template.spec.restartPolicy in ['Never', 'OnFailure'] ? (", "a template that can finish: names that may be markers or near misses");
  t.match(expression, "e.name.upperAscii().contains('SIDECAR')", 'tested in any case');
});
  const [migrating, labelling] = (get(native, 'MutatingWebhookConfiguration') as Manifest & { webhooks: Array<Record<string, unknown>> }).webhooks;
  t.equal(migrating?.name, 'native-sidecars.sidecar-terminator.io', 'the native-sidecars webhook comes first');
  const exclusions = [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'sidecar-terminator'] }];
  t.same(migrating?.namespaceSelector, { matchLabels: { team: 'batch', 'sidecar-terminator.io/native-sidecars': 'enabled' }, matchExpressions: exclusions }, 'labelled: the opt-in labels and the native-sidecars label');
  t.same(labelling?.namespaceSelector, { matchLabels: { team: 'batch' }, matchExpressions: exclusions }, 'the label webhook keeps its selector');
});

t.test('the rendered args are valid serve flags: the CLI parses them, and names match the flag defaults', async (t) => {
  for (const [label, manifests] of [['defaults', defaults], ['every option on', await render(everything)]] as const) {
    for (const component of COMPONENTS) {
      const [command, ...args] = argsOf(manifests, component);
      t.equal(command, 'serve');
      const parsed = parseFlags('serve', SERVE_FLAGS, args, {});
      t.same(parsed.positionals, [], `${label}, ${component}: no stray arguments`);
      t.equal(parsed.values.namespace, 'sidecar-terminator', `${label}, ${component}: the release namespace`);
      t.equal(parsed.values.noWebhook, component === 'watcher');
      t.equal(parsed.values.noWatcher, component === 'webhook');
    }
  }
  // With the release named sidecar-terminator, the chart's names are the flags' defaults, so a
  // process started by hand next to the chart finds the same Secret, configurations and Lease.
  const webhook = parseFlags('serve', SERVE_FLAGS, argsOf(defaults, 'webhook').slice(1), {}).values;
  const watcher = parseFlags('serve', SERVE_FLAGS, argsOf(defaults, 'watcher').slice(1), {}).values;
  t.equal(webhook.tlsSecret, SERVE_FLAGS.tlsSecret.default);
  t.equal(webhook.serviceName, SERVE_FLAGS.serviceName.default);
  t.equal(webhook.webhookConfigName, SERVE_FLAGS.webhookConfigName.default);
  t.equal(watcher.leaderElectionLease, SERVE_FLAGS.leaderElectionLease.default);
  t.equal(webhook.listenAddress, SERVE_FLAGS.listenAddress.default);
  for (const key of ['enforcement', 'bodyLimit', 'certValidity', 'certRenewBefore', 'certCheckInterval', 'failurePolicy', 'logLevel', 'shutdownGrace'] as const) {
    t.same(webhook[key], SERVE_FLAGS[key].default, `webhook --${SERVE_FLAGS[key].name}: values.yaml keeps the code's default`);
  }
  for (const key of ['killMechanism', 'concurrency', 'sweepInterval', 'leaderElectionDuration', 'namespaces', 'quickExitImageAllowlist'] as const) {
    t.same(watcher[key], SERVE_FLAGS[key].default, `watcher --${SERVE_FLAGS[key].name}: values.yaml keeps the code's default`);
  }
});

t.test('every serve flag is set from a value, set by the chart, or deliberately not set', async (t) => {
  t.same(Object.keys(CHART_SETTINGS).sort(), Object.keys(SERVE_FLAGS).sort(), 'test/support/config-reference.ts covers exactly the flags of src/config.ts');
  for (const [key, setting] of Object.entries(CHART_SETTINGS)) {
    const spec = SERVE_FLAGS[key as keyof typeof SERVE_FLAGS];
    if (!spec) continue;
    if (setting.kind === 'unset') {
      for (const component of COMPONENTS) t.equal(flagValue(argsOf(defaults, component), spec.name), undefined, `--${spec.name} is not set (${setting.note})`);
      continue;
    }
    if (setting.kind === 'fixed') {
      for (const component of COMPONENTS) t.equal(flagValue(argsOf(defaults, component), spec.name) !== undefined, setting.components.includes(component), `--${spec.name} on the ${component}: ${setting.note}`);
      continue;
    }
    const manifests = await render(valuesAt(setting.path, setting.sample));
    for (const component of COMPONENTS) {
      const expected = setting.components.includes(component) ? (setting.arg ?? undefined) : undefined;
      t.equal(flagValue(argsOf(manifests, component), spec.name), expected, `${setting.path}=${JSON.stringify(setting.sample)}: --${spec.name} on the ${component}`);
    }
  }
});

t.test('image: tag, digest, and the stop-sidecar and quick-exit images beside it', async (t) => {
  const byDigest = await render({ image: { repository: 'registry.example.com/st', digest: `sha256:${'a'.repeat(64)}` } });
  const image = `registry.example.com/st@sha256:${'a'.repeat(64)}`;
  for (const component of COMPONENTS) t.equal(podSpec(byDigest, component).containers[0]!.image, image, `${component} pulls by digest`);
  t.equal(flagValue(argsOf(byDigest, 'watcher'), 'signal-image'), 'registry.example.com/stop-sidecar:0.1.0', 'the signal container: stop-sidecar beside the image, with the chart version');
  t.equal(flagValue(argsOf(defaults, 'watcher'), 'signal-image'), 'ghcr.io/sidecar-terminator/stop-sidecar:0.1.0', 'by default, the one `serve` defaults to');
  t.equal(flagValue(argsOf(defaults, 'watcher'), 'quick-exit-image'), 'ghcr.io/sidecar-terminator/quick-exit:0.1.0');
  const tagged = await render({ image: { tag: '0.2.0', pullPolicy: 'Always' } });
  t.match(podSpec(tagged, 'webhook').containers[0], { image: 'ghcr.io/sidecar-terminator/sidecar-terminator:0.2.0', imagePullPolicy: 'Always' });
  t.equal(flagValue(argsOf(tagged, 'watcher'), 'signal-image'), 'ghcr.io/sidecar-terminator/stop-sidecar:0.2.0', 'and its tag');
  t.equal(flagValue(argsOf(await render({ watcher: { quickExitImage: '' } }), 'watcher'), 'quick-exit-image'), '', 'empty: the phase instead');
});

t.test('ServiceMonitors: the webhook over HTTPS checked with its own CA, the watcher over HTTP', async (t) => {
  t.notOk(find(defaults, 'ServiceMonitor'), 'off by default: the CRD may not exist');
  const manifests = await render({ serviceMonitor: { enabled: true, labels: { release: 'prometheus' } } });
  const webhook = get(manifests, 'ServiceMonitor', 'sidecar-terminator-webhook') as Manifest & { spec: Record<string, unknown> };
  t.match(webhook.metadata.labels, { release: 'prometheus' });
  t.match(webhook.spec, {
    selector: { matchLabels: { 'app.kubernetes.io/component': 'webhook' } },
    endpoints: [{ port: 'https', scheme: 'https', path: '/metrics', tlsConfig: { serverName: 'sidecar-terminator.sidecar-terminator.svc', ca: { secret: { name: 'sidecar-terminator-tls', key: 'ca.crt' } } } }],
  });
  const watcher = get(manifests, 'ServiceMonitor', 'sidecar-terminator-watcher') as Manifest & { spec: Record<string, unknown> };
  t.match(watcher.spec, { selector: { matchLabels: { 'app.kubernetes.io/component': 'watcher' } }, endpoints: [{ port: 'http-probes', path: '/metrics' }] });
  const service = get(manifests, 'Service', 'sidecar-terminator-watcher-metrics') as Manifest & { spec: { selector: Record<string, string>; ports: unknown[] } };
  t.same(service.spec.selector, (get(manifests, 'Deployment', 'sidecar-terminator-watcher').spec as { selector: { matchLabels: unknown } }).selector.matchLabels);
  t.match(service.spec.ports, [{ name: 'http-probes', port: 8081, targetPort: 'http-probes' }]);
  t.notOk(find(await render({ serviceMonitor: { enabled: true }, watcher: { probePort: 0 } }), 'ServiceMonitor', 'sidecar-terminator-watcher'), 'no watcher scrape without its listener');
});

t.test('rbac.create and serviceAccount.create off: the chart uses what exists', async (t) => {
  const manifests = await render({
    rbac: { create: false },
    webhook: { serviceAccount: { create: false, name: 'platform-webhook', annotations: {} } },
    watcher: { serviceAccount: { create: false, name: 'platform-watcher', annotations: {} } },
  });
  t.same(manifests.filter((m) => /Role|ServiceAccount/.test(m.kind)).map((m) => m.kind), []);
  t.equal(podSpec(manifests, 'webhook').serviceAccountName, 'platform-webhook');
  t.equal(podSpec(manifests, 'watcher').serviceAccountName, 'platform-watcher');
});

t.test('long release names stay within the 63-character limit and distinct', async (t) => {
  const release = 'a-release-name-as-long-as-helm-allows-53-characters-x';
  t.equal(release.length, 53);
  const manifests = await render({}, { release });
  const names = manifests.map((m) => `${m.kind}/${m.metadata.name}`);
  // The fence's objects take DNS subdomain names (253 characters), as the webhook configurations they are named after.
  const subdomainNamed = new Set(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
  for (const manifest of manifests) t.ok(manifest.metadata.name.length <= (subdomainNamed.has(manifest.kind) ? 253 : 63), `${manifest.kind}/${manifest.metadata.name}`);
  t.equal(new Set(names).size, names.length, 'no two objects of a kind share a name');
  t.not(flagValue(argsOf(manifests, 'webhook'), 'tls-secret'), flagValue(argsOf(manifests, 'webhook'), 'service-name'));
});

t.test('each container gets its env map: by default the watcher Node.js and glibc memory settings, the webhook its own pod', async (t) => {
  // The downward API: where the webhook reports on itself (an event on its own pod).
  const ownPod = [
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
  ];
  const envOf = (manifests: Manifest[], component: Component) => podSpec(manifests, component).containers[0]!.env;
  t.same(envOf(defaults, 'watcher'), [
    { name: 'MALLOC_ARENA_MAX', value: '2' },
    { name: 'NODE_OPTIONS', value: '--max-semi-space-size=1' },
  ]);
  t.same(envOf(defaults, 'webhook'), ownPod, 'the webhook keeps the defaults of Node.js');
  const chosen = await render({ webhook: { env: { NODE_OPTIONS: '--max-semi-space-size=4', UV_THREADPOOL_SIZE: 2 } }, watcher: { env: null } });
  t.same(envOf(chosen, 'webhook'), [
    ...ownPod,
    { name: 'NODE_OPTIONS', value: '--max-semi-space-size=4' },
    { name: 'UV_THREADPOOL_SIZE', value: '2' },
  ], 'values are quoted: a number becomes the string the API server requires');
  t.equal(envOf(chosen, 'watcher'), undefined, 'null (Helm merges a map into the defaults, so {} would keep them): no env at all');
  const own = await render({ webhook: { env: { POD_NAME: 'webhook-0' } } });
  t.same(envOf(own, 'webhook'), [ownPod[1], { name: 'POD_NAME', value: 'webhook-0' }], 'a variable webhook.env sets is its alone, never named twice');
  t.same(envOf(await render({ webhook: { env: { POD_NAME: 'a', POD_NAMESPACE: 'b' } } }), 'webhook'), [
    { name: 'POD_NAME', value: 'a' },
    { name: 'POD_NAMESPACE', value: 'b' },
  ]);
  const refused = await template({ watcher: { env: { 'NODE-OPTIONS': 'x' } } });
  t.not(refused.code, 0, 'a name that is no environment variable name is refused by the schema');
  t.match(refused.stderr, /NODE-OPTIONS/);
});
