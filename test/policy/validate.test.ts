import t from 'tap';
import {
  ENV_IGNORE_EXIT_CODE,
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  applyEnforcement,
  formatFinding,
  formatFindingWithoutValue,
  listedFindings,
  listedMessages,
  MAX_LISTED_FINDINGS,
  MAX_FIELD_CHARACTERS,
  MAX_VALUE_CHARACTERS,
  POD_ANNOTATIONS,
  clip,
  inspectObject,
  isManageable,
  validatePodSpec,
  type Finding,
  type AdmissionRuleId,
  type Severity,
  type ValidationOptions,
} from '../../src/policy/index.ts';
import type { V1Container, V1EnvVar } from '@kubernetes/client-node';
import { imageSidecar, killSidecar, main, podSpec } from '../support/pods.ts';

const job: ValidationOptions = { fieldPrefix: 'spec.template.spec', strictRestartPolicy: true };
const container = (name: string, image: string, env: V1EnvVar[], extra: Partial<V1Container> = {}): V1Container => ({ name, image, env, ...extra });

interface RuleCase {
  severity: Severity;
  spec: Record<string, unknown>;
  field: string;
  options?: Partial<ValidationOptions>;
  /** A part of the formatted message a person needs to see. */
  says: RegExp;
}

// One case per rule of docs/admission-rules.md. The Record type makes a rule without a case a
// type error, and each case fails if its rule is removed from the validator.
const cases: Record<AdmissionRuleId, RuleCase> = {
  'marker-value': {
    severity: 'error',
    spec: podSpec([main(), container('proxy', 'envoy:1', [{ name: ENV_WHEN_JOB_EXIT, value: 'yes' }])]),
    field: `spec.template.spec.containers[1].env[${ENV_WHEN_JOB_EXIT}]`,
    says: /Invalid value: "yes": must be "true" or "false"/,
  },
  'marker-value-from': {
    severity: 'error',
    spec: podSpec([main(), container('proxy', 'envoy:1', [{ name: ENV_WHEN_JOB_EXIT, valueFrom: { configMapKeyRef: { name: 'c', key: 'k' } } }])]),
    field: `spec.template.spec.containers[1].env[${ENV_WHEN_JOB_EXIT}].valueFrom`,
    says: /Forbidden: .*literal values/,
  },
  'quick-exit-image-empty': {
    severity: 'error',
    spec: podSpec([main(), container('logs', 'fluent-bit:3', [{ name: ENV_WITH_IMAGE, value: '' }])]),
    field: `spec.template.spec.containers[1].env[${ENV_WITH_IMAGE}]`,
    says: /Required value: /,
  },
  'quick-exit-image-invalid': {
    severity: 'error',
    spec: podSpec([main(), container('logs', 'fluent-bit:3', [{ name: ENV_WITH_IMAGE, value: 'Not An Image' }])]),
    field: `spec.template.spec.containers[1].env[${ENV_WITH_IMAGE}]`,
    says: /Invalid value: "Not An Image": not a valid image reference/,
  },
  'quick-exit-image-own': {
    severity: 'error',
    spec: podSpec([main(), container('proxy', 'nginx:1.27', [{ name: ENV_WITH_IMAGE, value: 'nginx:1.27' }])]),
    field: `spec.template.spec.containers[1].env[${ENV_WITH_IMAGE}]`,
    says: /Invalid value: "nginx:1.27": the quick-exit image is the sidecar's own image/,
  },
  'quick-exit-image-not-allowed': {
    severity: 'error',
    spec: podSpec([main(), imageSidecar('logs', 'docker.io/library/busybox:1.36')]),
    options: { quickExitImageAllowlist: ['registry.example.com/quick-exit:*'] },
    field: `spec.template.spec.containers[1].env[${ENV_WITH_IMAGE}]`,
    says: /allowlist \(registry.example.com\/quick-exit:\*\)/,
  },
  'no-main-container': {
    severity: 'error',
    spec: podSpec([killSidecar('a'), imageSidecar('b')]),
    field: 'spec.template.spec.containers',
    says: /Forbidden: every container is marked as a sidecar/,
  },
  'ignore-exit-code-without-kill': {
    severity: 'error',
    spec: podSpec([main(), container('logs', 'fluent-bit:3', [{ name: ENV_WITH_IMAGE, value: 'quick-exit:1' }, { name: ENV_IGNORE_EXIT_CODE, value: 'true' }])]),
    field: `spec.template.spec.containers[1].env[${ENV_IGNORE_EXIT_CODE}]`,
    says: /takes effect only together with KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true"/,
  },
  'restart-policy-always': {
    severity: 'error',
    spec: podSpec([main(), killSidecar()], 'Always'),
    field: 'spec.template.spec.restartPolicy',
    says: /Unsupported value: "Always": .*"Never" or "OnFailure"/,
  },
  'quick-exit-image-unpinned': {
    severity: 'warning',
    spec: podSpec([main(), imageSidecar('logs', 'busybox:latest')]),
    field: `spec.template.spec.containers[1].env[${ENV_WITH_IMAGE}]`,
    says: /"busybox:latest": .*pin a tag or a digest/,
  },
  'quick-exit-image-command': {
    severity: 'warning',
    spec: podSpec([main(), { ...imageSidecar(), command: ['/fluent-bit', '-c', '/etc/conf'] }]),
    field: `spec.template.spec.containers[1].env[${ENV_WITH_IMAGE}]`,
    says: /sets command/,
  },
  'on-failure-kill-exit-code': {
    severity: 'warning',
    spec: podSpec([main(), killSidecar()], 'OnFailure'),
    field: `spec.template.spec.containers[1].env[${ENV_WHEN_JOB_EXIT}]`,
    says: /OnFailure, kubelet restarts a sidecar that exits non-zero/,
  },
  'virtual-node-without-image': {
    severity: 'warning',
    spec: podSpec([main(), killSidecar()], 'Never', { nodeSelector: { type: 'virtual-kubelet' } }),
    field: 'spec.template.spec.containers[1]',
    says: /virtual-kubelet nodes/,
  },
  'marker-on-init-container': {
    severity: 'warning',
    spec: { ...podSpec([main(), killSidecar()]), initContainers: [container('setup', 'busybox:1.36', [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }])] },
    field: `spec.template.spec.initContainers[0].env[${ENV_WHEN_JOB_EXIT}]`,
    says: /no effect on init containers/,
  },
  'duplicate-marker': {
    severity: 'warning',
    spec: podSpec([main(), killSidecar('proxy', { env: [{ name: ENV_WHEN_JOB_EXIT, value: 'false' }] })]),
    field: `spec.template.spec.containers[1].env[${ENV_WHEN_JOB_EXIT}]`,
    says: /Duplicate value: "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT": defined 2 times/,
  },
  'stop-method-invalid': {
    severity: 'error',
    spec: podSpec([main(), killSidecar('proxy', { env: [{ name: 'SIDECAR_TERMINATOR_STOP', value: 'haproxy' }] })]),
    field: 'spec.template.spec.containers[1].env[SIDECAR_TERMINATOR_STOP]',
    says: /Invalid value: "haproxy": not a stop method: expected signal, one of istio-proxy, envoy, linkerd-proxy, cloud-sql-proxy/,
  },
  'grace-period-invalid': {
    severity: 'error',
    spec: podSpec([main(), killSidecar('proxy')]),
    options: { annotations: { 'grace-period-seconds.sidecar-terminator.io/proxy': '-1' } },
    field: 'spec.template.metadata.annotations[grace-period-seconds.sidecar-terminator.io/proxy]',
    says: /Invalid value: "-1": must be a whole number of seconds from 0 to 86400/,
  },
  'stop-without-sidecar': {
    severity: 'error',
    spec: podSpec([main(), container('proxy', 'envoy:1', [])]),
    options: { annotations: { 'stop.sidecar-terminator.io/proxy': 'envoy' } },
    field: 'spec.template.metadata.annotations[stop.sidecar-terminator.io/proxy]',
    says: /Forbidden: a stop method takes effect only on a sidecar stopped by the kill mechanism, and proxy is none/,
  },
  'sidecar-name-invalid': {
    severity: 'error',
    spec: podSpec([main()]),
    options: { annotations: { 'sidecar-terminator.io/sidecars': 'istio-proxy, Istio_Proxy' } },
    field: 'spec.template.metadata.annotations[sidecar-terminator.io/sidecars]',
    says: /Invalid value: "Istio_Proxy": not a container name/,
  },
  'sidecar-not-found': {
    severity: 'warning',
    spec: podSpec([main(), killSidecar('proxy')]),
    options: { fieldPrefix: 'spec', annotations: { 'sidecar-terminator.io/ignore-exit-code': 'istio-proxy' }, containersFinal: true },
    field: 'metadata.annotations[sidecar-terminator.io/ignore-exit-code]',
    says: /Not found: "istio-proxy": the pod has no container istio-proxy/,
  },
};

