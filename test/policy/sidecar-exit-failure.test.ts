// A pod whose main containers succeeded, failed by a stopped sidecar's exit code: when it is one,
// which rule of its Job's podFailurePolicy judged it, and what the event says.
import t from 'tap';
import { ENV_IGNORE_EXIT_CODE, POD_ANNOTATIONS, sidecarExitFailure } from '../../src/policy/index.ts';
import { FINISHED, containerStatus, ignoreExitCodeSidecar, imageSidecar, jobPod, killSidecar, main } from '../support/pods.ts';

const failed = (states: Record<string, number | 'running'>, containers = [main(), killSidecar('proxy')]) => jobPod(containers, states, { phase: 'Failed' });
const failJobOnAnyCode = { podFailurePolicy: { rules: [{ action: 'FailJob', onExitCodes: { operator: 'NotIn', values: [0] } }] } };

t.test('only a sidecar whose exit code counts, under restartPolicy Never', async (t) => {
  t.same(sidecarExitFailure(failed({ main: 0, proxy: 137 }))?.sidecars, [{ name: 'proxy', exitCode: 137 }], 'a sidecar stopped by the kill mechanism');
  t.same(sidecarExitFailure(failed({ main: 0, logs: 143 }, [main(), imageSidecar('logs')]))?.sidecars, [{ name: 'logs', exitCode: 143 }], 'one stopped by its quick-exit image');
  t.equal(sidecarExitFailure(failed({ main: 0, sql: 143 }, [main(), ignoreExitCodeSidecar('sql')])), undefined, 'its exit code ignored: the phase is set from the main containers');
  t.equal(sidecarExitFailure(jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 143 }, { phase: 'Failed', spec: { restartPolicy: 'OnFailure' } })), undefined, 'OnFailure: the kubelet restarts a sidecar that exits non-zero, it does not fail the pod');
  t.equal(sidecarExitFailure(failed({ main: 0 }, [main()])), undefined, 'no sidecar');
});

t.test('a sidecar that exited 143 after the main succeeded failed the pod; without a rule the Job counts it', async (t) => {
  const failure = sidecarExitFailure(failed({ main: 0, proxy: 143 }), {});
  t.same(failure?.sidecars, [{ name: 'proxy', exitCode: 143 }]);
  t.equal(failure?.rule, undefined);
  t.equal(
    failure?.message,
    `the pod failed although its main containers succeeded: sidecar proxy exited 143 after it was stopped (143 when SIGTERM ends a program without a handler for it, 137 when it is killed); no rule of the Job's podFailurePolicy matched it, so the pod counts as failed toward the Job's backoffLimit, and is replaced; set ${ENV_IGNORE_EXIT_CODE}="true" on proxy (the watcher then sets the pod's phase from its main containers before stopping it) or make it exit 0 on SIGTERM`,
  );
  t.match(sidecarExitFailure(failed({ main: 0, proxy: 143 }))?.message, /; a Job then counts the pod as failed, unless a rule of its podFailurePolicy judges that exit code; /, 'the Job unread: what a Job does, without a claim about its rules');
});

