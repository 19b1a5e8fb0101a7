// The Events the add-on writes (src/kube/events.ts): one shape, in the namespace of the object they
// are about, with the add-on's source and this process as the reporting instance; action and
// related only when given.
import t from 'tap';
import { eventBody } from '../../src/kube/events.ts';
import { COMPONENT } from '../../src/policy/index.ts';

const pod = { kind: 'Pod', apiVersion: 'v1', name: 'job-abc', namespace: 'team-a', uid: 'uid-1' };

t.test("an event about an object: in its namespace, from the add-on, counted once, now", async (t) => {
  const before = Date.now();
  const event = eventBody('job-abc.stop', pod, 'Normal', 'SidecarTerminator', 'stopping sidecars: proxy');
  t.match(event, {
    metadata: { name: 'job-abc.stop', namespace: 'team-a' },
    involvedObject: pod,
    type: 'Normal',
    reason: 'SidecarTerminator',
    message: 'stopping sidecars: proxy',
    source: { component: COMPONENT },
    reportingComponent: COMPONENT,
    count: 1,
  });
  t.equal(event.firstTimestamp, event.lastTimestamp, 'first and last seen at once');
  t.ok(event.firstTimestamp!.getTime() >= before && event.firstTimestamp!.getTime() <= Date.now());
  t.notOk('action' in event, 'no action unless given');
  t.notOk('related' in event, 'no related object unless given');
});

t.test('action and related, when given', async (t) => {
  const job = { kind: 'Job', apiVersion: 'batch/v1', name: 'job', namespace: 'team-a', uid: 'job-uid' };
  const event = eventBody('n', pod, 'Warning', 'SidecarTerminatorFailed', 'm', { action: 'signal-ignored', related: job });
  t.equal(event.type, 'Warning');
  t.equal(event.action, 'signal-ignored');
  t.same(event.related, job);
});

t.test('the reporting instance: the pod it runs in ($HOSTNAME), else the component', async (t) => {
  const hostname = process.env.HOSTNAME;
  t.teardown(() => {
    if (hostname === undefined) delete process.env.HOSTNAME;
    else process.env.HOSTNAME = hostname;
  });
  process.env.HOSTNAME = 'sidecar-terminator-watcher-7d9f-x2';
  t.equal(eventBody('n', pod, 'Normal', 'r', 'm').reportingInstance, 'sidecar-terminator-watcher-7d9f-x2');
  delete process.env.HOSTNAME;
  t.equal(eventBody('n', pod, 'Normal', 'r', 'm').reportingInstance, COMPONENT);
});