for (const [rule, c] of Object.entries(cases) as Array<[AdmissionRuleId, RuleCase]>) {
  t.test(`rule ${rule}`, async (t) => {
    const findings = validatePodSpec(c.spec, { ...job, ...c.options });
    const hits = findings.filter((f) => f.rule === rule);
    t.equal(hits.length, 1, 'reported once');
    t.match(hits[0], { severity: c.severity, field: c.field });
    t.match(formatFinding(hits[0]!), c.says);
    t.ok(formatFinding(hits[0]!).startsWith(`${c.field}: `), 'the message starts with the field path');
  });
}

t.test('the design example, word for word', async (t) => {
  const findings = validatePodSpec(podSpec([main(), container('proxy', 'nginx:1.27', [{ name: ENV_WITH_IMAGE, value: 'nginx:1.27' }])]), job);
  t.same(findings.map(formatFinding), [
    'spec.template.spec.containers[1].env[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE]: Invalid value: "nginx:1.27": the quick-exit image is the sidecar\'s own image, so replacing it changes nothing and the sidecar never stops',
  ]);
});

t.test('a long value is quoted cut, with its length', async (t) => {
  const value = 'x'.repeat(10_000);
  const [finding] = validatePodSpec(podSpec([main(), container('proxy', 'envoy:1', [{ name: ENV_WHEN_JOB_EXIT, value }])]), job);
  const message = formatFinding(finding!);
  t.ok(message.includes(`"${'x'.repeat(MAX_VALUE_CHARACTERS)}"... (10000 characters)`), message.slice(0, 300));
  t.ok(message.length < 512, 'the message stays short');
});

