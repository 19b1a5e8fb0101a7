// The pieces the fence's CEL is composed of (src/kube/cel.ts, src/kube/fence-pod.ts): each one's
// text, and where it restates the policy (markers.ts, decide.ts), that it says what the policy
// decides. The composed rules themselves run against a real API server in test/e2e/fence.test.ts.
import t from 'tap';
import { and, celMap, group, holds, literal, not, onlyIf, onlyKeys, or, request, sameEntriesExcept, sameExcept, ternary, variable } from '../../src/kube/cel.ts';
import {
  NOT_EXITED,
  TERMINAL_PHASES,
  env,
  exitCodeOf,
  firstEnvValue,
  isKillSidecar,
  isSidecar,
  isTerminal,
  mainExitCodes,
  mainsExited,
  markedTrue,
  phaseOfMains,
  quickExitImage,
  triggeredRestartPolicy,
} from '../../src/kube/fence-pod.ts';
import { FENCE_RULES } from '../../src/kube/fence-rules.ts';
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, decide, phaseOfMains as policyPhaseOfMains } from '../../src/policy/index.ts';

t.test('the logic builders add no parentheses of their own', async (t) => {
  t.equal(and('a', 'b', 'c'), 'a && b && c');
  t.equal(or('a', 'b'), 'a || b');
  t.equal(not('a'), '!a');
  t.equal(group(or('a', 'b')), '(a || b)');
  t.equal(ternary('c', 'a', 'b'), 'c ? a : b');
  t.equal(onlyIf('variables.podUpdate', group('x')), '!variables.podUpdate || (x)', 'a validation of one write: an implication');
  t.equal(variable('leaseName'), 'variables.leaseName');
  t.equal(holds('object.?type', '"Warning"'), 'object.?type == optional.of("Warning")');
});

t.test('literals, maps and the shapes of objects', async (t) => {
  t.equal(literal('a"b'), '"a\\"b"', 'a JSON string is a CEL string');
  t.equal(literal(['Never', 'OnFailure']), '["Never","OnFailure"]');
  t.equal(celMap({ 'app.kubernetes.io/managed-by': 'x' }), '{"app.kubernetes.io/managed-by": "x"}');
  t.equal(onlyKeys('n', ['a', 'b']), 'dyn(n).all(k, k in ["a","b"])');
  t.equal(sameExcept('c', 'o', ['image']), 'dyn(c).all(k, k in ["image"] || (k in dyn(o) && dyn(c)[k] == dyn(o)[k])) && dyn(o).all(k, k in ["image"] || k in dyn(c))', 'every other key equal, and none removed');
  t.equal(sameEntriesExcept('next', 'old', '"l"'), 'next.all(k, k == "l" || (k in old && old[k] == next[k])) && old.all(k, k == "l" || k in next)');
  t.equal(
    request('', 'pods', 'status', ['UPDATE']),
    'request.resource.group == "" && request.resource.resource == "pods" && request.?subResource.orValue("") == "status" && request.operation in ["UPDATE"]',
  );
});

t.test("a container's markers, read as OpenKruise reads them", async (t) => {
  t.equal(env('c'), 'c.?env.orValue([])');
  t.equal(markedTrue('c', ENV_WHEN_JOB_EXIT), `c.?env.orValue([]).exists(e, e.name == "${ENV_WHEN_JOB_EXIT}" && e.?value.orValue("").lowerAscii() == "true")`, 'any entry, "true" in any case');
  t.equal(firstEnvValue('c', 'X'), '(c.?env.orValue([]).exists(e, e.name == "X") ? c.?env.orValue([]).filter(e, e.name == "X")[0].?value.orValue("") : "")', 'the first entry, as OpenKruise picks the quick-exit image');
  t.equal(isKillSidecar('t'), `(${markedTrue('t', ENV_WHEN_JOB_EXIT)} || t.name in variables.namedSidecars)`, 'marked, or named in the annotation');
  t.equal(quickExitImage('o'), firstEnvValue('o', ENV_WITH_IMAGE));
  t.equal(isSidecar('c'), `(${isKillSidecar('c')} || ${quickExitImage('c')} != "")`, 'a kill sidecar, or one with a quick-exit image');
});

