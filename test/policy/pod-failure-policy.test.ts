// The rule of a Job's podFailurePolicy that decides a failed pod by one container's exit code, as
// the Job controller finds it (matchPodFailurePolicy, k8s.io/kubernetes pkg/controller/job/pod_failure_policy.go).
import t from 'tap';
import { podFailureRules } from '../../src/policy/pod-failure-policy.ts';

const rule = (action: string, operator: string, values: number[], containerName?: string) => ({ action, onExitCodes: { ...(containerName ? { containerName } : {}), operator, values } });

t.test('the first rule whose onExitCodes match the container and its exit code decides', async (t) => {
  const { ruleFor } = podFailureRules({
    rules: [
      { action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] },
      rule('FailJob', 'In', [42], 'main'),
      rule('Count', 'In', [143], 'proxy'),
      rule('FailIndex', 'NotIn', [1]),
    ],
  });
  t.same(ruleFor('main', 42), { index: 1, action: 'FailJob' }, 'a rule for that container');
  t.same(ruleFor('proxy', 42), { index: 3, action: 'FailIndex' }, 'a rule for another container is passed over');
  t.same(ruleFor('proxy', 143), { index: 2, action: 'Count' }, 'an earlier rule wins');
  t.same(ruleFor('main', 143), { index: 3, action: 'FailIndex' });
  t.equal(ruleFor('main', 1), undefined, 'NotIn with the code: no match');
  t.equal(ruleFor('main', 0), undefined, 'exit code 0 matches no rule, not even NotIn [1]: the Job controller skips it');
  t.equal(podFailureRules(undefined).ruleFor('main', 1), undefined, 'no policy: no rule');
});