t.test('a long key in a field path is cut too, so a key of megabytes makes no huge message', async (t) => {
  const key = `${POD_ANNOTATIONS.stopPrefix}${'k'.repeat(100_000)}`;
  const findings = validatePodSpec(podSpec([main(), killSidecar('proxy')]), { ...job, annotations: { [key]: 'signal' } });
  const message = formatFinding(findings.find((finding) => finding.rule === 'sidecar-name-invalid')!);
  const field = message.slice(0, message.indexOf('...: '));
  t.ok(field.startsWith(`spec.template.metadata.annotations[${POD_ANNOTATIONS.stopPrefix}kkk`), field.slice(0, 80));
  t.equal(field.length, MAX_FIELD_CHARACTERS, `the field path is cut at ${MAX_FIELD_CHARACTERS} characters, then "..."`);
  t.ok(message.length < 1024, `the message is ${message.length} characters`);
  t.equal(clip('short'), 'short', 'a short text is kept whole');
});

t.test("without the value: the field and the rule's words only, for text on an object the author does not own", async (t) => {
  const [finding] = validatePodSpec(podSpec([main(), container('proxy', 'envoy:1', [{ name: ENV_WHEN_JOB_EXIT, value: 'visit-evil.example.com' }])]), job);
  t.match(formatFinding(finding!), /visit-evil\.example\.com/, 'formatFinding quotes the value');
  const without = formatFindingWithoutValue(finding!);
  t.notMatch(without, /visit-evil/, 'formatFindingWithoutValue leaves it out');
  t.ok(without.startsWith(`${finding!.field}: `), without);
});

