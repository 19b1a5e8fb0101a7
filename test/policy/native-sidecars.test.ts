// Native sidecar migration, the pure part: which pods move, which stay and why, the spec after
// the move, the annotations, the check that the API server kept the move, and server versions.
import t from 'tap';
import {
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  MIGRATED_ANNOTATION,
  enforcedFindings,
  formatFinding,
  inspectObject,
  kubeletsWithoutNativeSidecars,
  podMutatingWebhooks,
  restoreNativeSidecars,
  strippedNativeSidecars,
  suspectWebhooks,
  migratePodSpec,
  migratedAnnotation,
  decide,
  migratedSidecars,
  nativeSidecarPlan,
  nativeSidecarSupport,
  parseKubernetesVersion,
  planNativeSidecars,
  skippedAnnotation,
  virtualNodeField,
  type MigrationInput,
  type MigrationPlan,
} from '../../src/policy/index.ts';
import { ignoreExitCodeSidecar, imageSidecar, killSidecar, main, podSpec } from '../support/pods.ts';

const plan = (spec: unknown, input: Partial<MigrationInput> = {}): MigrationPlan =>
  planNativeSidecars({ spec, annotations: {}, fieldPrefix: 'spec', hasErrors: false, ...input });

/** The fields and messages of a plan that keeps the pod. */
function obstacles(result: MigrationPlan): string[] {
  if (result.outcome !== 'keep') throw new Error(`expected keep, got ${JSON.stringify(result)}`);
  return result.findings.map(formatFinding);
}

t.test('a pod with a kill sidecar migrates; so do ignore-exit-code sidecars and sidecars that also have a quick-exit image', async (t) => {
  const both = { ...killSidecar('both'), env: [...killSidecar().env!, { name: ENV_WITH_IMAGE, value: 'registry.example.com/quick-exit:1' }] };
  const result = plan(podSpec([killSidecar('proxy'), main(), ignoreExitCodeSidecar('sql'), both]));
  t.match(result, { outcome: 'migrate', sidecars: ['proxy', 'sql', 'both'] }, 'every sidecar, in the order of spec.containers');
  t.same(
    result.outcome === 'migrate' && result.findings.map((f) => [f.rule, f.severity, f.field]),
    [
      ['native-sidecar-migration', 'info', 'spec.containers[0]'],
      ['native-sidecar-migration', 'info', 'spec.containers[2]'],
      ['native-sidecar-migration', 'info', 'spec.containers[3]'],
    ],
    'one info finding per sidecar, at the container',
  );
  t.match(result.outcome === 'migrate' && formatFinding(result.findings[1]!), /^spec.containers\[2\]: sidecar sql moves to initContainers\[1\] with restartPolicy: Always when the pod is created/);
  t.match(plan(podSpec([main(), killSidecar()], 'OnFailure')), { outcome: 'migrate' }, 'OnFailure too');
  t.match(plan(podSpec([main(), killSidecar()], 'Never', { shareProcessNamespace: true })), { outcome: 'migrate' }, 'shareProcessNamespace: the kubelet stops a container through the runtime, whatever its PID');
  const withInit = plan(podSpec([main(), killSidecar()], 'Never', { initContainers: [{ name: 'setup', image: 'busybox' }, { name: 'mesh', image: 'envoy', restartPolicy: 'Always' }] }));
  t.match(withInit.outcome === 'migrate' && withInit.findings[0]?.detail, /initContainers\[2\]/, 'after the existing init containers');
});

t.test('nothing to decide: restartPolicy Always, no sidecar, a pod that opts out', async (t) => {
  t.match(plan(podSpec([main(), killSidecar()], 'Always')), { outcome: 'none', reason: /restartPolicy/ });
  t.match(plan({ containers: [main(), killSidecar()] }), { outcome: 'none' }, 'unset restartPolicy is Always');
  t.match(plan(podSpec([main(), { ...main('helper'), env: [{ name: ENV_WHEN_JOB_EXIT, value: 'false' }] }])), { outcome: 'none', reason: /no container is marked/ });
  t.match(plan(podSpec([main(), killSidecar()]), { annotations: { 'sidecar-terminator.io/native-sidecars': 'disabled' } }), { outcome: 'none', reason: /annotated sidecar-terminator.io\/native-sidecars: disabled/ });
  t.match(plan(null), { outcome: 'none' }, 'a malformed spec');
});