t.test("the pod's restart policy and phase, as decide reads them", async (t) => {
  t.equal(triggeredRestartPolicy('oldObject'), 'oldObject.spec.?restartPolicy.orValue("Always") in ["Never", "OnFailure"]');
  const pod = (restartPolicy: string | undefined) => ({ spec: { ...(restartPolicy ? { restartPolicy } : {}), containers: [] } });
  const ignoredFor = (policy: string | undefined) => {
    const decision = decide(pod(policy), undefined);
    return decision.outcome === 'ignore' && decision.code === 'restart-policy-always';
  };
  const triggered = [undefined, 'Always', 'Never', 'OnFailure'].filter((policy) => !ignoredFor(policy));
  t.same(triggered, ['Never', 'OnFailure'], 'the policies the text lists are those decide does not ignore');
  t.equal(isTerminal('oldObject'), 'oldObject.status.?phase.orValue("") in ["Succeeded","Failed"]');
  t.same(TERMINAL_PHASES, [policyPhaseOfMains([0]), policyPhaseOfMains([1])], 'the phases decide sets are the terminal ones');
});

t.test("the main containers' exit codes, and the phase they make", async (t) => {
  t.equal(
    exitCodeOf('oldObject', 'c'),
    'oldObject.status.?containerStatuses.orValue([]).exists(s, s.name == c.name && has(s.state) && has(s.state.terminated)) ? oldObject.status.containerStatuses.filter(s, s.name == c.name)[0].state.terminated.exitCode : -1000',
  );
  t.ok(NOT_EXITED < -1, 'no exit code, nor the -1 the policy reads for a missing one');
  t.equal(mainExitCodes('oldObject'), `oldObject.spec.containers.filter(c, !${isSidecar('c')}).map(c, ${exitCodeOf('oldObject', 'c')})`, 'of the containers that are no sidecar');
  t.equal(mainsExited('variables.mainExitCodes'), 'variables.mainExitCodes.size() > 0 && !variables.mainExitCodes.exists(code, code == -1000)', 'at least one, and all exited');
  t.equal(phaseOfMains('variables.mainExitCodes', 'object'), '(variables.mainExitCodes.all(code, code == 0) ? object.status.?phase == optional.of("Succeeded") : object.status.?phase == optional.of("Failed"))');
  t.equal(policyPhaseOfMains([0, 0]), 'Succeeded', 'as decide: Succeeded when every one exited 0');
  t.equal(policyPhaseOfMains([0, 2]), 'Failed', 'else Failed');
});

t.test('the rules are composed of the pieces', async (t) => {
  const variables = Object.fromEntries(FENCE_RULES.watcher.variables.map((v) => [v.name, v.expression]));
  t.equal(variables.mainExitCodes, mainExitCodes('oldObject'));
  t.equal(variables.mainsExited, mainsExited('variables.mainExitCodes'));
  const expressions = FENCE_RULES.watcher.validations.map((v) => v.expression);
  t.ok(expressions.some((e) => e.endsWith(phaseOfMains('variables.mainExitCodes', 'object') + ')')), 'the phase rule ends on phaseOfMains');
  for (const [component, rules] of Object.entries(FENCE_RULES)) {
    const writes = rules.variables.slice(0, component === 'watcher' ? 6 : 3).map((v) => `variables.${v.name}`);
    t.equal(rules.validations.at(-1)!.expression, or(...writes), `${component}: the last rule refuses any other write`);
    for (const validation of rules.validations.slice(0, -1)) t.match(validation.expression, /^!variables\.\w+ \|\| /, `${component}: each rule is an implication`);
  }
});