t.test('at most MAX_LISTED_FINDINGS are listed, and the rest counted', async (t) => {
  const messages = Array.from({ length: MAX_LISTED_FINDINGS + 5 }, (_, i) => `m${i}`);
  const listed = listedMessages(messages, 'error');
  t.equal(listed.length, MAX_LISTED_FINDINGS + 1);
  t.same(listed.slice(0, MAX_LISTED_FINDINGS), messages.slice(0, MAX_LISTED_FINDINGS));
  t.equal(listed.at(-1), 'and 5 more errors', 'the last counts the rest');
  t.same(listedMessages(['one'], 'error'), ['one'], 'one message is listed as it is');
  t.same(listedMessages(messages.slice(0, MAX_LISTED_FINDINGS + 1), 'error').at(-1), 'and 1 more error', 'one more, in the singular');
  const findings = validatePodSpec(podSpec([main(), container('proxy', 'envoy:1', [{ name: ENV_WHEN_JOB_EXIT, value: 'yes' }])]), job);
  t.same(listedFindings(findings, 'error', formatFindingWithoutValue), findings.map(formatFindingWithoutValue), 'listedFindings formats with the function given');
});

t.test('valid configurations have no findings', async (t) => {
  t.same(validatePodSpec(podSpec([main(), killSidecar(), imageSidecar()]), job), [], 'kill and image sidecars');
  t.same(validatePodSpec(podSpec([main(), killSidecar('p', { env: [{ name: ENV_IGNORE_EXIT_CODE, value: 'TRUE' }] })], 'OnFailure'), job), [], 'OnFailure with ignore-exit-code, any case');
  t.same(validatePodSpec(podSpec([main(), container('p', 'envoy:1', [{ name: ENV_WHEN_JOB_EXIT, value: 'False' }])]), job), [], '"False" is a valid value');
  t.same(validatePodSpec(podSpec([main(), imageSidecar('logs', 'busybox@sha256:' + 'a'.repeat(64))], 'Always'), { ...job, strictRestartPolicy: false }).map((f) => f.rule), ['restart-policy-always'], 'a digest is pinned');
  t.same(validatePodSpec(podSpec([main(), main('b')], 'Always'), job), [], 'no markers, no findings, whatever the restartPolicy');
  t.same(validatePodSpec({ containers: 'nonsense', initContainers: [null, 3] }, job), [], 'malformed input does not throw');
  t.same(validatePodSpec(null, job), []);
});

t.test('quick-exit image checks', async (t) => {
  const own = (sidecarImage: string, quickExit: string) =>
    validatePodSpec(podSpec([main(), container('s', sidecarImage, [{ name: ENV_WITH_IMAGE, value: quickExit }])]), job).map((f) => f.rule);
  t.ok(own('nginx', 'docker.io/library/nginx:latest').includes('quick-exit-image-own'), 'normalized references are compared');
  t.notOk(own('nginx:1.27', 'nginx:1.28').includes('quick-exit-image-own'));
  t.ok(own('fluent-bit:3', 'busybox').includes('quick-exit-image-unpinned'), 'no tag');
  t.notOk(own('fluent-bit:3', 'busybox:1.36').includes('quick-exit-image-unpinned'));
  const allow = (image: string, patterns: string[]) =>
    validatePodSpec(podSpec([main(), imageSidecar('l', image)]), { ...job, quickExitImageAllowlist: patterns }).some((f) => f.rule === 'quick-exit-image-not-allowed');
  t.notOk(allow('registry.example.com/quick-exit:1.0', ['registry.example.com/quick-exit:*']));
  t.notOk(allow('busybox:1.36', ['docker.io/library/busybox:*']), 'patterns match the normalized form');
  t.ok(allow('registry.example.com/other:1.0', ['registry.example.com/quick-exit:*']));
  t.notOk(allow('anything:1', []), 'an empty allowlist allows everything');
});

