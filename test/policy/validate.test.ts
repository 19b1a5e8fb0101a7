import t from 'tap';
import {
  ENV_IGNORE_EXIT_CODE,
  ENV_WHEN_JOB_EXIT,
  MIGRATED_ANNOTATION,
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
  isManageableSpec,
  validatePodSpec,
  type Finding,
  type AdmissionRuleId,
  type Severity,
  type ValidationOptions,
} from '../../src/policy/index.ts';
import type { V1Container, V1EnvVar } from '@kubernetes/client-node';
import { QUICK_EXIT, ignoreExitCodeSidecar, imageSidecar, killSidecar, main, podSpec } from '../support/pods.ts';

const job: ValidationOptions = { fieldPrefix: 'spec.template.spec', strictRestartPolicy: true };
/** A container's own restartPolicy (Never unless told) with one rule that restarts it on these exit codes. */
const restartOn = (operator: 'In' | 'NotIn', ...values: number[]) => ({ restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator, values } }] });
/** A podFailurePolicy rule on exit codes, for every container unless one is named. */
const failureRule = (action: string, operator: string, values: number[], containerName?: string) => ({ action, onExitCodes: { ...(containerName ? { containerName } : {}), operator, values } });
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
  'sidecar-restart-policy-always': {
    severity: 'error',
    spec: podSpec([main(), imageSidecar('logs', QUICK_EXIT, { restartPolicy: 'Always' })]),
    field: 'spec.template.spec.containers[1].restartPolicy',
    says: /Unsupported value: "Always": the kubelet restarts this sidecar whatever its exit code: the quick-exit image put in its place exits 0 and is started again and again/,
  },
  'main-restarted-after-success': {
    severity: 'warning',
    spec: podSpec([main('main', 'busybox:1.36', restartOn('NotIn', 1)), killSidecar()]),
    field: 'spec.template.spec.containers[0].restartPolicyRules[0]',
    says: /the kubelet restarts this main container when it exits 0 \(rule 1: exit code 0 NotIn \[1\]\), so it is never done/,
  },
  'pod-failure-policy-sidecar-exit-code': {
    severity: 'warning',
    spec: podSpec([main(), killSidecar()]),
    options: { job: { spec: { podFailurePolicy: { rules: [failureRule('FailJob', 'NotIn', [0])] } }, fieldPrefix: 'spec' } },
    field: 'spec.podFailurePolicy.rules[0].onExitCodes',
    says: /this rule \(FailJob\) matches exit code 137 or 143 of sidecar proxy, .* fails the whole Job, with no retry/,
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
  'native-sidecar-lost': {
    severity: 'error',
    // Moved by the webhook, then stripped of restartPolicy: Always by a later one.
    spec: podSpec([main()], 'Never', { initContainers: [{ name: 'proxy', image: 'envoy:1', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }] }] }),
    options: { fieldPrefix: 'spec', migratedSidecars: ['proxy'], annotations: { [MIGRATED_ANNOTATION]: 'proxy' }, containersFinal: true },
    field: 'spec.initContainers[0].restartPolicy',
    says: /Required value: proxy was moved here as a native sidecar \(annotation sidecar-terminator.io\/native-sidecars-migrated\), but its restartPolicy: Always was dropped, by a mutating webhook .* or by the API server when its SidecarContainers feature gate is off/,
  },
};

t.test('native-sidecar-lost: a native sidecar kept, a template (the webhook repairs its pods), and an init container of the user are not reported', async (t) => {
  const initContainers = (restartPolicy?: string) => [{ name: 'proxy', image: 'envoy:1', ...(restartPolicy ? { restartPolicy } : {}) }];
  const lost = (spec: Record<string, unknown>, options: Partial<ValidationOptions>) => validatePodSpec(spec, { ...job, ...options }).filter((f) => f.rule === 'native-sidecar-lost');
  t.same(lost(podSpec([main()], 'Never', { initContainers: initContainers('Always') }), { fieldPrefix: 'spec', migratedSidecars: ['proxy'], annotations: { [MIGRATED_ANNOTATION]: 'proxy' }, containersFinal: true }), [], 'kept');
  t.same(lost(podSpec([main()], 'Never', { initContainers: initContainers() }), { migratedSidecars: ['proxy'], annotations: { [MIGRATED_ANNOTATION]: 'proxy' } }), [], 'a template');
  t.same(lost(podSpec([main()], 'Never', { initContainers: initContainers() }), { fieldPrefix: 'spec', containersFinal: true }), [], 'not moved by the webhook');
});

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
  const check = (spec: Record<string, unknown>) => isManageableSpec(spec, validatePodSpec(spec, { fieldPrefix: 'spec', strictRestartPolicy: false }));
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

