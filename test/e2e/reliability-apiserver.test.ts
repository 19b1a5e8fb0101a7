// No pod left behind when the control plane or the watcher goes away in the middle of a burst,
// on the signal mechanism (no OpenKruise here; the CRR variant of the watcher restart is in
// watcher-crr.test.ts): every Job completes, every kill sidecar gets exactly one ephemeral
// container, every pod exactly one SidecarTerminator event.
import t, { type Test } from 'tap';
import { ENV_WHEN_JOB_EXIT } from '../../src/policy/index.ts';
import { expectStoppedBy } from '../support/endings.ts';
import { simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { apply, startStack, waitForJobsComplete, type Stack } from '../support/stack.ts';
import { jobYaml, signalled } from '../support/pods.ts';

const stack = await startStack(t, { sim: { restartDelayMs: 200 }, serveArgs: ['--kill-mechanism', 'signal'] });
const { cp, core } = stack;

const KILL_SIDECARS = ['proxy', 'sql'];
const containers = `        - name: main
          image: busybox:1.36
${KILL_SIDECARS.map(
  (name) => `        - name: ${name}
          image: envoyproxy/envoy:v1.31.0
          env:
            - name: ${ENV_WHEN_JOB_EXIT}
              value: "true"`,
).join('\n')}`;


/**
 * Applies `count` Jobs whose main containers finish `firstExitS` to `firstExitS`+`spreadS`-1 s
 * after starting, and waits for their labelled pods.
 */
async function burst(namespace: string, count: number, spreadS: number, firstExitS = 5): Promise<void> {
  const manifests = Array.from({ length: count }, (_, i) =>
    jobYaml(`burst-${i}`, { annotations: { [simAnnotations.exitAfter('main')]: `${firstExitS + (i % spreadS)}s` }, containers }),
  ).join('\n---\n');
  await apply(cp, namespace, manifests);
  // Every pod exists before anything goes down (failurePolicy Fail: no pod can be created while the webhook is away).
  await waitFor(`${count} labelled pods`, async () => (await core.listNamespacedPod({ namespace, labelSelector: 'sidecar-terminator.io/managed' })).items.length === count, {
    timeoutMs: 180_000,
    intervalMs: 1000,
  });
}

async function signalledPods(namespace: string): Promise<number> {
  return (await core.listNamespacedPod({ namespace })).items.filter(signalled).length;
}

/** Every pod Succeeded, one ephemeral container per kill sidecar, one SidecarTerminator event; each sidecar stopped by its signal container. */
async function assertNoneLeftOrDuplicated(t: Test, s: Stack, namespace: string, count: number): Promise<void> {
  const pods = (await s.core.listNamespacedPod({ namespace })).items;
  t.equal(pods.length, count, 'one pod per Job');
  t.same(pods.filter((p) => p.status?.phase !== 'Succeeded').map((p) => p.metadata?.name), [], 'every pod succeeded');

  const wrong = pods.flatMap((pod) => {
    const targets = (pod.spec?.ephemeralContainers ?? []).map((c) => `${c.name}->${c.targetContainerName}`).sort();
    const expected = KILL_SIDECARS.map((name) => `stop-${name}->${name}`);
    return JSON.stringify(targets) === JSON.stringify(expected) ? [] : [`${pod.metadata?.name}: ${targets.join(', ') || 'none'}`];
  });
  t.same(wrong, [], 'exactly one ephemeral container per kill sidecar, on every pod');

  const events = (await s.core.listNamespacedEvent({ namespace })).items.filter((e) => e.source?.component === 'sidecar-terminator');
  const terminating = new Map<string, string[]>();
  for (const event of events.filter((e) => e.reason === 'SidecarTerminator')) {
    const name = event.involvedObject.name ?? '';
    terminating.set(name, [...(terminating.get(name) ?? []), `${event.message} (x${event.count ?? 1})`]);
  }
  t.same(
    pods.flatMap((p) => {
      const messages = terminating.get(p.metadata!.name!) ?? [];
      return messages.length === 1 && messages[0]!.endsWith('(x1)') ? [] : [`${p.metadata!.name}: ${messages.join(' | ') || 'none'}`];
    }),
    [],
    'exactly one SidecarTerminator event per pod',
  );
  t.same(events.filter((e) => e.type === 'Warning').map((e) => `${e.involvedObject.name}: ${e.message}`), [], 'no SidecarTerminationFailed event');
  for (const pod of pods) await expectStoppedBy(t, s, pod, { proxy: 'signal', sql: 'signal' });
}

t.test('the API server restarted (etcd kept) while 200 Jobs are finishing', async (t) => {
  const namespace = await cp.createNamespace();
  const count = 200;
  // Finishing from 20 s to 60 s after starting: creating 200 pods takes a while on a busy
  // machine, and the burst must go on well after the API server is back.
  await burst(namespace, count, 40, 20);
  await waitFor('the first pods of the burst to be signalled', async () => (await signalledPods(namespace)) >= 10, { timeoutMs: 120_000, intervalMs: 250 });

  const logLinesBefore = stack.serve.logs().length;
  const handledBefore = await signalledPods(namespace);
  await cp.stopApiServer();
  // The old API server is gone: whatever the watcher stops from now on, it stops through the new
  // one, which answers requests before its /readyz does (the watcher may be done by then).
  const restartedAt = Date.now();
  await cp.startApiServer();
  const pendingAtRestart = count - (await signalledPods(namespace));
  t.comment(`API server back; ${handledBefore} of ${count} pods had been signalled before it went down, ${pendingAtRestart} still to signal`);

  await waitForJobsComplete(t, stack, namespace, count, async () => `${await signalledPods(namespace)} pods signalled`);
  t.ok(handledBefore < count, `the restart happened mid-burst (${handledBefore} of ${count} pods signalled before it)`);
  await assertNoneLeftOrDuplicated(t, stack, namespace, count);

  t.ok(stack.serve.running(), 'serve kept running through the restart');
  const after = stack.serve.logs().slice(logLinesBefore);
  const watchFailures = after.filter((line) => line.msg === 'pod watch failed, retrying');
  t.ok(watchFailures.length > 0, `the watch noticed the API server going away (${watchFailures.length} retries logged)`);
  t.comment(`watch errors logged: ${[...new Set(watchFailures.map((line) => (line.err as { message?: string } | undefined)?.message))].join(' | ')}`);
  // The watch resumes from its resourceVersion when the new API server still has it in its
  // watch cache, else it answers 410 Gone and the reflector lists again (logged). Which one
  // happens depends on the writes around the restart; both must end with every Job complete.
  const relists = after.filter((line) => line.msg === 'managed pods listed').length;
  t.comment(relists > 0 ? `the watcher listed the managed pods again ${relists} time(s) (410 Gone)` : 'the watch resumed from its resourceVersion');
  t.ok(stack.serve.logs().some((line) => line.msg === 'managed pods listed' && typeof line.pods === 'number'), 'serve logs when it has listed the managed pods, with their number');
  // The old API server serves on while it shuts down, so the watcher may have finished the burst
  // through it; pods still unsignalled once the new one answered must have been acted on after.
  const actedAfter = after.filter((line) => line.msg === 'stopping sidecars' && Number(line.time) > restartedAt);
  if (pendingAtRestart > 0) t.ok(actedAfter.length >= pendingAtRestart, `the watcher kept acting after the restart (${actedAfter.length} pods, ${pendingAtRestart} pending)`);
  else t.comment('every pod had been signalled through the old API server before the new one answered; nothing left to act on after it');
});

t.test('the watcher killed (SIGKILL) mid-burst and started again', async (t) => {
  const namespace = await cp.createNamespace();
  const count = 100;
  // Finishing from 20 s to 50 s after starting, so that most of the burst is still to come at the kill.
  await burst(namespace, count, 30, 20);
  await waitFor('the first pods of the burst to be signalled', async () => (await signalledPods(namespace)) >= 10, { timeoutMs: 120_000, intervalMs: 500 });

  const killed = stack.serve;
  process.kill(killed.pid, 'SIGKILL');
  await killed.exited;
  const handledBefore = await signalledPods(namespace);
  await stack.restartServe();

  await waitForJobsComplete(t, stack, namespace, count, async () => `${await signalledPods(namespace)} pods signalled`);
  t.ok(handledBefore < count, `the kill happened mid-burst (${handledBefore} of ${count} pods signalled before it)`);
  await assertNoneLeftOrDuplicated(t, stack, namespace, count);
});