t.test('restartPolicy Always: error for Jobs and strict pods, warning for others', async (t) => {
  const spec = podSpec([main(), killSidecar()], 'Always');
  t.match(validatePodSpec(spec, job), [{ rule: 'restart-policy-always', severity: 'error' }]);
  t.match(validatePodSpec(spec, { fieldPrefix: 'spec.template.spec', strictRestartPolicy: false }), [{ rule: 'restart-policy-always', severity: 'warning' }]);
  const unset: Record<string, unknown> = podSpec([main(), killSidecar()]);
  delete unset.restartPolicy;
  t.match(validatePodSpec(unset, { fieldPrefix: 'spec', strictRestartPolicy: false }), [{ rule: 'restart-policy-always', field: 'spec.restartPolicy', value: 'Always' }], 'unset is Always');
});

t.test('native sidecars and virtual-node targeting variants', async (t) => {
  const native = { ...podSpec([main(), killSidecar()]), initContainers: [{ ...killSidecar('mesh'), restartPolicy: 'Always' }] };
  t.match(validatePodSpec(native, job), [{ rule: 'marker-on-init-container', detail: /native sidecar/ }]);
  const targets = (extra: Record<string, unknown>) =>
    validatePodSpec(podSpec([main(), killSidecar()], 'Never', extra), job).some((f) => f.rule === 'virtual-node-without-image');
  t.ok(targets({ tolerations: [{ key: 'virtual-kubelet.io/provider', operator: 'Exists' }] }), 'toleration');
  t.ok(targets({ affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'type', operator: 'In', values: ['virtual-kubelet'] }] }] } } } }), 'required affinity');
  t.ok(targets({ affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [{ key: 'type', operator: 'In', values: ['virtual-kubelet'] }] } }] } } }), 'preferred affinity');
  t.notOk(targets({ nodeSelector: { type: 'gpu' } }), 'other node selectors');
  t.notOk(
    validatePodSpec(podSpec([main(), { ...killSidecar(), env: [...killSidecar().env!, ...imageSidecar().env!] }], 'Never', { nodeSelector: { type: 'virtual-kubelet' } }), job).some((f) => f.rule === 'virtual-node-without-image'),
    'a sidecar with a quick-exit image is fine on virtual nodes',
  );
});

t.test('enforcement mode', async (t) => {
  const findings: Finding[] = validatePodSpec(podSpec([killSidecar()]), job);
  t.equal(findings[0]?.severity, 'error');
  t.same(applyEnforcement(findings, 'deny'), findings);
  t.same(applyEnforcement(findings, 'warn').map((f) => f.severity), ['warning'], 'warn mode turns errors into warnings');
});

t.test('which pods the watcher manages', async (t) => {
  const check = (spec: Record<string, unknown>) => isManageable(spec, validatePodSpec(spec, { fieldPrefix: 'spec', strictRestartPolicy: false }));
  t.ok(check(podSpec([main(), killSidecar()])));
  t.ok(check(podSpec([main(), imageSidecar()], 'OnFailure')));
  t.notOk(check(podSpec([main(), killSidecar()], 'Always')), 'Always');
  t.notOk(check(podSpec([main(), main('b')])), 'no sidecar');
  t.notOk(check(podSpec([main(), container('p', 'x:1', [{ name: ENV_WHEN_JOB_EXIT, value: 'false' }])])), 'marker set to false');
  t.notOk(check(podSpec([main(), container('p', 'nginx:1', [{ name: ENV_WITH_IMAGE, value: 'nginx:1' }])])), 'errors');
});

