// test/support/endings.ts reads how each sidecar ended from the objects alone: each path from the
// record it leaves, so that a test asserting one cannot pass on another.
import type { CoreV1Event, V1Container, V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { SERVE_FLAGS } from '../../src/config.ts';
import { CONDITION_REASONS, CRR, ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, EVENT_REASONS, MIGRATED_ANNOTATION, TERMINATED_CONDITION, crrName } from '../../src/policy/index.ts';
import { podEnding, type EndingClients } from '../support/endings.ts';
import { apiError, fakeBatchV1Api, fakeCoreV1Api, fakeCustomObjectsApi } from '../support/fake-kube.ts';

const marked = (name: string, extra: Partial<V1Container> = {}): V1Container => ({ name, image: 'proxy:1', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }], ...extra });
const event = (reason: string, action: string, message: string): CoreV1Event => ({ reason, action, message, source: { component: 'sidecar-terminator' }, involvedObject: {}, metadata: {} });

function pod(containers: V1Container[], extra: { spec?: Partial<V1Pod['spec']>; status?: V1Pod['status']; annotations?: Record<string, string>; owner?: string } = {}): V1Pod {
  return {
    metadata: {
      name: 'p',
      namespace: 'ns',
      uid: 'u1',
      ...(extra.annotations ? { annotations: extra.annotations } : {}),
      ...(extra.owner ? { ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: extra.owner, uid: 'j', controller: true }] } : {}),
    },
    spec: { containers: [{ name: 'main', image: 'busybox' }, ...containers], ...extra.spec },
    status: { phase: 'Succeeded', ...extra.status },
  };
}

function clients(events: CoreV1Event[] = [], options: { template?: V1Container[]; crr?: unknown } = {}): EndingClients {
  const core = fakeCoreV1Api().handle('listNamespacedEvent', () => ({ items: events }));
  const batch = fakeBatchV1Api().handle('readNamespacedJob', () => ({ spec: { template: { spec: { containers: options.template ?? [] } } } }));
  const custom = fakeCustomObjectsApi().handle('getNamespacedCustomObject', (request) => {
    if (options.crr && request.version === 'v1beta1' && request.plural === CRR.plural && request.name === crrName('u1')) return options.crr;
    throw apiError(404, 'not found');
  });
  return { core: core.api, batch: batch.api, custom: custom.api };
}

const steps = async (p: V1Pod, c = clients()) => Object.fromEntries((await podEnding(c, p)).sidecars.map((s) => [s.container, s.steps]));
const stopped = event(EVENT_REASONS.stopping, 'stop-requested', 'stopping sidecars: proxy');

t.test('a signal container: signal; one that sent the shutdown request: http, unless it fell back to SIGTERM', async (t) => {
  const signal = (args: string[], message: string) =>
    pod([marked('proxy')], {
      spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'stop-sidecar', targetContainerName: 'proxy', args }] },
      status: { ephemeralContainerStatuses: [{ name: 'stop-proxy', image: 'stop-sidecar', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0, message } } }] },
    });
  t.same(await steps(signal(['--grace-period=30'], 'sending SIGTERM to PID 1 (proxy)')), { proxy: ['signal'] });
  t.same(await steps(signal(['--grace-period=30', '--url=http://localhost:15000/quitquitquit'], 'POST http://localhost:15000/quitquitquit answered 200 OK')), { proxy: ['http'] });
  t.same(await steps(signal(['--url=http://localhost:15000/quitquitquit'], 'POST ... answered 404 Not Found: sending SIGTERM instead')), { proxy: ['signal'] });
  const ending = await podEnding(clients([stopped]), signal(['--grace-period=30'], 'sending SIGTERM to PID 1 (proxy)'));
  t.match(ending, { stopRequested: true, warnings: [], sidecars: [{ signal: { name: 'stop-proxy', ran: true, exitCode: 0, message: 'sending SIGTERM to PID 1 (proxy)' } }] });
  const neverRan = pod([marked('proxy')], {
    spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'stop-sidecar', targetContainerName: 'proxy' }] },
    status: { ephemeralContainerStatuses: [{ name: 'stop-proxy', image: 'stop-sidecar', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ErrImagePull' } } }] },
  });
  t.same(await steps(neverRan), { proxy: [] }, 'a signal container that never ran stopped nothing');
  t.match((await podEnding(clients(), neverRan)).sidecars[0]?.signal, { ran: false, exitCode: undefined });
});

t.test("the pod's ContainerRecreateRequest: crr, with kruise-daemon's state of the sidecar", async (t) => {
  const crr = { spec: { containers: [{ name: 'proxy' }] }, status: { containerRecreateStates: [{ name: 'proxy', phase: 'Succeeded' }] } };
  const ending = await podEnding(clients([], { crr }), pod([marked('proxy'), marked('other')]));
  t.same(ending.sidecars.map((s) => [s.container, s.steps, s.crr]), [['proxy', ['crr'], { phase: 'Succeeded', message: undefined }], ['other', [], undefined]]);
});

