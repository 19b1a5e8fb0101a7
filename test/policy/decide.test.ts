import t from 'tap';
import { SIGNAL, decide, mainsFinishedAt, sidecarsPendingSince, stopRoute, type Action, type Decision } from '../../src/policy/index.ts';
import { ignoreExitCodeSidecar, imageSidecar, jobPod, killSidecar, main, normalNode, virtualNode, virtualNodeByTaint } from '../support/pods.ts';

const actionsOf = (decision: Decision): Action[] => (decision.outcome === 'act' ? decision.actions : []);

t.test('stop mechanism table (Kruise priority: the kill mechanism wins on a normal node)', async (t) => {
  const markers = (whenJobExit: boolean, quickExitImage?: string) => ({ whenJobExit, quickExitImage, ignoreExitCode: false, stop: SIGNAL, gracePeriodSeconds: undefined });
  t.equal(stopRoute(markers(true), 'normal'), 'kill', 'normal node, WHEN_JOB_EXIT: kill');
  t.equal(stopRoute(markers(true, 'q:1'), 'normal'), 'kill', 'normal node, both: kill wins (Kruise priority)');
  t.equal(stopRoute(markers(false, 'q:1'), 'normal'), 'image', 'normal node, only WITH_IMAGE: image');
  t.equal(stopRoute(markers(false, 'q:1'), 'virtual'), 'image', 'virtual node, WITH_IMAGE: image');
  t.equal(stopRoute(markers(true, 'q:1'), 'virtual'), 'image', 'virtual node, both: image');
  t.equal(stopRoute(markers(true), 'virtual'), undefined, 'virtual node, only WHEN_JOB_EXIT: cannot stop');
});

t.test('trigger: restartPolicy', async (t) => {
  const containers = [main(), killSidecar()];
  t.match(decide(jobPod(containers, { main: 0, proxy: 'running' }, { spec: { restartPolicy: 'Always' } }), normalNode), { outcome: 'ignore', code: 'restart-policy-always' }, 'Always is never acted on');
  const unset = jobPod(containers, { main: 0, proxy: 'running' });
  delete (unset.spec as { restartPolicy?: string }).restartPolicy;
  t.match(decide(unset, normalNode), { outcome: 'ignore', code: 'restart-policy-always' }, 'unset restartPolicy means Always');
  t.match(decide(jobPod(containers, { main: 0, proxy: 'running' }, { spec: { restartPolicy: 'Never' } }), normalNode), { outcome: 'act' });
  t.match(decide(jobPod(containers, { main: 0, proxy: 'running' }, { spec: { restartPolicy: 'OnFailure' } }), normalNode), { outcome: 'act' });
});

t.test('trigger: Never acts on any exit code of the main containers', async (t) => {
  for (const code of [0, 1, 137, 143]) {
    const decision = decide(jobPod([main(), killSidecar()], { main: code, proxy: 'running' }), normalNode);
    t.same(actionsOf(decision), [{ type: 'kill', container: 'proxy' }], `main exited ${code}`);
  }
  t.match(decide(jobPod([main(), killSidecar()], { main: 'running', proxy: 'running' }), normalNode), { outcome: 'wait', code: 'mains-running' }, 'main running');
  t.match(decide(jobPod([main(), killSidecar()], { main: 'waiting', proxy: 'running' }), normalNode), { outcome: 'wait', code: 'mains-running' }, 'main waiting');
});

t.test('trigger: OnFailure acts only when every main container exited 0', async (t) => {
  const onFailure = { spec: { restartPolicy: 'OnFailure' } };
  t.same(actionsOf(decide(jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }, onFailure), normalNode)), [{ type: 'kill', container: 'proxy' }]);
  for (const code of [1, 143]) {
    t.match(decide(jobPod([main(), killSidecar()], { main: code, proxy: 'running' }, onFailure), normalNode), { outcome: 'wait', code: 'main-restarting' }, `main exited ${code}: it will restart`);
  }
  t.match(decide(jobPod([main(), killSidecar()], { main: 'running', proxy: 'running' }, onFailure), normalNode), { outcome: 'wait' }, 'main restarted and running');
});