t.test('pods that stay as they are, each with the field and the reason', async (t) => {
  t.same(obstacles(plan(podSpec([main(), imageSidecar('logs')]))), [
    `spec.containers[1].env[${ENV_WITH_IMAGE}]: sidecar logs is stopped by its quick-exit image alone; a native sidecar gets SIGTERM instead, which it may not handle; add ${ENV_WHEN_JOB_EXIT}="true" to allow that`,
  ]);
  const probe = { httpGet: { path: '/ready', port: 15021 } };
  t.same(obstacles(plan(podSpec([main(), { ...killSidecar(), startupProbe: probe }]))), [
    'spec.containers[1].startupProbe: as a native sidecar, proxy would hold back the main containers until this probe succeeds',
  ]);
  t.same(obstacles(plan(podSpec([main(), { ...killSidecar(), lifecycle: { postStart: { exec: { command: ['wait-ready'] } } } }]))), [
    'spec.containers[1].lifecycle.postStart: as a native sidecar, proxy would hold back the main containers until this hook completes',
  ]);
  t.match(plan(podSpec([main(), { ...killSidecar(), lifecycle: { preStop: { exec: { command: ['drain'] } } }, readinessProbe: probe, livenessProbe: probe }])), { outcome: 'migrate' }, 'preStop, readiness and liveness probes are fine');
  t.same(obstacles(plan(podSpec([main(), { ...killSidecar(), restartPolicy: 'Never' }]))), ['spec.containers[1].restartPolicy: sidecar proxy sets its own restart policy, which a native sidecar replaces with Always']);
  t.match(obstacles(plan(podSpec([main(), { ...killSidecar(), restartPolicyRules: [] }]))), [/^spec.containers\[1\].restartPolicyRules: /]);

  t.same(obstacles(plan(podSpec([main(), killSidecar()], 'Never', { nodeSelector: { type: 'virtual-kubelet' } }), { fieldPrefix: 'spec.template.spec' })), [
    'spec.template.spec.nodeSelector: the pod can run on virtual-kubelet nodes, whose providers may not run native sidecars; there a sidecar is stopped by its quick-exit image',
  ]);
  t.match(obstacles(plan(podSpec([main(), killSidecar()]), { hasErrors: true })), [/^spec.containers: the sidecar configuration has errors, so the pod is handled as OpenKruise handles it/]);
  t.same(obstacles(plan(podSpec([main(), killSidecar()]), { annotations: { 'sidecar-terminator.io/native-sidecars': 'off' }, fieldPrefix: 'spec.template.spec' })), [
    'spec.template.metadata.annotations[sidecar-terminator.io/native-sidecars]: Unsupported value: "off": the only value is "disabled", which keeps the pod as it is; remove the annotation to let its sidecars move',
  ], 'an unknown value of the opt-out annotation keeps the pod as it is: it meant something');
  t.match(obstacles(plan(podSpec([main(), killSidecar()]), { annotations: { 'sidecar-terminator.io/native-sidecars': false } })), [/Unsupported value: "false": /], 'a YAML boolean, in a manifest lint reads');

  const everything = plan(podSpec([main(), imageSidecar('logs'), { ...killSidecar(), startupProbe: probe }], 'Never', { tolerations: [{ key: 'virtual-kubelet.io/provider', operator: 'Exists' }] }), { hasErrors: true });
  t.equal(obstacles(everything).length, 4, 'every reason is given');
  t.match(skippedAnnotation(everything.outcome === 'keep' ? everything.findings : []), /^spec.containers: .*; spec.tolerations: .*; spec.containers\[1\].env\[.*\]: .*; spec.containers\[2\].startupProbe: /, 'the annotation lists them all');
});

t.test('virtualNodeField: the field by which a pod targets virtual nodes', async (t) => {
  t.equal(virtualNodeField({ nodeSelector: { type: 'virtual-kubelet' } }), 'nodeSelector');
  t.equal(virtualNodeField({ tolerations: [{ key: 'virtual-kubelet.io/provider', operator: 'Exists' }] }), 'tolerations');
  const affinity = { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [{ key: 'type', operator: 'In', values: ['virtual-kubelet'] }] } }] } };
  t.equal(virtualNodeField({ affinity }), 'affinity');
  t.equal(virtualNodeField({ nodeSelector: { type: 'normal' }, tolerations: 'x', affinity: null }), undefined);
});

