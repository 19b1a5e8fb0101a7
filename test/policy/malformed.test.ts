// The policy reads objects that may be anything (a hostile AdmissionReview, a hand-written
// manifest, a pod from the API): each malformed part is skipped or read as absent, never thrown on.
import t from 'tap';
import {
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  applyEnforcement,
  classifyContainers,
  decide,
  errorsOf,
  exitCodesByName,
  markerEntries,
  normalizeImage,
  restartPolicyOf,
  shouldManageObject,
  targetsVirtualNodes,
  validatePodSpec,
  isManageableSpec,
  warningsOf,
  type Finding,
  type PodLike,
  type PodSpec,
} from '../../src/policy/index.ts';

const kill = { name: ENV_WHEN_JOB_EXIT, value: 'true' };
const options = { fieldPrefix: 'spec', strictRestartPolicy: true };

t.test('containers and env entries that are not objects are skipped', async (t) => {
  const spec = { restartPolicy: 'Never', containers: ['main', { env: [42, null, kill] }] } as unknown as PodSpec;
  t.same(
    classifyContainers(spec).map(({ name, role, image }) => ({ name, role, image })),
    [
      { name: '#0', role: 'main', image: undefined },
      { name: '#1', role: 'sidecar', image: undefined },
    ],
    'a container without a name is called by its index',
  );
  t.same(markerEntries({ env: [42, kill] }), [{ name: ENV_WHEN_JOB_EXIT, index: 1, value: 'true', fromValueFrom: false }], 'the marker keeps its index in env');
  t.same(
    validatePodSpec(spec, options).map((finding) => finding.rule),
    [],
    'a string where a container should be is a main container without markers, not an error',
  );
});

t.test('a pod spec that is not an object has nothing to validate and is not managed', async (t) => {
  t.same(validatePodSpec('spec', options), []);
  t.equal(isManageableSpec(null, []), false);
  t.equal(restartPolicyOf({ restartPolicy: 'Sometimes' }), undefined, 'an unknown restartPolicy is neither of the three');
  t.equal(decide({ metadata: {}, status: { phase: 'Running' } }, undefined).outcome, 'ignore', 'a pod without a spec is Always by default: ignored');
});

t.test('markers without a usable value', async (t) => {
  const findingsOf = (env: unknown[]) => validatePodSpec({ restartPolicy: 'Never', containers: [{ name: 'main' }, { name: 'proxy', image: 'envoy:1', env }] }, options);
  const fromSecret = findingsOf([{ name: ENV_WITH_IMAGE, valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }]);
  t.match(fromSecret, [{ rule: 'marker-value-from', detail: /set value: to the quick-exit image reference instead/ }], 'a quick-exit image from valueFrom: set the image reference');
  t.match(findingsOf([{ name: ENV_WHEN_JOB_EXIT }]), [{ rule: 'marker-value', value: '' }], 'a marker without value: must be true or false');
  t.match(findingsOf([{ name: ENV_WITH_IMAGE }]), [{ rule: 'quick-exit-image-empty' }], 'a quick-exit image without value: empty');
});

t.test('exit codes: statuses that are not objects are skipped, a terminated state without exitCode counts as -1', async (t) => {
  const pod: PodLike = {
    status: {
      containerStatuses: ['main', { name: 'a', state: { terminated: {} } }, { name: 'b', state: { terminated: { exitCode: 0 } } }, { name: 'c', state: { running: {} } }],
    },
  };
  t.same([...exitCodesByName(pod)], [
    ['a', -1],
    ['b', 0],
  ]);
});

t.test('virtual-node targeting ignores malformed affinity terms', async (t) => {
  const affinity = (nodeAffinity: unknown) => ({ containers: [], affinity: { nodeAffinity } }) as unknown as PodSpec;
  t.equal(targetsVirtualNodes(affinity({ requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: ['term'] } })), false, 'a term that is not an object');
  t.equal(targetsVirtualNodes(affinity({ preferredDuringSchedulingIgnoredDuringExecution: ['preference'] })), false, 'a preference that is not an object');
  t.equal(
    targetsVirtualNodes(affinity({ preferredDuringSchedulingIgnoredDuringExecution: [{ preference: { matchExpressions: [{ key: 'type', operator: 'In', values: ['virtual-kubelet'] }] } }] })),
    true,
    'while a well-formed preference still counts',
  );
});

t.test('an image reference that does not parse is left as written', async (t) => {
  t.equal(normalizeImage('Not A Reference'), 'Not A Reference');
  t.equal(normalizeImage('nginx'), 'docker.io/library/nginx:latest');
});