t.test('trigger: missing container statuses never count as finished', async (t) => {
  t.match(decide(jobPod([main(), killSidecar()], { proxy: 'running' }), normalNode), { outcome: 'wait' }, 'main status missing');
  const noStatuses = jobPod([main(), killSidecar()], {});
  t.match(decide(noStatuses, normalNode), { outcome: 'wait' }, 'no statuses at all');
  delete (noStatuses as { status?: unknown }).status;
  t.match(decide(noStatuses, normalNode), { outcome: 'ignore', code: 'pod-not-started' }, 'no status: not started');
  t.same(actionsOf(decide(jobPod([main(), killSidecar()], { main: 0 }), normalNode)), [{ type: 'kill', container: 'proxy' }], 'sidecar status missing: still stopped');
});

t.test('pods left alone: deleted, pending, no sidecar, sidecars terminated', async (t) => {
  t.match(decide(jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }, { metadata: { deletionTimestamp: new Date('2026-01-01T00:02:00Z') } }), normalNode), { outcome: 'ignore', code: 'pod-deleting' }, 'being deleted');
  t.match(decide(jobPod([main(), killSidecar()], { main: 'waiting', proxy: 'waiting' }, { phase: 'Pending' }), normalNode), { outcome: 'ignore', code: 'pod-not-started' }, 'pending');
  t.match(decide(jobPod([main(), main('other')], { main: 0, other: 'running' }), normalNode), { outcome: 'ignore', code: 'no-sidecar' }, 'no sidecar');
  t.match(decide(jobPod([main(), killSidecar()], { main: 0, proxy: 143 }), normalNode), { outcome: 'finished' }, 'Never: sidecar exited 143 stays down');
  t.match(decide(jobPod([main(), killSidecar()], { main: 'running', proxy: 1 }), normalNode), { outcome: 'finished' }, 'Never: a crashed sidecar is not our business');
  t.match(decide(jobPod([main(), killSidecar()], { main: 0, proxy: 0 }, { spec: { restartPolicy: 'OnFailure' } }), normalNode), { outcome: 'finished' }, 'OnFailure: sidecar exited 0');
  t.match(decide(jobPod([main(), killSidecar()], { main: 0, proxy: 143 }, { spec: { restartPolicy: 'OnFailure' }, phase: 'Succeeded' }), normalNode), { outcome: 'finished' }, 'terminal phase: nothing restarts');
});

t.test('OnFailure: a sidecar that exited non-zero is about to restart, so it is waited for', async (t) => {
  const decision = decide(jobPod([main(), killSidecar()], { main: 0, proxy: 143 }, { spec: { restartPolicy: 'OnFailure' } }), normalNode);
  t.match(decision, { outcome: 'wait', code: 'sidecars-restarting' });
});

// OpenKruise v1.9.0, pkg/controller/sidecarterminator: isInterestingPod groups the containers into
// main and sidecar sets, and the trigger is containersCompleted(pod, mains) for Never and
// containersSucceeded(pod, mains) for OnFailure. Both are true of an empty set once the status
// lists every container of the spec, so a pod whose every container is a sidecar has its
// sidecars stopped as soon as the kubelet reports them all; markJobPodTerminated then sets
// Succeeded (containersSucceeded of no container).
t.test('every container a sidecar: stopped as OpenKruise stops them, once every container is reported', async (t) => {
  const containers = [killSidecar(), killSidecar('sql')];
  for (const restartPolicy of ['Never', 'OnFailure']) {
    t.same(actionsOf(decide(jobPod(containers, { proxy: 'running', sql: 'running' }, { spec: { restartPolicy } }), normalNode)), [
      { type: 'kill', container: 'proxy' },
      { type: 'kill', container: 'sql' },
    ], `${restartPolicy}: the empty set of main containers is done`);
    t.match(decide(jobPod(containers, { proxy: 'running' }, { spec: { restartPolicy } }), normalNode), { outcome: 'wait', code: 'containers-not-reported' }, `${restartPolicy}: not while a container has no status (containersCompleted compares the counts)`);
  }
  t.same(actionsOf(decide(jobPod(containers, { proxy: 'running', sql: 'waiting' }), normalNode)), [
    { type: 'kill', container: 'proxy' },
    { type: 'kill', container: 'sql' },
  ], 'a container still waiting has a status: Kruise does not wait for it to run');
  t.match(decide(jobPod(containers, { proxy: 143, sql: 0 }), normalNode), { outcome: 'finished' }, 'once they have exited, nothing is left to do');
  const garbled = jobPod(containers, { proxy: 'running' });
  (garbled.status!.containerStatuses as unknown[]).push(null, 'sql');
  t.match(decide(garbled, normalNode), { outcome: 'wait' }, 'a status entry that is not an object reports nothing');
  t.same(actionsOf(decide(jobPod([ignoreExitCodeSidecar()], { sql: 'running' }), normalNode)), [
    { type: 'markTerminal', phase: 'Succeeded' },
    { type: 'kill', container: 'sql' },
  ], 'an ignore-exit-code sidecar: Succeeded first, as markJobPodTerminated sets it');
  t.same(actionsOf(decide(jobPod([imageSidecar()], { logs: 'running' }), virtualNode)), [{ type: 'replaceImage', container: 'logs', image: 'registry.example.com/quick-exit:1.0' }], 'on a virtual node, by the quick-exit image');
  t.equal(sidecarsPendingSince(jobPod(containers, { proxy: 'running', sql: 'running' })), undefined, 'no main container finished: not counted as waiting on its sidecars');
});