t.test('migratePodSpec: the sidecars move whole to the end of initContainers, in order, with restartPolicy: Always', async (t) => {
  const proxy = {
    ...killSidecar('proxy'),
    ports: [{ containerPort: 15001 }],
    readinessProbe: { tcpSocket: { port: 15001 } },
    resources: { requests: { cpu: '10m' } },
    volumeMounts: [{ name: 'certs', mountPath: '/certs' }],
  };
  const spec = podSpec([proxy, main('work'), ignoreExitCodeSidecar('sql'), main('report')], 'Never', { initContainers: [{ name: 'setup', image: 'busybox' }], volumes: [{ name: 'certs', emptyDir: {} }] });
  const before = structuredClone(spec);
  const migrated = migratePodSpec(spec, ['proxy', 'sql']);
  t.same(migrated.containers, [main('work'), main('report')], 'the main containers stay, in order');
  t.same(migrated.initContainers, [{ name: 'setup', image: 'busybox' }, { ...proxy, restartPolicy: 'Always' }, { ...ignoreExitCodeSidecar('sql'), restartPolicy: 'Always' }], 'ports, probes, resources, mounts and env kept');
  t.same(migrated.volumes, [{ name: 'certs', emptyDir: {} }], 'the rest of the spec is untouched');
  t.same(spec, before, 'the original is not changed');
  t.same(migratePodSpec({ containers: [main(), killSidecar()] }, ['proxy']).initContainers, [{ ...killSidecar(), restartPolicy: 'Always' }], 'a spec without initContainers gets them');
});

t.test("the watcher's decision on a migrated pod, labelled by hand: nothing to do, before and after the main container", async (t) => {
  const spec = migratePodSpec(podSpec([main(), killSidecar()]), ['proxy']);
  const running = { metadata: { name: 'p', annotations: { [MIGRATED_ANNOTATION]: 'proxy' } }, spec, status: { phase: 'Running', containerStatuses: [{ name: 'main', state: { running: {} } }] } };
  t.match(decide(running, undefined), { outcome: 'ignore' });
  const done = { ...running, status: { phase: 'Succeeded', containerStatuses: [{ name: 'main', state: { terminated: { exitCode: 0 } } }] } };
  t.match(decide(done, undefined), { outcome: 'ignore' });
});

t.test('the migrated annotation: read, and merged on a reinvocation', async (t) => {
  t.same(migratedSidecars({ [MIGRATED_ANNOTATION]: 'proxy, sql,,' }), ['proxy', 'sql']);
  t.same(migratedSidecars({ [MIGRATED_ANNOTATION]: 7 }), []);
  t.same(migratedSidecars({}), []);
  t.equal(migratedAnnotation({}, ['proxy', 'sql']), 'proxy,sql');
  t.equal(migratedAnnotation({ [MIGRATED_ANNOTATION]: 'proxy' }, ['log-agent', 'proxy']), 'proxy,log-agent', 'the earlier ones first, each once');
});

