// The stop record: how each main container and each sidecar of a stopped pod ended, from the pod
// as the API server holds it once it has ended and the sidecars a ContainerRecreateRequest named.
import t from 'tap';
import type { V1Pod } from '@kubernetes/client-node';
import { CONDITION_REASONS, PHASE_SET, TERMINATED_CONDITION, describeStopRecord, readStopRecord, recordCondition, stopRecord } from '../../src/policy/index.ts';
import { QUICK_EXIT, containerStatus, imageSidecar, jobPod, killSidecar, main } from '../support/pods.ts';

const none = { crr: new Set<string>(), quickExitImages: [] };
const later = (seconds: number) => new Date(Date.parse('2026-01-01T00:01:00Z') + seconds * 1000);

/** A pod whose sidecar `proxy` exited `seconds` after the main container, with a signal container in `signal` state. */
function signalled(sidecar = killSidecar('proxy'), signal?: { exitCode: number; message?: string } | 'running', seconds = 2): V1Pod {
  const pod = jobPod([main(), sidecar], { main: 0, proxy: 0 }, { phase: 'Succeeded', spec: { ephemeralContainers: signal ? [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] : [] } });
  pod.status!.containerStatuses![1]!.state!.terminated!.finishedAt = later(seconds);
  pod.status!.containerStatuses![0]!.state!.terminated!.reason = 'Completed';
  if (signal === 'running') pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', 'running')];
  else if (signal) pod.status!.ephemeralContainerStatuses = [{ ...containerStatus('stop-proxy', signal.exitCode), state: { terminated: { exitCode: signal.exitCode, ...(signal.message ? { message: signal.message } : {}) } } }];
  return pod;
}

t.test('a sidecar stopped by its signal container: SIGTERM, or its shutdown request', async (t) => {
  t.same(stopRecord(signalled(killSidecar('proxy'), { exitCode: 0 }), none), {
    phase: 'Succeeded',
    mains: [{ name: 'main', exitCode: 0, reason: 'Completed' }],
    sidecars: [{ name: 'proxy', exitCode: 0, stoppedBy: ['signal'], secondsAfterMains: 2 }],
  });
  const http = killSidecar('proxy', { env: [{ name: 'SIDECAR_TERMINATOR_STOP', value: 'envoy:15000' }] });
  t.same(stopRecord(signalled(http, { exitCode: 0 }), none).sidecars[0]?.stoppedBy, ['http']);
  t.same(stopRecord(signalled(http, 'running'), none).sidecars[0]?.stoppedBy, ['http'], 'its signal container still running');
  t.same(stopRecord(signalled(http, { exitCode: 0, message: 'POST http://localhost:15000/quitquitquit answered 404 Not Found: sending SIGTERM instead' }), none).sidecars[0]?.stoppedBy, ['signal'], 'the request failed: SIGTERM instead');
  const waiting = signalled(killSidecar('proxy'), { exitCode: 0 });
  waiting.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', { waiting: 'ErrImagePull' })];
  t.same(stopRecord(waiting, none).sidecars[0]?.stoppedBy, [], 'a signal container that never ran stopped nothing');
  delete waiting.status!.ephemeralContainerStatuses;
  t.same(stopRecord(waiting, none).sidecars[0]?.stoppedBy, [], 'nor one without a status');
});

t.test('a sidecar named in the ContainerRecreateRequest; one that exited by itself', async (t) => {
  t.same(stopRecord(signalled(), { ...none, crr: new Set(['proxy']) }).sidecars, [{ name: 'proxy', exitCode: 0, stoppedBy: ['crr'], secondsAfterMains: 2 }]);
  t.same(stopRecord(signalled(killSidecar('proxy'), undefined, -30), none).sidecars, [{ name: 'proxy', exitCode: 0, stoppedBy: [], secondsAfterMains: -30 }], 'before the main containers: by itself');
});