t.test('mechanism per node: normal, virtual by label, virtual by taint', async (t) => {
  const both = { ...killSidecar('both'), env: [...killSidecar().env!, ...imageSidecar('x', 'quick-exit:1').env!] };
  const containers = [main(), killSidecar(), imageSidecar(), both];
  const statuses = { main: 0, proxy: 'running', logs: 'running', both: 'running' } as const;
  t.same(actionsOf(decide(jobPod(containers, statuses), normalNode)), [
    { type: 'kill', container: 'proxy' },
    { type: 'replaceImage', container: 'logs', image: 'registry.example.com/quick-exit:1.0' },
    { type: 'kill', container: 'both' },
  ]);
  for (const node of [virtualNode, virtualNodeByTaint]) {
    const actions = actionsOf(decide(jobPod(containers, statuses), node));
    t.same(actions.map((a) => [a.type, 'container' in a ? a.container : '']), [
      ['cannotStop', 'proxy'],
      ['replaceImage', 'logs'],
      ['replaceImage', 'both'],
    ], `virtual node ${node.metadata!.name}`);
    t.match(actions[0], { code: 'virtual-node-without-image' });
  }
  t.same(actionsOf(decide(jobPod(containers, statuses), undefined)).map((a) => a.type), ['kill', 'replaceImage', 'kill'], 'unknown node is treated as normal');
});

t.test('only sidecars still running are stopped; replaced images are waited for', async (t) => {
  const containers = [main(), killSidecar(), imageSidecar()];
  t.same(actionsOf(decide(jobPod(containers, { main: 0, proxy: 143, logs: 'running' }), normalNode)), [
    { type: 'replaceImage', container: 'logs', image: 'registry.example.com/quick-exit:1.0' },
  ]);
  const replaced = jobPod(containers, { main: 0, proxy: 143, logs: 'running' });
  replaced.spec!.containers[2]!.image = 'registry.example.com/quick-exit:1.0';
  t.match(decide(replaced, normalNode), { outcome: 'wait', code: 'sidecars-stopping' }, 'image already replaced');
});

t.test('several main containers: nothing happens before the last one finishes', async (t) => {
  const containers = [main('a'), main('b'), main('c'), killSidecar()];
  t.match(decide(jobPod(containers, { a: 0, b: 'running', c: 'running', proxy: 'running' }), normalNode), { outcome: 'wait' });
  t.match(decide(jobPod(containers, { a: 0, b: 1, c: 'running', proxy: 'running' }), normalNode), { outcome: 'wait' });
  t.same(actionsOf(decide(jobPod(containers, { a: 0, b: 1, c: 0, proxy: 'running' }), normalNode)), [{ type: 'kill', container: 'proxy' }]);
});

