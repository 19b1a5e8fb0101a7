// The draft a stop plan is built in (src/policy/plan-draft.ts): each helper returns a new draft
// with one thing added, and the readings of the plan's inputs every rung shares.
import t from 'tap';
import { EMPTY_DRAFT, gracePeriodSeconds, imageAllowed, lookingAgainIn, setsPhase, telling, warning, withSteps, type Draft, type Planning, type Step } from '../../src/policy/plan-draft.ts';
import { CONDITION_REASONS, rolesOf, type StopSettings } from '../../src/policy/index.ts';
import { QUICK_EXIT, jobPod, killSidecar, main } from '../support/pods.ts';

const crrStep: Step = { type: 'create-crr', containers: ['proxy'] };
const condition = { status: 'True' as const, reason: CONDITION_REASONS.stopping, message: 'm' };

t.test('withSteps adds the steps after the others and leaves the draft given as it was', async (t) => {
  const first = withSteps(EMPTY_DRAFT, crrStep);
  const second = withSteps(first, { type: 'finish' }, { type: 'set-condition', condition });
  t.same(second.steps.map((step) => step.type), ['create-crr', 'finish', 'set-condition']);
  t.same(first.steps, [crrStep], 'the earlier draft keeps its one step');
  t.same(EMPTY_DRAFT, { steps: [], stopping: [] }, 'the empty draft stays empty');
});

t.test('every helper keeps what it does not add to', async (t) => {
  const draft: Draft = { steps: [crrStep], stopping: ['proxy (SIGTERM)'], requeueAfterMs: 9_000, confirm: true, waitingForImage: { ...condition, status: 'False' } };
  for (const [name, next] of [
    ['withSteps', withSteps(draft, { type: 'finish' })],
    ['telling', telling(draft, 'sql (SIGTERM)')],
    ['warning', warning(draft, 'signal-failed', 'words')],
    ['lookingAgainIn', lookingAgainIn(draft, 60_000)],
  ] as const) {
    t.match(next, { requeueAfterMs: 9_000, confirm: true, waitingForImage: draft.waitingForImage }, name);
    t.ok(next.steps.length >= 1 && next.steps[0] === crrStep, `${name}: the earlier step first`);
    t.equal(next.stopping[0], 'proxy (SIGTERM)', `${name}: the sidecars told already`);
  }
});

t.test('telling names the sidecars after those told already, without adding a step', async (t) => {
  const told = telling(telling(EMPTY_DRAFT, 'proxy (SIGTERM)'), 'sql (ContainerRecreateRequest)', 'logs (quick-exit image q:1)');
  t.same(told.stopping, ['proxy (SIGTERM)', 'sql (ContainerRecreateRequest)', 'logs (quick-exit image q:1)']);
  t.same(told.steps, []);
});

t.test('warning adds a warn step, with its key only when one is given', async (t) => {
  t.same(warning(EMPTY_DRAFT, 'signal-failed', 'it failed').steps, [{ type: 'warn', code: 'signal-failed', message: 'it failed' }]);
  t.same(warning(EMPTY_DRAFT, 'quick-exit-image-not-pulled', 'ErrImagePull', 'image-not-pulled/logs').steps, [{ type: 'warn', code: 'quick-exit-image-not-pulled', message: 'ErrImagePull', key: 'image-not-pulled/logs' }]);
  t.notOk('key' in warning(EMPTY_DRAFT, 'signal-failed', 'it failed', '').steps[0]!, 'an empty key is no key');
});

t.test('lookingAgainIn: the shorter delay wins, whichever comes first', async (t) => {
  t.equal(lookingAgainIn(EMPTY_DRAFT, 45_000).requeueAfterMs, 45_000, 'the first delay is taken');
  t.equal(lookingAgainIn(lookingAgainIn(EMPTY_DRAFT, 45_000), 2_000).requeueAfterMs, 2_000, 'a shorter one after it');
  t.equal(lookingAgainIn(lookingAgainIn(EMPTY_DRAFT, 2_000), 45_000).requeueAfterMs, 2_000, 'a longer one after it');
  t.equal(EMPTY_DRAFT.requeueAfterMs, undefined, 'until then, none');
});

t.test('setsPhase: a draft that marks the pod terminal or escalates to a phase', async (t) => {
  t.equal(setsPhase(EMPTY_DRAFT), false);
  t.equal(setsPhase(withSteps(EMPTY_DRAFT, crrStep, { type: 'set-condition', condition }, { type: 'escalate-image', container: 'proxy', image: QUICK_EXIT })), false, 'no step of these writes the phase');
  t.equal(setsPhase(withSteps(EMPTY_DRAFT, crrStep, { type: 'mark-terminal', phase: 'Succeeded', condition })), true);
  t.equal(setsPhase(withSteps(EMPTY_DRAFT, { type: 'escalate-phase', phase: 'Failed', condition })), true);
});

const SETTINGS: StopSettings = { killMechanism: 'signal', signal: { image: 'st:1', command: [] }, quickExitImageAllowlist: [], quickExitImage: '' };

/** The planning of a pod with a main container and sidecar proxy; `grace` the pod's terminationGracePeriodSeconds. */
function planningOf(proxyEnv: Array<{ name: string; value: string }> = [], grace?: number, allowlist: string[] = []): Planning {
  const pod = jobPod([main(), killSidecar('proxy', { env: proxyEnv })], { main: 0, proxy: 'running' }, grace === undefined ? {} : { spec: { terminationGracePeriodSeconds: grace } });
  const roles = rolesOf(pod);
  return { pod, settings: { ...SETTINGS, quickExitImageAllowlist: allowlist }, now: 0, roles: new Map(roles.map((role) => [role.name, role])), mains: [], history: {} };
}

t.test("gracePeriodSeconds: the sidecar's own, else the pod's, else Kubernetes' 30", async (t) => {
  const proxy = (planning: Planning) => gracePeriodSeconds(planning, planning.roles.get('proxy')!);
  t.equal(proxy(planningOf()), 30, 'neither set');
  t.equal(proxy(planningOf([], 90)), 90, "the pod's");
  t.equal(proxy(planningOf([], 0)), 0, 'a pod grace period of 0 is one');
  t.equal(proxy(planningOf([{ name: 'SIDECAR_TERMINATOR_GRACE_PERIOD_SECONDS', value: '7' }], 90)), 7, 'its own first');
  const annotated = planningOf([], 90);
  annotated.pod.metadata!.annotations = { 'grace-period-seconds.sidecar-terminator.io/proxy': '12' };
  t.equal(proxy({ ...annotated, roles: new Map(rolesOf(annotated.pod).map((role) => [role.name, role])) }), 12, 'its own, from the annotation');
});

t.test('imageAllowed: any image under an empty allowlist, else one matching a pattern', async (t) => {
  t.equal(imageAllowed(planningOf(), 'anything:1'), true);
  const listed = planningOf([], undefined, ['registry.example.com/quick-exit:*', 'docker.io/library/busybox:*']);
  t.equal(imageAllowed(listed, QUICK_EXIT), true);
  t.equal(imageAllowed(listed, 'busybox:1.36'), true, 'matched in its normalized form');
  t.equal(imageAllowed(listed, 'registry.example.com/other:1.0'), false);
});
