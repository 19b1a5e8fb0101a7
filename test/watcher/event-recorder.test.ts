// EventRecorder (src/watcher/event-recorder.ts): one event per pod and key, named from the pod's
// uid and the key so that a restarted watcher finds its own, against a fake CoreV1Api.
import t from 'tap';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { EventRecorder, type EventOnPod } from '../../src/watcher/event-recorder.ts';
import { apiError, fakeCoreV1Api } from '../support/fake-kube.ts';
import { jobPod, killSidecar, main } from '../support/pods.ts';

const pod = (uid = 'uid-1', name = 'job-abc'): V1Pod => jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }, { metadata: { name, uid, namespace: 'batch' } });
const stopping: EventOnPod = { type: 'Normal', reason: 'SidecarTerminator', code: 'mains-done', message: 'stopping sidecars: proxy (SIGTERM)' };

/** A recorder whose API creates every event, and the bodies it was sent. */
function recorder() {
  const core = fakeCoreV1Api().handle('createNamespacedEvent', ({ body }) => body);
  const bodies = () => core.requests('createNamespacedEvent').map(({ body }) => body);
  return { core, events: new EventRecorder(core.api), bodies, names: () => bodies().map((body) => body.metadata.name!) };
}

t.test('an event is created on the pod, in its namespace, with its code as the action', async (t) => {
  const { core, events, bodies } = recorder();
  const sent = new Set<string>();
  t.equal(await events.record(pod(), stopping, sent), true, 'created by this call');
  t.same(core.requests('createNamespacedEvent').map((request) => request.namespace), ['batch']);
  const [body] = bodies() as [CoreV1Event];
  t.match(body, { type: 'Normal', reason: 'SidecarTerminator', message: stopping.message, action: 'mains-done', involvedObject: { kind: 'Pod', apiVersion: 'v1', namespace: 'batch', name: 'job-abc', uid: 'uid-1' } });
  t.notOk('related' in body, 'nothing related unless given');
  t.match(body.metadata.name, /^job-abc\.[0-9a-f]{16}$/, "the pod's name and an id");
  t.equal(sent.size, 1, 'its id is kept in the set given');
});

t.test('the object an event is also about goes with it', async (t) => {
  const { events, bodies } = recorder();
  const related = { kind: 'ContainerRecreateRequest', apiVersion: 'apps.kruise.io/v1alpha1', namespace: 'batch', name: 'sidecar-termination-uid-1' };
  await events.record(pod(), { ...stopping, related }, new Set());
  t.same(bodies()[0]?.related, related);
});

t.test('once per pod and key: the same event again makes no request', async (t) => {
  const { core, events } = recorder();
  const sent = new Set<string>();
  await events.record(pod(), stopping, sent);
  t.equal(await events.record(pod(), stopping, sent), false);
  t.equal(core.calls.length, 1);
  t.equal(await events.record(pod(), { ...stopping, message: 'stopping sidecars: sql (SIGTERM)' }, sent), true, 'without a key, another message is another event');
  t.equal(await events.record(pod(), { ...stopping, reason: 'SidecarTerminationFailed' }, sent), true, 'so is another reason');
  t.equal(core.calls.length, 3);
});

t.test('with a key, the first message stays: words that change under the same key make no new event', async (t) => {
  const { core, events, bodies } = recorder();
  const sent = new Set<string>();
  const pull = (message: string): EventOnPod => ({ type: 'Warning', reason: 'SidecarTerminationFailed', code: 'quick-exit-image-not-pulled', message, key: 'image-not-pulled/logs' });
  await events.record(pod(), pull('ErrImagePull'), sent);
  t.equal(await events.record(pod(), pull('ImagePullBackOff'), sent), false);
  t.same(bodies().map((body) => body.message), ['ErrImagePull']);
  t.equal(await events.record(pod(), { ...pull('ErrImagePull'), key: 'image-not-pulled/other' }, sent), true, 'another key: another event');
  t.equal(core.calls.length, 2);
});

t.test('the name comes from the uid and the key: the same for a restarted watcher, another for another pod', async (t) => {
  const first = recorder();
  await first.events.record(pod(), stopping, new Set());
  const restarted = recorder();
  await restarted.events.record(pod(), stopping, new Set());
  t.same(restarted.names(), first.names(), 'a recorder that remembers nothing names it the same');
  await restarted.events.record(pod('uid-2'), stopping, new Set());
  await restarted.events.record(pod(), { ...stopping, key: 'k' }, new Set());
  t.equal(new Set(restarted.names()).size, 3, 'a pod of the same name with another uid, and another key: other names');
});

t.test('an event that exists already (409) counts as recorded, and is not asked for again', async (t) => {
  const core = fakeCoreV1Api().answer('createNamespacedEvent', apiError(409, 'events "job-abc.0123" already exists', 'AlreadyExists'));
  const events = new EventRecorder(core.api);
  const sent = new Set<string>();
  t.equal(await events.record(pod(), stopping, sent), false, 'not created by this call');
  t.equal(await events.record(pod(), stopping, sent), false);
  t.equal(core.calls.length, 1);
});

t.test('any other failure is thrown, and the event is asked for again on the next call', async (t) => {
  const core = fakeCoreV1Api().answer('createNamespacedEvent', apiError(500), new TypeError('fetch failed')).handle('createNamespacedEvent', ({ body }) => body);
  const events = new EventRecorder(core.api);
  const sent = new Set<string>();
  await t.rejects(events.record(pod(), stopping, sent), { code: 500 });
  await t.rejects(events.record(pod(), stopping, sent), TypeError);
  t.equal(sent.size, 0, 'nothing kept of a failed event');
  t.equal(await events.record(pod(), stopping, sent), true);
  t.equal(core.calls.length, 3);
});

t.test('recordOnLease: a Normal event on the Lease, each one recorded', async (t) => {
  const { core, events, bodies } = recorder();
  const lease = { namespace: 'sidecar-terminator', name: 'sidecar-terminator-watcher' };
  await events.recordOnLease(lease, 'KillMechanismChanged', 'crr to signal');
  await events.recordOnLease(lease, 'KillMechanismChanged', 'crr to signal');
  t.equal(core.calls.length, 2, 'the same words twice: two events');
  t.same(core.requests('createNamespacedEvent').map((request) => request.namespace), [lease.namespace, lease.namespace]);
  t.match(bodies()[0], { type: 'Normal', reason: 'KillMechanismChanged', message: 'crr to signal', involvedObject: { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', ...lease }, metadata: { name: /^sidecar-terminator-watcher\./ } });
  t.not(bodies()[0]?.metadata?.name, bodies()[1]?.metadata?.name, 'each with a name of its own, even within one millisecond');
});