t.test('strippedNativeSidecars: a migrated sidecar that arrived without restartPolicy: Always, and the native-sidecar-lost finding of such a pod', async (t) => {
  const annotations = { [MIGRATED_ANNOTATION]: 'proxy,sql' };
  const kept = { containers: [main()], initContainers: [{ name: 'setup' }, { ...killSidecar(), restartPolicy: 'Always' }, { ...ignoreExitCodeSidecar('sql'), restartPolicy: 'Always' }] };
  const lost = (spec: unknown, podAnnotations: Record<string, string>) =>
    (inspectObject({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', annotations: podAnnotations }, spec }, [])?.findings ?? []).filter((f) => f.rule === 'native-sidecar-lost').map(formatFinding);
  t.same(strippedNativeSidecars(kept, annotations), [], 'both kept');
  t.same(lost(kept, annotations), [], 'both kept: no finding');
  const dropped = { containers: [main()], initContainers: [{ name: 'setup' }, killSidecar(), { ...ignoreExitCodeSidecar('sql'), restartPolicy: 'Always' }] };
  t.match(lost(dropped, annotations), [
    /^spec.initContainers\[1\].restartPolicy: Required value: proxy was moved here as a native sidecar .* but its restartPolicy: Always was dropped, by a mutating webhook that rewrote the init containers after the last call of the native-sidecars webhook .*, or by the API server when its SidecarContainers feature gate is off .*set --native-sidecars=none/,
  ]);
  t.same(strippedNativeSidecars(dropped, annotations), [{ index: 1, name: 'proxy' }]);
  t.same(restoreNativeSidecars(dropped, [{ index: 1 }]), kept, 'put back where it was dropped, and nowhere else');
  t.same(restoreNativeSidecars({ initContainers: ['junk'] }, [{ index: 0 }]), { initContainers: ['junk'] }, 'only a container is changed');
  t.same(strippedNativeSidecars(dropped, {}), [], "without the annotation, init containers are the user's");
  t.same(lost(dropped, {}), []);
  // Created by a Job, in warn mode: every other error is a warning, this one stays an error; and the pod is still moved (the lost one put back first).
  const fromJob = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', annotations, ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'j', uid: 'u', controller: true }] }, spec: { ...dropped, containers: [main(), { name: 'log-agent', image: 'fluent/fluent-bit:3.1', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'yes' }] }] } };
  const inspection = inspectObject(fromJob, [])!;
  t.same(enforcedFindings(inspection, 'warn').map((f) => [f.rule, f.severity]), [['marker-value', 'warning'], ['native-sidecar-lost', 'error']], 'whatever the mode and the creator');
  const movable = inspectObject({ ...fromJob, spec: { ...dropped, restartPolicy: 'Never', containers: [main(), { name: 'log-agent', image: 'fluent/fluent-bit:3.1', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }] }] } }, [])!;
  t.match(nativeSidecarPlan(movable), { outcome: 'migrate', sidecars: ['log-agent'] }, 'the lost one (put back in the same answer) does not keep the pod from moving');
  t.same(strippedNativeSidecars({ initContainers: 'x' }, annotations), [], 'a malformed spec');
  t.same(strippedNativeSidecars(undefined, annotations), []);
});

t.test('nativeSidecarPlan and inspectObject: a Job template is judged with its own annotations and fields', async (t) => {
  const job = (annotations: Record<string, string>, spec: Record<string, unknown>) => ({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'j' }, spec: { template: { metadata: { annotations }, spec } } });
  const migrate = nativeSidecarPlan(inspectObject(job({}, podSpec([main(), killSidecar()])), [])!);
  t.match(migrate, { outcome: 'migrate', findings: [{ field: 'spec.template.spec.containers[1]' }] });
  t.match(nativeSidecarPlan(inspectObject(job({ 'sidecar-terminator.io/native-sidecars': 'disabled' }, podSpec([main(), killSidecar()])), [])!), { outcome: 'none' });
  const ownImage = { ...killSidecar(), env: [...killSidecar().env!, { name: ENV_WITH_IMAGE, value: killSidecar().image }] };
  t.match(nativeSidecarPlan(inspectObject(job({}, podSpec([main(), ownImage])), [])!), { outcome: 'keep', findings: [{ field: 'spec.template.spec.containers' }] }, 'an error keeps the pod as it is');

  const migratedPod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p', annotations: { [MIGRATED_ANNOTATION]: 'proxy' } },
    spec: { restartPolicy: 'Never', containers: [main()], initContainers: [{ ...killSidecar(), restartPolicy: 'Always' }, { ...killSidecar('mesh'), restartPolicy: 'Always' }] },
  };
  t.match(
    inspectObject(migratedPod, [])?.findings.map((f) => [f.rule, f.field]),
    [['marker-on-init-container', `spec.initContainers[1].env[${ENV_WHEN_JOB_EXIT}]`]],
    "no warning for the markers the webhook moved with the sidecar (they come from the template); the user's own native sidecar still gets one",
  );
});