t.test("an image unlike the Job template's, or a quick-exit image on a pod no Job owns, once the kubelet ran it: image", async (t) => {
  const ran = (container: V1Container, reported = container.image!) =>
    pod([container], { owner: 'job', status: { containerStatuses: [{ name: container.name, image: reported, imageID: '', ready: false, restartCount: 1, state: { terminated: { exitCode: 0, startedAt: new Date(1) } } }] } });
  const replaced = ran(marked('proxy', { image: 'quick-exit:1' }));
  t.same(await steps(replaced, clients([], { template: [marked('proxy')] })), { proxy: ['image'] });
  t.same(await steps(replaced, clients([], { template: [marked('proxy', { image: 'quick-exit:1' })] })), { proxy: [] }, "the template's own image is no replacement");
  const condition = { type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping, message: 'phase set to Succeeded: the main containers are done' };
  const notRun = ran(marked('proxy', { image: 'quick-exit:1' }), 'proxy:1');
  t.same(await steps(notRun, clients([], { template: [marked('proxy')] })), { proxy: ['image'] }, 'replaced: the kubelet killed the sidecar for it, whether or not it ran the new image');
  const phased = { ...notRun, status: { ...notRun.status, conditions: [condition] } };
  t.same(await steps(phased, clients([], { template: [marked('proxy')] })), { proxy: ['phase'] }, 'written, but the phase set before it ran: the phase');
  t.same(await steps({ ...phased, status: { ...phased.status, containerStatuses: replaced.status!.containerStatuses! } }, clients([], { template: [marked('proxy')] })), { proxy: ['image', 'phase'] }, 'ran, then the phase set');
  const pulling = [{ name: 'proxy', image: 'quick-exit:1', imageID: '', ready: false, restartCount: 1, state: { waiting: { reason: 'ErrImagePull' } } }];
  t.same(await steps({ ...phased, status: { ...phased.status, containerStatuses: pulling } }, clients([], { template: [marked('proxy')] })), { proxy: ['phase'] }, 'waiting to pull it, then the phase set: the phase');
  t.same(await steps(ran(marked('proxy', { image: 'busybox:9' }), 'docker.io/library/busybox:9'), clients([], { template: [marked('proxy')] })), { proxy: ['image'] }, 'the kubelet names docker.io images in full');
  const bare = (container: V1Container) => ({ ...ran(container), metadata: { ...ran(container).metadata, ownerReferences: [] } });
  t.same(await steps(bare(marked('proxy', { image: SERVE_FLAGS.quickExitImage.default }))), { proxy: ['image'] }, "no Job: serve's quick-exit image");
  t.same(await steps(bare(marked('logs', { image: 'qe:2', env: [{ name: ENV_WITH_IMAGE, value: 'qe:2' }] }))), { logs: ['image'] }, 'no Job: its own quick-exit image');
  t.same(await steps(bare(marked('proxy'))), { proxy: [] }, 'no Job, its own image: nothing');
});

t.test('the phase set by the add-on: phase, after how each sidecar was told; a migrated native sidecar: native', async (t) => {
  const condition = { type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping, message: 'phase set to Succeeded: the main containers are done, sidecar exit codes are ignored' };
  const phased = pod([marked('sql')], {
    spec: { ephemeralContainers: [{ name: 'stop-sql', image: 'stop-sidecar', targetContainerName: 'sql' }] },
    status: { conditions: [condition] },
  });
  t.same(await steps(phased), { sql: ['phase'] }, 'the signal container added after the phase never ran');
  const signalRan = { name: 'stop-sql', image: 'stop-sidecar', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0 } } };
  t.same(await steps({ ...phased, status: { ...phased.status, ephemeralContainerStatuses: [signalRan] } }), { sql: ['signal', 'phase'] });
  const waiting = pod([marked('sql')], { status: { conditions: [{ ...condition, message: 'stopping sidecars: sql' }] } });
  t.same(await steps(waiting), { sql: [] }, 'the condition alone, without the phase: nothing');
  const native = pod([], { spec: { initContainers: [{ name: 'proxy', image: 'p', restartPolicy: 'Always' }, { name: 'setup', image: 's' }] }, annotations: { [MIGRATED_ANNOTATION]: 'proxy' } });
  t.same(await steps(native), { proxy: ['native'] });
});

t.test("the add-on's warnings, by code", async (t) => {
  const warning = event(EVENT_REASONS.failed, 'signal-ignored', 'sidecar proxy still runs 5s after SIGTERM');
  const other = { ...event(EVENT_REASONS.failed, 'x', 'y'), source: { component: 'someone-else' } };
  const ending = await podEnding(clients([stopped, warning, other]), pod([marked('proxy')]));
  t.same(ending.warnings, [{ code: 'signal-ignored', message: 'sidecar proxy still runs 5s after SIGTERM' }], "only the add-on's");
});