t.test('inspectObject: workloads get warnings only, Jobs get errors', async (t) => {
  const spec = podSpec([killSidecar('a'), imageSidecar('b')]);
  t.match(inspectObject({ apiVersion: 'batch/v1', kind: 'Job', spec: { template: { spec } } }, [])?.findings, [{ rule: 'no-main-container', severity: 'error' }]);
  t.match(inspectObject({ apiVersion: 'apps/v1', kind: 'Deployment', spec: { template: { spec } } }, [])?.findings, [{ rule: 'no-main-container', severity: 'warning' }]);
  t.equal(inspectObject({ apiVersion: 'v1', kind: 'Service' }, []), undefined);
});

t.test('a marker defined twice: the finding says what the definitions mean at run time', async (t) => {
  const twice = (name: string, values: [string, string], extra: V1EnvVar[] = []) =>
    validatePodSpec(podSpec([main(), container('proxy', 'envoy:1', [...extra, { name, value: values[0] }, { name, value: values[1] }])]), job)
      .map((finding) => formatFinding(finding))
      .join('\n');
  t.match(twice(ENV_WHEN_JOB_EXIT, ['false', 'false']), /none of them is "true", so this variable has no effect/);
  t.match(twice(ENV_IGNORE_EXIT_CODE, ['true', 'false'], [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }]), /one of them is "true", so its exit code is ignored: any "true" counts/);
  t.match(twice(ENV_WITH_IMAGE, ['q:1', 'q:2']), /the first definition is the quick-exit image/);
});

t.test("the add-on's own settings: each mistake once, at its field", async (t) => {
  const findings = (spec: Record<string, unknown>, options: Partial<ValidationOptions> = {}) => validatePodSpec(spec, { ...job, ...options }).map(formatFinding);
  t.match(findings(podSpec([main(), container('proxy', 'envoy:1', [{ name: 'SIDECAR_TERMINATOR_STOP', value: 'envoy' }])])), [/^spec\.template\.spec\.containers\[1\]\.env\[SIDECAR_TERMINATOR_STOP\]: Forbidden: takes effect only on a sidecar stopped by the kill mechanism/]);
  t.same(findings(podSpec([main(), container('proxy', 'envoy:1', [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, { name: 'SIDECAR_TERMINATOR_STOP', value: 'envoy' }, { name: 'SIDECAR_TERMINATOR_STOP', value: 'linkerd-proxy' }])])), [], 'a stop method defined twice is no mistake: the first counts');
  const pod = { fieldPrefix: 'spec', containersFinal: true };
  t.match(findings(podSpec([main(), killSidecar('proxy')]), { ...pod, annotations: { 'sidecar-terminator.io/sidecars': 'proxy,istio-proxy' } }), [/^metadata\.annotations\[sidecar-terminator\.io\/sidecars\]: Not found: "istio-proxy"/]);
  t.match(findings(podSpec([main(), killSidecar('proxy')]), { ...pod, annotations: { 'stop.sidecar-terminator.io/istio-proxy': 'istio-proxy' } }), [/^metadata\.annotations\[stop\.sidecar-terminator\.io\/istio-proxy\]: Not found: "istio-proxy"/]);
  t.match(findings(podSpec([main(), killSidecar('proxy')]), { annotations: { 'sidecar-terminator.io/ignore-exit-code': 'main' } }), [/annotations\[sidecar-terminator\.io\/ignore-exit-code\]: Forbidden: ignoring the exit code takes effect only on a sidecar stopped by the kill mechanism, and main is none/]);
  t.same(findings(podSpec([main()]), { annotations: { 'sidecar-terminator.io/sidecars': 'istio-proxy', 'sidecar-terminator.io/ignore-exit-code': 'istio-proxy', 'stop.sidecar-terminator.io/istio-proxy': 'istio-proxy' } }), [], 'a template need not have an injected container');
  t.match(findings(podSpec([main(), killSidecar('proxy')]), { annotations: { 'stop.sidecar-terminator.io/Proxy_1': 'envoy', 'grace-period-seconds.sidecar-terminator.io/proxy': 10 } }), [
    /annotations\[stop\.sidecar-terminator\.io\/Proxy_1\]: Invalid value: "Proxy_1": the key must be stop\.sidecar-terminator\.io\/<container name>/,
  ], 'a value that is no string is read as written (a YAML number: "10")');
  t.match(findings(podSpec([main(), container('proxy', 'envoy:1', [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, { name: 'SIDECAR_TERMINATOR_STOP' }])])), [/env\[SIDECAR_TERMINATOR_STOP\]: Invalid value: "": not a stop method/], 'no value at all');
  t.same(findings(podSpec([main(), killSidecar('proxy')]), { ...pod, annotations: { 'stop.sidecar-terminator.io/proxy': 'envoy' } }), [], 'a pod with that sidecar: nothing to say');
  t.match(findings(podSpec([main(), killSidecar('proxy')]), { annotations: { 'grace-period-seconds.sidecar-terminator.io/main': '5' } }), [/Forbidden: a grace period takes effect only on a sidecar stopped by the kill mechanism, and main is none/]);
  t.match(findings(podSpec([main(), { name: 'istio-proxy', image: 'istio/proxyv2:1.24' }], 'OnFailure'), { annotations: { 'sidecar-terminator.io/sidecars': 'istio-proxy' } }), [/^spec\.template\.metadata\.annotations\[sidecar-terminator\.io\/sidecars\]: with restartPolicy OnFailure, kubelet restarts a sidecar that exits non-zero/], 'a sidecar named by the annotation: the warning points at it');
  t.match(findings(podSpec([main()]), { annotations: { 'sidecar-terminator.io/sidecars': ['proxy'], 'stop.sidecar-terminator.io/proxy': ['envoy'] } }), [
    /sidecars\]: Invalid value: "\[\\"proxy\\"\]": not a container name/,
    /stop\.sidecar-terminator\.io\/proxy\]: Invalid value: "\[\\"envoy\\"\]": not a stop method/,
  ]);
});