t.test('server versions: what runs native sidecars', async (t) => {
  t.same(parseKubernetesVersion({ gitVersion: 'v1.33.10', major: '1', minor: '33' }), { gitVersion: 'v1.33.10', major: 1, minor: 33 });
  t.same(parseKubernetesVersion({ gitVersion: 'v1.29.15-gke.1200', major: '1', minor: '29+' }), { gitVersion: 'v1.29.15-gke.1200', major: 1, minor: 29 }, 'providers write minor as 29+');
  t.same(parseKubernetesVersion({ gitVersion: 'v1.37.2' }), { gitVersion: 'v1.37.2', major: 1, minor: 37 }, 'from gitVersion alone');
  t.same(parseKubernetesVersion({ major: '1', minor: '30' }), { gitVersion: 'v1.30', major: 1, minor: 30 });
  t.same(parseKubernetesVersion({ gitVersion: 'v1.31.2', major: '', minor: '' }), { gitVersion: 'v1.31.2', major: 1, minor: 31 }, 'empty fields: from gitVersion');
  t.equal(parseKubernetesVersion({ gitVersion: 'unknown' }), undefined);
  t.equal(parseKubernetesVersion({}), undefined);

  const support = (minor: number, major = 1) => nativeSidecarSupport({ gitVersion: `v${major}.${minor}.0`, major, minor });
  t.match(support(28), { supported: false, note: /v1.28.0 predates native sidecars \(1.29\): no pod is migrated/ });
  t.match(support(29), { supported: true, note: /unless its SidecarContainers feature gate is off/ });
  t.match(support(32), { supported: true, note: /feature gate/ });
  t.match(support(33), { supported: true, note: /GA since 1.33/ });
  t.match(support(37), { supported: true });
  t.match(support(0, 2), { supported: true }, 'a later major version');
});