t.test('the rule that judged it: the first whose onExitCodes match, as the Job controller reads them', async (t) => {
  const failure = sidecarExitFailure(failed({ main: 0, proxy: 137 }), failJobOnAnyCode);
  t.same(failure?.rule, { index: 0, action: 'FailJob' });
  t.match(failure?.message, /; the Job's podFailurePolicy\.rules\[0\] \(FailJob\) matched that exit code, so the pod fails the whole Job, with no retry; .* or make it exit 0 on SIGTERM, and set onExitCodes\.containerName to the main container so that the rule judges it alone$/);
  const mainOnly = { podFailurePolicy: { rules: [{ action: 'FailJob', onExitCodes: { containerName: 'main', operator: 'In', values: [1] } }, { action: 'Ignore', onExitCodes: { operator: 'In', values: [143] } }] } };
  t.same(sidecarExitFailure(failed({ main: 0, proxy: 143 }), mainOnly)?.rule, { index: 1, action: 'Ignore' }, "a rule naming the main container judges it alone; the next one matched the sidecar's code");
  const count = { podFailurePolicy: { rules: [{ action: 'Count', onExitCodes: { operator: 'In', values: [143] } }] } };
  t.notMatch(sidecarExitFailure(failed({ main: 0, proxy: 143 }), count)?.message, /containerName/, 'Count does what no rule does: no containerName to suggest');
});

t.test('two sidecars: each is named, and the lowest rule that matches either judged the pod', async (t) => {
  const pod = failed({ main: 0, proxy: 143, logs: 137 }, [main(), killSidecar('proxy'), killSidecar('logs')]);
  const policy = { podFailurePolicy: { rules: [{ action: 'Count', onExitCodes: { containerName: 'logs', operator: 'In', values: [7] } }, { action: 'FailIndex', onExitCodes: { containerName: 'logs', operator: 'In', values: [137] } }, { action: 'FailJob', onExitCodes: { operator: 'In', values: [143] } }] } };
  const failure = sidecarExitFailure(pod, policy);
  t.same(failure?.rule, { index: 1, action: 'FailIndex' });
  t.match(failure?.message, /sidecar proxy exited 143, sidecar logs exited 137 after they were stopped .* on proxy, logs \(the watcher then sets the pod's phase from its main containers before stopping them\) or make them exit 0/);
  const many = ['a', 'b', 'c', 'd', 'e'];
  const crowded = failed({ main: 0, ...Object.fromEntries(many.map((name) => [name, 143])) }, [main(), ...many.map((name) => killSidecar(name))]);
  t.match(sidecarExitFailure(crowded)?.message, /sidecar c exited 143, and 2 more sidecars exited non-zero after they were stopped .* on a, b, c and the 2 others/, 'at most three named');
});

t.test('no such failure: any other end (and one named by annotation is such a sidecar)', async (t) => {
  t.equal(sidecarExitFailure(jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 143 }, { phase: 'Succeeded' })), undefined, 'the pod succeeded');
  t.equal(sidecarExitFailure(failed({ main: 1, proxy: 143 })), undefined, 'the main container failed: the pod failed by its work');
  t.equal(sidecarExitFailure(failed({ main: 0, proxy: 0 })), undefined, 'no sidecar exited non-zero');
  t.equal(sidecarExitFailure(failed({ main: 0, proxy: 'running' })), undefined, 'the sidecar has not exited (the kubelet kills it once the pod is terminal)');
  t.equal(sidecarExitFailure(failed({ main: 0, proxy: 143 }, [main(), ignoreExitCodeSidecar('proxy')])), undefined, 'its exit code is ignored');
  t.equal(sidecarExitFailure(failed({ proxy: 143 }, [killSidecar('proxy')])), undefined, 'no main container');
  t.equal(sidecarExitFailure(failed({ main: 'running', proxy: 143 })), undefined, 'the main container never finished');
  const crashed = failed({ main: 0 });
  crashed.status!.containerStatuses!.push(containerStatus('proxy', 1, { state: { terminated: { exitCode: 1, finishedAt: new Date('2026-01-01T00:00:30Z') } } }));
  t.equal(sidecarExitFailure(crashed), undefined, 'the sidecar crashed while the work ran: its own failure, not the stop');
  const deleted = failed({ main: 0, proxy: 143 });
  deleted.metadata!.deletionTimestamp = new Date(FINISHED);
  t.equal(sidecarExitFailure(deleted), undefined, 'deleted: the deletion ended it');
  const evicted = failed({ main: 0, proxy: 143 });
  evicted.status!.conditions = [{ type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI' }];
  t.equal(sidecarExitFailure(evicted), undefined, 'disrupted: an eviction ended it, and a rule onPodConditions may judge that first');
  evicted.status!.conditions = [{ type: 'DisruptionTarget', status: 'False' }, 'junk' as never];
  t.ok(sidecarExitFailure(evicted), 'a DisruptionTarget condition that is not True changes nothing');
  const onFailure = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 143 }, { phase: 'Failed', spec: { restartPolicy: 'OnFailure' } });
  t.equal(sidecarExitFailure(onFailure), undefined, 'OnFailure: not this failure');
  const annotated = jobPod([main(), main('proxy')], { main: 0, proxy: 143 }, { phase: 'Failed', metadata: { annotations: { [POD_ANNOTATIONS.sidecars]: 'proxy' } } });
  t.same(sidecarExitFailure(annotated)?.sidecars, [{ name: 'proxy', exitCode: 143 }], 'a sidecar named by the annotation counts as one marked by its env');
});

t.test('read defensively: a pod without a spec, statuses without names or times', async (t) => {
  t.equal(sidecarExitFailure({ metadata: {}, status: { phase: 'Failed' } }), undefined);
  const odd = failed({ main: 0, proxy: 143 });
  odd.status!.containerStatuses!.push('junk' as never, { state: {} } as never);
  for (const status of odd.status!.containerStatuses!) if (status?.state?.terminated) delete status.state.terminated.finishedAt;
  t.same(sidecarExitFailure(odd)?.sidecars, [{ name: 'proxy', exitCode: 143 }], 'no finish times: the sidecar is taken as stopped after the mains');
});