t.test('ended from outside: its image replaced and run, or the phase set', async (t) => {
  const pod = jobPod([main(), imageSidecar('logs', QUICK_EXIT, { image: QUICK_EXIT })], { main: 0, logs: 0 }, { phase: 'Succeeded' });
  pod.status!.containerStatuses![1] = { ...containerStatus('logs', 0), image: `docker.io/${QUICK_EXIT}` };
  pod.status!.containerStatuses![1].state!.terminated!.startedAt = later(1);
  t.same(stopRecord(pod, none).sidecars[0]?.stoppedBy, ['image'], 'its own quick-exit image');
  const serveImage = jobPod([main(), killSidecar('proxy', { image: 'library/quick-exit:1' })], { main: 0, proxy: 0 }, { phase: 'Failed' });
  serveImage.status!.containerStatuses![1] = { ...containerStatus('proxy', 0), image: 'docker.io/library/quick-exit:1' };
  serveImage.status!.containerStatuses![1].state!.terminated!.startedAt = later(3);
  t.same(stopRecord(serveImage, { ...none, quickExitImages: ['library/quick-exit:1'] }).sidecars[0]?.stoppedBy, ['image'], "serve's --quick-exit-image");
  serveImage.status!.conditions = [{ type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping, message: `${PHASE_SET}Failed: the main containers are done` }];
  serveImage.status!.containerStatuses![1].image = 'envoyproxy/envoy:v1.31.0';
  const phased = stopRecord(serveImage, { ...none, quickExitImages: ['library/quick-exit:1'] });
  t.same(phased.sidecars[0]?.stoppedBy, ['phase'], 'the image written with the phase, never run: the phase alone');
  t.equal(phased.note, `${PHASE_SET}Failed: the main containers are done`, "the condition's words it replaces, kept");
  const running = jobPod([main(), killSidecar('proxy', { image: 'library/quick-exit:1' })], { main: 1, proxy: 'running' }, { phase: 'Failed' });
  running.status!.containerStatuses![1]!.image = 'library/quick-exit:1';
  const record = stopRecord(running, { ...none, quickExitImages: ['library/quick-exit:1'] });
  t.same(record.sidecars, [{ name: 'proxy', stoppedBy: ['image'] }], 'running the quick-exit image: no exit yet');
  t.same(record.mains, [{ name: 'main', exitCode: 1 }]);
  const unrun = jobPod([main(), killSidecar('proxy', { image: 'library/quick-exit:1' })], { main: 0, proxy: { waiting: 'ErrImagePull' } });
  t.same(stopRecord(unrun, { ...none, quickExitImages: ['library/quick-exit:1'] }).sidecars[0]?.stoppedBy, [], 'waiting to pull it: never ran');
  delete unrun.status!.containerStatuses![1]!.state;
  unrun.status!.containerStatuses![1]!.image = 'library/quick-exit:1';
  t.same(stopRecord(unrun, { ...none, quickExitImages: ['library/quick-exit:1'] }).sidecars[0]?.stoppedBy, [], 'no state');
});

t.test('a pod with no status or spec yet', async (t) => {
  t.same(stopRecord({ metadata: { name: 'p' } }, none), { mains: [], sidecars: [] });
  const noStatus = jobPod([main(), killSidecar('proxy', { image: undefined })], {});
  delete noStatus.status;
  t.same(stopRecord(noStatus, none), { mains: [{ name: 'main' }], sidecars: [{ name: 'proxy', stoppedBy: [] }] });
});

t.test('the record travels as JSON in the SidecarTerminated condition, and is read back', async (t) => {
  const record = stopRecord(signalled(killSidecar('proxy'), { exitCode: 0 }), none);
  const condition = recordCondition(record);
  t.match(condition, { status: 'True', reason: CONDITION_REASONS.stopping });
  const pod = jobPod([main()], {});
  pod.status!.conditions = [{ type: TERMINATED_CONDITION, ...condition }];
  t.same(readStopRecord(pod), record);
  pod.status!.conditions[0]!.message = `${PHASE_SET}Succeeded: the main containers are done`;
  t.equal(readStopRecord(pod), undefined, 'a condition of another kind');
  pod.status!.conditions[0]!.message = '{"mains":';
  t.equal(readStopRecord(pod), undefined, 'not JSON');
  pod.status!.conditions[0]!.message = '{"mains":[]}';
  t.equal(readStopRecord(pod), undefined, 'JSON of another shape');
  const malformed: Array<[string, string]> = [
    ['{"mains":[null],"sidecars":[]}', 'a main that is no object'],
    ['{"mains":[{"exitCode":0}],"sidecars":[]}', 'a main without a name'],
    ['{"mains":[],"sidecars":[{"name":"proxy"}]}', 'a sidecar without its ways'],
    ['{"mains":[],"sidecars":[{"name":"proxy","stoppedBy":["magic"]}]}', 'a way the record does not have'],
  ];
  for (const [message, what] of malformed) {
    pod.status!.conditions[0]!.message = message;
    t.equal(readStopRecord(pod), undefined, what);
  }
  pod.status!.conditions[0]!.message = '{"mains":[{"name":"main"}],"sidecars":[{"name":"proxy","stoppedBy":["crr","phase"]}]}';
  t.same(readStopRecord(pod), { mains: [{ name: 'main' }], sidecars: [{ name: 'proxy', stoppedBy: ['crr', 'phase'] }] });
  delete pod.status!.conditions;
  t.equal(readStopRecord(pod), undefined, 'no condition');
});

t.test('the record in words', async (t) => {
  t.equal(
    describeStopRecord({
      phase: 'Failed',
      mains: [{ name: 'main', exitCode: 0, reason: 'Completed' }, { name: 'other', exitCode: 137, reason: 'OOMKilled' }, { name: 'late' }],
      sidecars: [
        { name: 'proxy', stoppedBy: ['crr'], exitCode: 0, secondsAfterMains: 2 },
        { name: 'logs', stoppedBy: ['signal', 'image'], exitCode: 0 },
        { name: 'early', stoppedBy: [], exitCode: 1, reason: 'Error', secondsAfterMains: -5 },
        { name: 'stuck', stoppedBy: ['phase'], secondsAfterMains: 3 },
      ],
    }),
    'main exited 0; other exited 137 (OOMKilled); late has not exited; proxy stopped by crr, exited 0 2s after the main containers; logs stopped by signal, then image, exited 0; early not stopped by the watcher, exited 1 (Error) 5s before the main containers; stuck stopped by phase, has not exited',
  );
  t.equal(describeStopRecord({ mains: [{ name: 'main', exitCode: 0 }], sidecars: [], note: 'phase set to Succeeded: the main containers are done' }), 'main exited 0; phase set to Succeeded: the main containers are done');
});