t.test('shouldManageObject: the webhook rule for a whole object, as the sweeper applies it', async (t) => {
  const pod = (containers: unknown[], restartPolicy = 'Never') => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { restartPolicy, containers } });
  t.equal(shouldManageObject(pod([{ name: 'main', image: 'busybox:1' }, { name: 'proxy', image: 'envoy:1', env: [kill] }]), []), true, 'a sidecar and a main container');
  t.equal(shouldManageObject(pod([{ name: 'main', image: 'busybox:1' }]), []), false, 'no sidecar');
  t.equal(shouldManageObject(pod([{ name: 'proxy', image: 'envoy:1', env: [kill] }]), []), false, 'an error: no main container');
  t.equal(shouldManageObject({ apiVersion: 'v1', kind: 'ConfigMap' }, []), false, 'no pod spec at all');
});

t.test('errorsOf and warningsOf split findings by severity; warn mode leaves warnings as they are', async (t) => {
  const finding = (severity: Finding['severity']): Finding => ({ severity, rule: 'marker-value', field: 'f', type: 'Invalid value', detail: 'd' });
  const findings = [finding('error'), finding('warning'), finding('error')];
  t.same(errorsOf(findings), [finding('error'), finding('error')]);
  t.same(warningsOf(findings), [finding('warning')]);
  t.same(applyEnforcement(findings, 'warn'), [finding('warning'), finding('warning'), finding('warning')]);
});

t.test("a Job's podFailurePolicy that is malformed judges nothing, part by part", async (t) => {
  const sidecar = { name: 'proxy', image: 'envoy:1', env: [kill] };
  const judged = (jobSpec: unknown, containers: unknown[] = [{ name: 'main' }, sidecar]) =>
    validatePodSpec({ restartPolicy: 'Never', containers }, { ...options, fieldPrefix: 'spec.template.spec', job: { spec: jobSpec, fieldPrefix: 'spec' } })
      .filter((finding) => finding.rule === 'pod-failure-policy-sidecar-exit-code')
      .map((finding) => finding.field);
  const failJob = { action: 'FailJob', onExitCodes: { operator: 'NotIn', values: [0] } };
  t.same(judged({ podFailurePolicy: { rules: [failJob] } }), ['spec.podFailurePolicy.rules[0].onExitCodes'], 'well-formed: judged');
  for (const [what, jobSpec] of [
    ['a Job spec that is not an object', 'spec'],
    ['a policy that is not an object', { podFailurePolicy: [failJob] }],
    ['rules that are not a list', { podFailurePolicy: { rules: failJob } }],
  ] as const) {
    t.same(judged(jobSpec), [], what);
  }
  const rules = [
    null,
    3,
    { action: 'FailJob' },
    { action: 'FailJob', onExitCodes: 'NotIn [0]' },
    { action: 'FailJob', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] },
    { action: 'Fail', onExitCodes: { operator: 'NotIn', values: [0] } },
    { action: 'FailJob', onExitCodes: { operator: 'Maybe', values: [143] } },
    { action: 'FailJob', onExitCodes: { operator: 'In', values: ['143', null, { code: 137 }] } },
    { action: 'FailJob', onExitCodes: { operator: 'In', values: 143 } },
    { action: 'FailJob', onExitCodes: { operator: 'NotIn', values: 'all' } },
    { action: 'FailJob', onExitCodes: { containerName: ['proxy'], operator: 'NotIn', values: [0] } },
  ];
  t.same(judged({ podFailurePolicy: { rules } }), [], 'rules that are not objects, without onExitCodes, with an unknown action or operator, values that are no list or not numbers, a containerName that is no string: none matches');
  t.same(judged({ podFailurePolicy: { rules: [...rules, { action: 'FailJob', onExitCodes: { containerName: null, operator: 'In', values: [143] } }] } }), ['spec.podFailurePolicy.rules[11].onExitCodes'], 'containerName null is unset: the rule judges every container');
  t.same(judged({ podFailurePolicy: { rules: [failJob] } }, [{ name: 'main' }, 'proxy', { env: [kill] }]), ['spec.podFailurePolicy.rules[0].onExitCodes'], 'a container that is not an object is skipped; one without a name is judged by a rule for every container');
});

t.test('restart rules that are malformed restart nothing: no finding about restarts', async (t) => {
  const rules = [null, { action: 'Restart' }, { action: 'Restart', exitCodes: { operator: 'In', values: ['0', '143'] } }, { action: 'Restart', exitCodes: { operator: 'Sometimes', values: [0] } }];
  const spec = { restartPolicy: 'Never', containers: [{ name: 'main', restartPolicy: 'Never', restartPolicyRules: rules }, { name: 'proxy', env: [kill], restartPolicy: 'Never', restartPolicyRules: { action: 'Restart' } }] };
  t.same(validatePodSpec(spec, options), []);
});
