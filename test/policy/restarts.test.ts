// Whether the kubelet restarts a container that exited: the cases of ContainerShouldRestart and
// FindMatchingContainerRestartRule (k8s.io/kubernetes v1.37 pkg/api/v1/pod/util.go), and the
// words that say what decided.
import t from 'tap';
import { containerRestart, explainRestart, restartCause, restartOfContainerAt, setsOwnRestartPolicy, type Container } from '../../src/policy/index.ts';

const rule = (operator: unknown, values: unknown, action: unknown = 'Restart') => ({ action, exitCodes: { operator, values } });
const restarts = (podPolicy: unknown, container: Container, exitCode: number) => containerRestart({ restartPolicy: podPolicy }, container, exitCode).restarts;

t.test('no restartPolicy of its own: the pod decides (unset, or unknown, restarts as Always)', async (t) => {
  for (const [podPolicy, code, expected] of [
    ['Never', 0, false], ['Never', 1, false],
    ['OnFailure', 0, false], ['OnFailure', 1, true], ['OnFailure', -1, true],
    ['Always', 0, true], [undefined, 0, true], ['Sometimes', 0, true],
  ] as const) {
    t.equal(restarts(podPolicy, {}, code), expected, `pod ${podPolicy}, exit ${code}`);
  }
  t.same(containerRestart({}, { restartPolicy: null }, 0), { restarts: true, exitCode: 0, decidedBy: { by: 'pod', policy: 'Always' } }, 'null is unset');
  t.equal(restarts('Never', { restartPolicyRules: [rule('In', [42])] }, 42), false, 'rules without restartPolicy are not read');
});

t.test("the container's restartPolicy wins over the pod's when no rule matches", async (t) => {
  for (const [own, code, expected] of [
    ['Never', 1, false], ['OnFailure', 0, false], ['OnFailure', 137, true], ['Always', 0, true],
  ] as const) {
    t.same(containerRestart({ restartPolicy: own === 'Never' ? 'OnFailure' : 'Never' }, { restartPolicy: own }, code), { restarts: expected, exitCode: code, decidedBy: { by: 'container', policy: own } }, `${own}, exit ${code}`);
  }
  t.same(containerRestart({ restartPolicy: 'Never' }, { restartPolicy: 'Sometimes' }, 1).decidedBy, { by: 'pod', policy: 'Never' }, 'a policy the kubelet does not know falls back to the pod');
});

t.test('rules: the first match decides, by its operator and values', async (t) => {
  const own = (rules: unknown, policy = 'Never'): Container => ({ restartPolicy: policy, restartPolicyRules: rules });
  t.same(containerRestart({ restartPolicy: 'Never' }, own([rule('In', [42])]), 42), { restarts: true, exitCode: 42, decidedBy: { by: 'rule', rule: 1, action: 'Restart', operator: 'In', values: [42] } }, 'In, matched');
  t.same(containerRestart({ restartPolicy: 'Never' }, own([rule('In', [42])]), 1).decidedBy, { by: 'container', policy: 'Never' }, 'In, not matched: the container policy');
  t.equal(restarts('Never', own([rule('NotIn', [0, 2])]), 1), true, 'NotIn, matched');
  t.equal(restarts('Never', own([rule('NotIn', [0, 2])]), 2), false, 'NotIn, not matched');
  t.same(containerRestart({}, own([rule('In', [3]), rule('NotIn', [0]), rule('In', [1])]), 1).decidedBy, { by: 'rule', rule: 2, action: 'Restart', operator: 'NotIn', values: [0] }, 'the first match, counted from 1');
  t.same(containerRestart({}, own([rule('In', [1], 'RestartAllContainers')]), 1).decidedBy, { by: 'rule', rule: 1, action: 'RestartAllContainers', operator: 'In', values: [1] }, 'RestartAllContainers counts as a restart (safer to wait where its gate is off)');
  t.same(containerRestart({}, own([rule('In', [1], 'Terminate'), rule('In', [1])]), 1).decidedBy, { by: 'container', policy: 'Never' }, 'a matched rule of another action ends the search: the container policy decides');
  t.equal(restarts('Never', own([rule('Equals', [1]), { action: 'Restart' }, 'junk', rule('In', ['1', 1])]), 1), true, 'an unknown operator, a rule without exitCodes and one not an object match nothing; values that are not numbers are skipped');
  t.equal(restarts('Never', own([rule('In', null)]), 1), false, 'no values: In matches nothing');
  t.equal(restarts('Never', own({ action: 'Restart' }), 1), false, 'rules not a list: none');
});

t.test('the container at a position of spec.containers; none there decides by the pod', async (t) => {
  const spec = { restartPolicy: 'Never', containers: [{ name: 'main', restartPolicy: 'OnFailure' }, 'junk'] };
  t.equal(restartOfContainerAt(spec, 0, 1).restarts, true);
  t.same(restartOfContainerAt(spec, 1, 1).decidedBy, { by: 'pod', policy: 'Never' });
  t.same(restartOfContainerAt(spec, 5, 1).decidedBy, { by: 'pod', policy: 'Never' });
});

t.test('what decided, in words', async (t) => {
  t.equal(explainRestart(containerRestart({ restartPolicy: 'Never' }, { restartPolicy: 'Never', restartPolicyRules: [rule('In', [42])] }, 42)), 'will be restarted (rule 1: exit code 42 In [42])');
  t.equal(restartCause(containerRestart({}, { restartPolicy: 'Never', restartPolicyRules: [rule('NotIn', [0, 1], 'RestartAllContainers')] }, 2)), 'rule 1: exit code 2 NotIn [0, 1], RestartAllContainers');
  t.equal(explainRestart(containerRestart({ restartPolicy: 'OnFailure' }, {}, 1)), 'will be restarted (restartPolicy OnFailure)');
  t.equal(explainRestart(containerRestart({ restartPolicy: 'OnFailure' }, { restartPolicy: 'Never' }, 1)), "will not be restarted (the container's restartPolicy Never)");
});

t.test('a restartPolicy of its own is one set, null being unset', async (t) => {
  t.ok(setsOwnRestartPolicy({ restartPolicy: 'Never' }));
  t.notOk(setsOwnRestartPolicy({ restartPolicy: null }));
  t.notOk(setsOwnRestartPolicy({ restartPolicyRules: [rule('In', [1])] }));
});