t.test('ignore exit code: other sidecars first, then terminal phase, then the sidecar', async (t) => {
  const containers = [main(), killSidecar(), ignoreExitCodeSidecar('sql-proxy')];
  t.same(
    actionsOf(decide(jobPod(containers, { main: 0, proxy: 'running', 'sql-proxy': 'running' }), normalNode)),
    [{ type: 'kill', container: 'proxy' }],
    'the ignore-exit-code sidecar waits while another sidecar runs',
  );
  t.same(actionsOf(decide(jobPod(containers, { main: 0, proxy: 143, 'sql-proxy': 'running' }), normalNode)), [
    { type: 'markTerminal', phase: 'Succeeded' },
    { type: 'kill', container: 'sql-proxy' },
  ]);
  t.same(actionsOf(decide(jobPod(containers, { main: 2, proxy: 143, 'sql-proxy': 'running' }), normalNode)), [
    { type: 'markTerminal', phase: 'Failed' },
    { type: 'kill', container: 'sql-proxy' },
  ], 'Never with a failed main: Failed');
  t.same(
    actionsOf(decide(jobPod([main(), ignoreExitCodeSidecar('sql-proxy')], { main: 0, 'sql-proxy': 'running' }, { spec: { restartPolicy: 'OnFailure' } }), normalNode)),
    [{ type: 'markTerminal', phase: 'Succeeded' }, { type: 'kill', container: 'sql-proxy' }],
    'OnFailure',
  );
  t.same(
    actionsOf(decide(jobPod([main(), ignoreExitCodeSidecar('sql-proxy')], { main: 0, 'sql-proxy': 'running' }, { phase: 'Succeeded' }), normalNode)),
    [{ type: 'kill', container: 'sql-proxy' }],
    'phase already terminal: no second status patch',
  );
  const withImage = [main(), imageSidecar(), ignoreExitCodeSidecar('sql-proxy')];
  const replaced = jobPod(withImage, { main: 0, logs: 'running', 'sql-proxy': 'running' });
  replaced.spec!.containers[1]!.image = 'registry.example.com/quick-exit:1.0';
  t.match(decide(replaced, normalNode), { outcome: 'wait' }, 'waits for a quick-exit image to finish first');
  t.same(
    actionsOf(decide(jobPod([main(), ignoreExitCodeSidecar('sql-proxy')], { main: 0, 'sql-proxy': 'running' }), virtualNode)).map((a) => a.type),
    ['cannotStop'],
    'virtual node: ignore-exit-code does not apply, the sidecar cannot be stopped',
  );
});

t.test('since when the main containers are done, and since when the pod waits on its sidecars', async (t) => {
  const finished = Date.parse('2026-01-01T00:01:00Z');
  const done = jobPod([main(), killSidecar()], { main: 0, proxy: 'running' });
  t.equal(mainsFinishedAt(done), finished, "from the Date of @kubernetes/client-node's pods");
  const fromJson = jobPod([main(), killSidecar()], { main: 0, proxy: 'running' });
  (fromJson.status!.containerStatuses![0]!.state as { terminated: { finishedAt: unknown } }).terminated.finishedAt = '2026-01-01T00:01:00Z';
  t.equal(mainsFinishedAt(fromJson), finished, 'from the RFC 3339 string of the JSON');
  t.equal(mainsFinishedAt(jobPod([main(), main('second'), killSidecar()], { main: 0, second: 'running', proxy: 'running' })), undefined, 'not while a main container runs');
  const noTime = jobPod([main(), killSidecar()], { main: 0, proxy: 'running' });
  delete (noTime.status!.containerStatuses![0]!.state as { terminated: { finishedAt?: unknown } }).terminated.finishedAt;
  t.equal(mainsFinishedAt(noTime), undefined, 'not without a finish time');
  t.equal(mainsFinishedAt(jobPod([killSidecar()], { proxy: 'running' })), undefined, 'not without a main container');
  t.equal(mainsFinishedAt({ metadata: { name: 'no-spec' } }), undefined, 'not without a spec');
  const malformed = jobPod([main(), killSidecar()], { main: 0, proxy: 'running' });
  (malformed.status!.containerStatuses as unknown[]).unshift('not a status');
  t.equal(mainsFinishedAt(malformed), finished, 'a malformed status entry is skipped');

  t.equal(sidecarsPendingSince(done), finished, 'a sidecar to stop: waiting since the mains finished');
  t.equal(sidecarsPendingSince(jobPod([main(), killSidecar()], { main: 'running', proxy: 'running' })), undefined, 'main still at work');
  t.equal(sidecarsPendingSince(jobPod([main(), killSidecar()], { main: 0, proxy: 0 })), undefined, 'nothing left to stop');
});

t.test('in a terminal phase, a sidecar without a state, or without a status, is settled: nothing starts again', async (t) => {
  const stateless = jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }, { phase: 'Succeeded' });
  delete (stateless.status!.containerStatuses![1] as { state?: unknown }).state;
  t.match(decide(stateless, normalNode), { outcome: 'finished' }, 'no state');
  t.match(decide(jobPod([main(), killSidecar()], { main: 0 }, { phase: 'Succeeded' }), normalNode), { outcome: 'finished' }, 'no status');
  t.match(decide(jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }, { phase: 'Succeeded' }), normalNode), { outcome: 'act' }, 'still running: stopped');
});