t.test('a sidecar the kubelet restarts after an exit code a stop can leave (0, 137, 143) is warned about, naming the codes, in any pod the markers apply to', async (t) => {
  const warned = (sidecar: V1Container, restartPolicy = 'Never') =>
    validatePodSpec(podSpec([main(), sidecar], restartPolicy), job).filter((f) => f.rule === 'on-failure-kill-exit-code').map((f) => f.detail);
  t.match(warned(killSidecar('proxy', { restartPolicy: 'OnFailure' })), [/^with the container's restartPolicy OnFailure, kubelet restarts a sidecar that exits non-zero when it is stopped by signal \(143 when SIGTERM ends it, 137 when it is killed\)/], 'Never pod, sidecar OnFailure');
  t.same(warned(killSidecar('proxy', restartOn('NotIn', 0))), [
    'kubelet restarts this sidecar if it exits 137 (rule 1: exit code 137 NotIn [0]), 143 (rule 1: exit code 143 NotIn [0]), as a stop can leave it (0 when it exits by itself, 143 when SIGTERM ends it, 137 when it is killed); ' +
      'set KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE="true", or change its restartPolicy or restartPolicyRules, or make the sidecar exit 0 on SIGTERM',
  ], 'Never pod, a rule that restarts on 137 and 143: exiting 0 is a fix');
  t.match(warned(killSidecar('proxy', restartOn('In', 137))), [/exits 137 \(rule 1: exit code 137 In \[137\]\), as a stop/], 'killed: 137 counts too');
  t.match(warned(killSidecar('proxy', restartOn('NotIn', 1))), [/exits 0 \(rule 1: exit code 0 NotIn \[1\]\), 137 \(.*\), 143 \(.*\), as a stop .*restartPolicyRules$/], 'a rule that restarts on 0 too: exiting 0 is no fix');
  t.match(warned(killSidecar('proxy', { ...restartOn('In', 143), restartPolicy: 'OnFailure' })), [/exits 137 \(the container's restartPolicy OnFailure\), 143 \(rule 1: exit code 143 In \[143\]\)/], 'a rule and the policy: each code with what decided it');
  t.same(warned(killSidecar('proxy', { restartPolicy: 'Never' }), 'OnFailure'), [], 'OnFailure pod, sidecar Never: not restarted, no warning');
  t.same(warned(killSidecar('proxy', restartOn('In', 1))), [], 'a rule that matches none of 0, 137, 143');
  t.same(warned(killSidecar('proxy', { restartPolicy: 'OnFailure' }), 'Always'), [], 'an Always pod: the markers do not apply, restart-policy-always says so');
  t.same(warned(ignoreExitCodeSidecar('proxy', restartOn('NotIn'))), [], 'its exit code ignored: the pod ends before it is stopped');
  t.same(warned(killSidecar('proxy', { restartPolicy: 'Always' })), [], "its own Always: sidecar-restart-policy-always says so");
  const envoy = (extra: Partial<V1Container>) => killSidecar('proxy', { ...extra, env: [{ name: 'SIDECAR_TERMINATOR_STOP', value: 'envoy' }] });
  t.match(warned(envoy(restartOn('In', 0))), [/exits 0 \(rule 1: exit code 0 In \[0\]\)/], 'stopped by its shutdown request: its exit 0 restarts it');
  t.same(warned(envoy(restartOn('In', 137, 143))), [], 'stopped by its shutdown request: no signal, so neither 137 nor 143');
});

t.test('sidecar-restart-policy-always: a sidecar with its own restartPolicy Always', async (t) => {
  const found = (sidecar: V1Container, options: Partial<ValidationOptions> = {}) =>
    validatePodSpec(podSpec([main(), sidecar]), { ...job, ...options }).filter((f) => f.rule === 'sidecar-restart-policy-always');
  t.match(found(killSidecar('proxy', { restartPolicy: 'Always' })), [
    {
      severity: 'warning',
      field: 'spec.template.spec.containers[1].restartPolicy',
      detail: /^the kubelet restarts this sidecar whatever its exit code, so a stop does not keep it down: stopped by signal, it is ended from outside after its grace period .*ContainerRecreateRequest .* the Job does not complete; remove its restartPolicy \(and restartPolicyRules\), or make it a native sidecar/,
    },
  ], 'stopped by the kill mechanism: a warning');
  t.match(found({ name: 'istio-proxy', image: 'istio/proxyv2:1.24', restartPolicy: 'Always' }, { annotations: { [POD_ANNOTATIONS.sidecars]: 'istio-proxy' } }), [{ severity: 'warning' }], 'named by the annotation');
  t.same(found(ignoreExitCodeSidecar('proxy', { restartPolicy: 'Always' })), [], 'its exit code ignored: the phase is set before it is stopped, and nothing restarts in a terminal phase');
  t.match(found(imageSidecar('logs', QUICK_EXIT, { restartPolicy: 'Always' })), [{ severity: 'error' }], 'stopped by its quick-exit image only: it never stays down');
  t.same(found(killSidecar('proxy', { restartPolicy: 'OnFailure' })), [], 'another policy of its own: on-failure-kill-exit-code, if anything');
});

t.test('main-restarted-after-success: a main container the kubelet restarts when it exits 0', async (t) => {
  const found = (first: V1Container, restartPolicy = 'Never', sidecar = killSidecar()) =>
    validatePodSpec(podSpec([first, sidecar], restartPolicy), job).filter((f) => f.rule === 'main-restarted-after-success').map(formatFinding);
  t.same(found(main('main', 'busybox:1.36', { restartPolicy: 'Always' })), [
    "spec.template.spec.containers[0].restartPolicy: the kubelet restarts this main container when it exits 0 (the container's restartPolicy Always), so it is never done: its sidecars are never stopped, and the Job does not complete (it would not without the add-on either); remove its restartPolicy, or set it to Never or OnFailure",
  ], 'its own Always');
  t.match(found(main('main', 'busybox:1.36', { restartPolicy: 'OnFailure', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [3] } }, { action: 'Restart', exitCodes: { operator: 'In', values: [0, 3] } }] })), [
    /^spec\.template\.spec\.containers\[0\]\.restartPolicyRules\[1\]: .*\(rule 2: exit code 0 In \[0, 3\]\).*; leave exit code 0 out of this rule/,
  ], 'the rule that matches 0, where it is');
  t.same(found(main('main', 'busybox:1.36', restartOn('NotIn', 0, 1))), [], 'a rule that leaves 0 out');
  t.same(found(main('main', 'busybox:1.36', { restartPolicy: 'OnFailure' })), [], 'its own OnFailure: done when it exits 0');
  t.same(found(main('main', 'busybox:1.36', { restartPolicy: 'Always' }), 'OnFailure', main('other')), [], 'no sidecar: nothing for the add-on to say');
});

t.test("pod-failure-policy-sidecar-exit-code: a rule of the Job's podFailurePolicy that matches what a stopped sidecar exits with", async (t) => {
  const found = (rules: unknown[], containers: V1Container[] = [main(), killSidecar()], restartPolicy = 'Never') =>
    validatePodSpec(podSpec(containers, restartPolicy), { ...job, job: { spec: { podFailurePolicy: { rules } }, fieldPrefix: 'spec' } })
      .filter((f) => f.rule === 'pod-failure-policy-sidecar-exit-code')
      .map((f) => `${f.field}: ${f.detail}`);
  t.same(found([failureRule('FailJob', 'In', [143])]), [
    'spec.podFailurePolicy.rules[0].onExitCodes: this rule (FailJob) matches exit code 143 of sidecar proxy, which a stop can leave (143 when SIGTERM ends it, 137 when it is killed), so a pod whose main containers succeeded fails the whole Job, with no retry; ' +
      'set KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE="true" on proxy (the watcher then sets the pod\'s phase from its main containers before stopping it, and the Job controller judges failed pods only) or make it exit 0 on SIGTERM, ' +
      'and set onExitCodes.containerName to the main container so that this rule judges it alone',
  ], 'In [143]: the whole finding');
  const codes = (rules: unknown[], containers?: V1Container[]) => found(rules, containers).map((text) => /matches exit code (.*?) of sidecar/.exec(text)?.[1] ?? text);
  t.same(codes([failureRule('FailJob', 'NotIn', [0])]), ['137 or 143'], 'NotIn [0] matches 143: 0 is never matched, the rest is');
  t.same(codes([failureRule('FailJob', 'In', [137, 143])]), ['137 or 143']);
  t.same(codes([failureRule('FailJob', 'NotIn', [143])]), ['137'], 'NotIn without 137 matches 137');
  t.same(codes([failureRule('FailJob', 'NotIn', [137, 143])]), [], 'NotIn with both: neither');
  t.same(codes([failureRule('FailJob', 'In', [1, 42])]), [], 'codes a stop does not leave');
  t.same(codes([failureRule('FailJob', 'NotIn', [0], 'main')]), [], 'a rule that judges the main container alone');
  t.same(codes([failureRule('FailJob', 'NotIn', [0], 'proxy')]), ['137 or 143'], 'a rule that names the sidecar');
  t.same(codes([failureRule('Count', 'NotIn', [0])]), [], 'Count: what a failed pod gets without a rule, nothing more');
  t.same(codes([failureRule('Count', 'In', [143]), failureRule('FailJob', 'NotIn', [0])]), ['137'], 'the first rule that matches decides: Count takes 143, FailJob 137');
  t.match(found([failureRule('FailIndex', 'In', [143])]), [/^spec\.podFailurePolicy\.rules\[0\]\.onExitCodes: this rule \(FailIndex\) .* fails its index, with no retry/]);
  t.match(found([failureRule('Ignore', 'In', [137])]), [/this rule \(Ignore\) matches exit code 137 .* is not counted as failed but replaced, so its work runs again, with no limit/]);
  t.match(found([failureRule('FailIndex', 'In', [143]), failureRule('FailJob', 'In', [137])]), [/^spec\.podFailurePolicy\.rules\[0\]\.onExitCodes: this rule \(FailIndex\) matches exit code 143/, /^spec\.podFailurePolicy\.rules\[1\]\.onExitCodes: this rule \(FailJob\) matches exit code 137/], 'one finding per rule, in their order');

  const failJob = [failureRule('FailJob', 'NotIn', [0])];
  t.same(found(failJob, [main(), ignoreExitCodeSidecar('proxy')]), [], 'its exit code ignored: the pod succeeds before it is stopped, and succeeded pods are not judged');
  t.same(found(failJob, [main(), imageSidecar()]), [], 'stopped by its quick-exit image: exit code 0');
  t.same(found(failJob, [main(), killSidecar('proxy', { env: [{ name: 'SIDECAR_TERMINATOR_STOP', value: 'envoy' }] })]), [], 'stopped by its shutdown request: its own exit code');
  t.same(codes(failJob, [main(), killSidecar('proxy', restartOn('In', 143))]), ['137'], 'a code its own rule restarts it after does not end the pod');
  t.same(found(failJob, [main(), killSidecar('proxy', { restartPolicy: 'Always' })]), [], 'nor does any code, with its own Always');
  t.same(found(failJob, [main(), killSidecar()], 'OnFailure'), [], 'OnFailure: the API server refuses a podFailurePolicy, and restarts are the kubelet\'s');
  t.match(found(failJob, [main(), killSidecar('a'), killSidecar('b')]), [/matches exit code 137 or 143 of sidecar a, and 137 or 143 of sidecar b, .* on a and b \(.*before stopping them, .* or make them exit 0/], 'several sidecars');
  t.match(found(failJob, [main(), ...['a', 'b', 'c', 'd', 'e'].map((name) => killSidecar(name))]), [/of sidecar c, and of 2 more sidecars, .* on a, b, c and 2 more \(/], 'a few named, the rest counted');
  const many = Array.from({ length: 21 }, () => failureRule('FailJob', 'In', [1]));
  many[20] = failureRule('FailJob', 'NotIn', [0]);
  t.same(found(many), [], 'the API server accepts 20 rules: a 21st is not read');
  t.same(validatePodSpec(podSpec([main(), killSidecar()]), { ...job, job: { spec: { podFailurePolicy: { rules: failJob } }, fieldPrefix: 'spec' } }).length, 1, 'the finding alone');
});

t.test('inspectObject reads the podFailurePolicy of a Job and of a CronJob, where each keeps it', async (t) => {
  const podFailurePolicy = { rules: [failureRule('FailJob', 'NotIn', [0])] };
  const template = { spec: podSpec([main(), killSidecar()]) };
  const fields = (object: unknown) => (inspectObject(object, [])?.findings ?? []).map((f) => `${f.rule} ${f.field}`);
  t.same(fields({ apiVersion: 'batch/v1', kind: 'Job', spec: { podFailurePolicy, template } }), ['pod-failure-policy-sidecar-exit-code spec.podFailurePolicy.rules[0].onExitCodes']);
  t.same(fields({ apiVersion: 'batch/v1', kind: 'CronJob', spec: { jobTemplate: { spec: { podFailurePolicy, template } } } }), ['pod-failure-policy-sidecar-exit-code spec.jobTemplate.spec.podFailurePolicy.rules[0].onExitCodes']);
  t.same(fields({ apiVersion: 'v1', kind: 'Pod', spec: { ...template.spec, podFailurePolicy } }), [], 'a pod has no podFailurePolicy: its Job judges it');
});