t.test("a sidecar the kubelet restarts after SIGTERM by its own restartPolicy or rule is warned about, in any pod the markers apply to", async (t) => {
  const warned = (sidecar: V1Container, restartPolicy = 'Never') =>
    validatePodSpec(podSpec([main(), sidecar], restartPolicy), job).filter((f) => f.rule === 'on-failure-kill-exit-code').map((f) => f.detail);
  t.match(warned(killSidecar('proxy', { restartPolicy: 'OnFailure' })), [/^with the container's restartPolicy OnFailure, kubelet restarts a sidecar that exits non-zero when it is stopped by signal/], 'Never pod, sidecar OnFailure');
  t.match(warned(killSidecar('proxy', { restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'NotIn', values: [0] } }] })), [
    /^kubelet restarts this sidecar if it exits 143, as SIGTERM makes it, when it is stopped by signal \(rule 1: exit code 143 NotIn \[0\]\); .*change its restartPolicy or restartPolicyRules$/,
  ], 'Never pod, a rule that restarts on 143');
  t.match(warned(killSidecar('proxy', { restartPolicy: 'Always' })), [/\(the container's restartPolicy Always\)/], 'its own Always: exiting 0 would not help, so the fix says so');
  t.same(warned(killSidecar('proxy', { restartPolicy: 'Never' }), 'OnFailure'), [], 'OnFailure pod, sidecar Never: not restarted, no warning');
  t.same(warned(killSidecar('proxy', { restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [1] } }] })), [], 'a rule that does not match 143');
  t.same(warned(killSidecar('proxy', { restartPolicy: 'OnFailure' }), 'Always'), [], 'an Always pod: the markers do not apply, restart-policy-always says so');
});