// Container restart rules (KEP-5307, on by default since Kubernetes 1.35): a container's own
// restartPolicy and restartPolicyRules decide in place of the pod's whether the kubelet restarts
// it (ContainerShouldRestart, k8s.io/kubernetes pkg/api/v1/pod/util.go). Kruise reads only the
// pod's policy; pods without these fields are decided as above.
const restartOn = (...values: number[]) => ({ restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values } }] });

t.test("restart rules: a main the kubelet restarts by its own policy or rule is not done, whatever the pod's policy", async (t) => {
  const byRule = [main('main', 'busybox:1.36', restartOn(42)), killSidecar()];
  t.match(decide(jobPod(byRule, { main: 42, proxy: 'running' }), normalNode), { outcome: 'wait', code: 'main-restarting' }, 'Never pod, rule In [42], exit 42');
  t.same(actionsOf(decide(jobPod(byRule, { main: 1, proxy: 'running' }), normalNode)), [{ type: 'kill', container: 'proxy' }], 'Never pod, rule In [42], exit 1: done');
  const ownOnFailure = [main('main', 'busybox:1.36', { restartPolicy: 'OnFailure' }), killSidecar()];
  t.match(decide(jobPod(ownOnFailure, { main: 1, proxy: 'running' }), normalNode), { outcome: 'wait', code: 'main-restarting' }, 'Never pod, main OnFailure, exit 1');
  t.same(actionsOf(decide(jobPod(ownOnFailure, { main: 0, proxy: 'running' }), normalNode)), [{ type: 'kill', container: 'proxy' }], 'Never pod, main OnFailure, exit 0: done');
  const ownNever = [main('main', 'busybox:1.36', { restartPolicy: 'Never' }), killSidecar()];
  t.same(actionsOf(decide(jobPod(ownNever, { main: 1, proxy: 'running' }, { spec: { restartPolicy: 'OnFailure' } }), normalNode)), [{ type: 'kill', container: 'proxy' }], 'OnFailure pod, main Never, exit 1: done, not restarted');
  const several = [main('a'), main('b', 'busybox:1.36', restartOn(3)), killSidecar()];
  t.match(decide(jobPod(several, { a: 0, b: 3, proxy: 'running' }), normalNode), { outcome: 'wait', code: 'main-restarting' }, 'one main of several is enough');
  t.equal(sidecarsPendingSince(jobPod(byRule, { main: 42, proxy: 'running' })), undefined, 'no wait on the sidecars meanwhile');
});

t.test('restart rules: no terminal phase is set while a main will be restarted', async (t) => {
  const containers = [main('main', 'busybox:1.36', restartOn(42)), ignoreExitCodeSidecar('sql-proxy')];
  t.match(decide(jobPod(containers, { main: 42, 'sql-proxy': 'running' }), normalNode), { outcome: 'wait', code: 'main-restarting' });
  t.same(actionsOf(decide(jobPod(containers, { main: 1, 'sql-proxy': 'running' }), normalNode)), [
    { type: 'markTerminal', phase: 'Failed' },
    { type: 'kill', container: 'sql-proxy' },
  ], 'an exit no rule restarts: the phase from the mains, as before');
});

t.test("restart rules: a sidecar the kubelet restarts by its own policy or rule is not settled", async (t) => {
  const ownOnFailure = [main(), killSidecar('proxy', { restartPolicy: 'OnFailure' })];
  t.match(decide(jobPod(ownOnFailure, { main: 0, proxy: 143 }), normalNode), { outcome: 'wait', code: 'sidecars-restarting' }, 'Never pod, sidecar OnFailure, exit 143: it comes back');
  t.match(decide(jobPod(ownOnFailure, { main: 0, proxy: 0 }), normalNode), { outcome: 'finished' }, 'exit 0: down for good');
  t.match(decide(jobPod([main(), killSidecar('proxy', restartOn(1))], { main: 'running', proxy: 1 }), normalNode), { outcome: 'wait', code: 'mains-running' }, 'a crashed sidecar its rule restarts is not finished');
  const ownNever = [main(), killSidecar('proxy', { restartPolicy: 'Never' })];
  t.match(decide(jobPod(ownNever, { main: 0, proxy: 143 }, { spec: { restartPolicy: 'OnFailure' } }), normalNode), { outcome: 'finished' }, 'OnFailure pod, sidecar Never, exit 143: down for good');
  t.match(decide(jobPod(ownOnFailure, { main: 0, proxy: 143 }, { phase: 'Failed' }), normalNode), { outcome: 'finished' }, 'terminal phase: nothing restarts');
});