t.test("sidecars named by the pod's annotation, and sidecars stopped by HTTP, stay where they are", async (t) => {
  const named = plan(podSpec([main(), { name: 'istio-proxy', image: 'istio/proxyv2:1.24' }]), { annotations: { 'sidecar-terminator.io/sidecars': 'istio-proxy' } });
  t.match(obstacles(named), [/^metadata\.annotations\[sidecar-terminator\.io\/sidecars\]: sidecar istio-proxy is named by the pod's annotation, not marked/]);
  // As the webhook plans it once the injected-sidecar policy named istio-proxy: the words name the entry, and the pod's own marked sidecar stays too.
  const injected = plan(podSpec([main(), { name: 'istio-proxy', image: 'istio/proxyv2:1.24' }, killSidecar('cloud-sql-proxy')]), {
    annotations: { 'sidecar-terminator.io/sidecars': 'istio-proxy', 'sidecar-terminator.io/injected-sidecar-policy': 'istio' },
    injectedSidecars: new Map([['istio-proxy', 'istio']]),
  });
  t.same(obstacles(injected), [
    "metadata.annotations[sidecar-terminator.io/injected-sidecar-policy]: sidecar istio-proxy is named by entry istio of the injected-sidecar policy: another webhook injects it, and it stays where that webhook puts it, and so do the pod's other sidecars (they move all or none)",
  ]);
  t.equal(plan(podSpec([main(), killSidecar('cloud-sql-proxy')]), { injectedSidecars: new Map([['istio-proxy', 'istio']]) }).outcome, 'migrate', 'an entry whose container the pod does not have keeps nothing');
  const http = plan(podSpec([main(), killSidecar('proxy', { env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' }, { name: 'SIDECAR_TERMINATOR_STOP', value: 'envoy' }] })]));
  t.match(obstacles(http), [/^spec\.containers\[1\]: sidecar proxy is stopped by its HTTP shutdown request/]);
});

t.test('podMutatingWebhooks: the webhooks whose rules cover pod creation, other than our own', async (t) => {
  const rule = (extra: Record<string, unknown> = {}) => ({ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], ...extra });
  const configurations = [
    { metadata: { name: 'sidecar-terminator' }, webhooks: [{ name: 'native-sidecars.sidecar-terminator.io', rules: [rule()], reinvocationPolicy: 'IfNeeded' }] },
    { metadata: { name: 'mesh' }, webhooks: [{ name: 'inject.mesh.io', rules: [rule()], reinvocationPolicy: 'IfNeeded' }, { name: 'deployments.mesh.io', rules: [rule({ apiGroups: ['apps'], resources: ['deployments'] })] }] },
    { metadata: { name: 'agent' }, webhooks: [{ name: 'all.agent.io', rules: [rule({ apiGroups: ['*'], apiVersions: ['*'], resources: ['*/*'], operations: ['*'] })] }] },
    { metadata: { name: 'updates-only' }, webhooks: [{ name: 'u.example.com', rules: [rule({ operations: ['UPDATE'] })] }] },
    { metadata: { name: 'status-only' }, webhooks: [{ name: 's.example.com', rules: [rule({ resources: ['pods/status'] })] }] },
    { metadata: {}, webhooks: [] },
    'junk',
    { metadata: { name: 'broken' }, webhooks: ['x', { rules: [rule()] }, { name: 'no-rules.example.com' }] },
  ];
  t.same(podMutatingWebhooks(configurations, 'sidecar-terminator'), [
    { name: 'mesh/inject.mesh.io', again: true },
    { name: 'agent/all.agent.io', again: false },
  ]);
});

t.test('suspectWebhooks: a webhook called again is the one that can strip the field for good', async (t) => {
  t.equal(suspectWebhooks([{ name: 'mesh/inject.mesh.io', again: true }, { name: 'agent/all.agent.io', again: false }]), 'the mutating webhooks for pods called again after the others (reinvocationPolicy IfNeeded), one of which dropped it: mesh/inject.mesh.io');
  t.equal(
    suspectWebhooks([{ name: 'agent/all.agent.io', again: false }]),
    'no other mutating webhook for pods is called again after the others (reinvocationPolicy IfNeeded), so none of these dropped it for good: agent/all.agent.io; the feature gate did',
  );
  t.equal(suspectWebhooks([]), 'no other mutating webhook is registered for pods: the feature gate dropped it');
  const many = Array.from({ length: 12 }, (_, i) => ({ name: `c/w${i}`, again: true }));
  t.match(suspectWebhooks(many), /c\/w9 and 2 more$/, 'at most ten named');
});

t.test('kubeletsWithoutNativeSidecars: the nodes whose kubelet is older than 1.29, virtual ones and unreadable versions aside', async (t) => {
  const node = (name: unknown, kubeletVersion: unknown, extra: Record<string, unknown> = {}) => ({ metadata: { name }, status: { nodeInfo: { kubeletVersion } }, ...extra });
  t.same(
    kubeletsWithoutNativeSidecars([
      node('new', 'v1.29.0'),
      node('eks', 'v1.28.15-eks-1234'),
      node('two', 'v2.0.0'),
      node('vk', 'v1.19.3', { spec: { taints: [{ key: 'virtual-kubelet.io/provider', effect: 'NoSchedule' }] } }),
      node('none', ''),
      node(7, 'v1.27.0'),
      { metadata: { name: 'no-status' } },
      'junk',
    ]),
    [
      { node: 'eks', version: 'v1.28.15-eks-1234' },
      { node: '?', version: 'v1.27.0' },
    ],
  );
});

t.test('planNativeSidecars: while a node runs no native sidecars, no pod moves, and the finding names the nodes', async (t) => {
  const input = { spec: podSpec([main(), killSidecar()]), annotations: {}, fieldPrefix: 'spec', hasErrors: false };
  t.match(planNativeSidecars({ ...input, oldKubelets: [] }), { outcome: 'migrate' });
  t.match(planNativeSidecars({ ...input, oldKubelets: 'unread' }), { outcome: 'keep', findings: [{ field: 'spec.containers', detail: /^the nodes' kubelet versions are not read yet / }] }, 'unknown: none moves');
  t.match(planNativeSidecars({ ...input, oldKubelets: [{ node: 'n', version: 'v1.28.0' }] }), { outcome: 'keep', findings: [{ detail: /\(before 1\.29\): n \(v1\.28\.0\); there/ }] });
  const old = ['a', 'b', 'c', 'd', 'e'].map((node) => ({ node, version: 'v1.28.1' }));
  t.match(planNativeSidecars({ ...input, oldKubelets: old }), {
    outcome: 'keep',
    findings: [{ field: 'spec.containers', detail: /^the cluster has nodes whose kubelet runs no native sidecars \(before 1\.29\): a \(v1\.28\.1\), b \(v1\.28\.1\), c \(v1\.28\.1\) and 2 more; / }],
  });
});
