// The catalogue of rules as validation reads it: each finding's severity is its rule's (or its
// milder one, for the two rules whose summary names milder cases), and a fix closes a detail in
// the catalogue's own words.
import t from 'tap';
import { RULE_IDS, RULES, fixClause, severityOf } from '../../src/policy/rules.ts';
import { validatePodSpec } from '../../src/policy/validate.ts';

t.test('a severity is the rule\'s; only the rules with a milder one have another', async (t) => {
  for (const rule of RULE_IDS) t.equal(severityOf(rule), RULES[rule].severity, rule);
  t.same(RULE_IDS.filter((rule) => severityOf(rule, true) !== severityOf(rule)), ['restart-policy-always', 'sidecar-restart-policy-always']);
  t.equal(severityOf('restart-policy-always', true), 'warning');
  t.equal(severityOf('marker-value', true), 'error', 'a rule without a milder severity keeps its own');
});

t.test("a fix as the last clause of a detail: lowercase first, no full stop", async (t) => {
  t.equal(fixClause('no-main-container'), 'remove the markers from the container that does the work');
  t.equal(fixClause('quick-exit-image-empty'), 'set it to an image that exits 0 at once (for example a pinned busybox running `true`), or remove the variable');
});

t.test('restart-policy-always: an error where strict, a warning elsewhere; the same words', async (t) => {
  const spec = { restartPolicy: 'Always', containers: [{ name: 'main', image: 'm' }, { name: 'proxy', image: 'p', env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' }] }] };
  const severity = (strictRestartPolicy: boolean) => validatePodSpec(spec, { fieldPrefix: 'spec', strictRestartPolicy }).map((f) => [f.rule, f.severity]);
  t.same(severity(true), [['restart-policy-always', 'error']]);
  t.same(severity(false), [['restart-policy-always', 'warning']]);
});

t.test('sidecar-restart-policy-always: an error for a sidecar only its image stops, a warning for one the kill mechanism stops', async (t) => {
  const sidecar = (env: { name: string; value: string }) => ({ name: 'proxy', image: 'p', restartPolicy: 'Always', env: [env] });
  const severity = (env: { name: string; value: string }) =>
    validatePodSpec({ restartPolicy: 'Never', containers: [{ name: 'main', image: 'm' }, sidecar(env)] }, { fieldPrefix: 'spec', strictRestartPolicy: true })
      .filter((f) => f.rule === 'sidecar-restart-policy-always')
      .map((f) => f.severity);
  t.same(severity({ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: 'q:1' }), ['error']);
  t.same(severity({ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' }), ['warning']);
});
