// The small readings of src/status/readings.ts, called directly: an event's code and time, events
// in time order, times as status shows them, a container's finish, the latest of some times, and
// a story field only when it has a value.
import type { CoreV1Event } from '@kubernetes/client-node';
import t from 'tap';
import { eventCode, eventTime, finishedAt, iso, latest, optional, sortByTime } from '../../src/status/readings.ts';
import { FINISHED, containerStatus, jobPod, killSidecar, main } from '../support/pods.ts';

const base: CoreV1Event = { metadata: {}, involvedObject: {} };

t.test("eventCode: the event's action when it is one of the codes", async (t) => {
  t.equal(eventCode({ ...base, action: 'stop-requested' }), 'stop-requested');
  t.equal(eventCode({ ...base, action: 'Killing' }), undefined, "another component's action");
  t.equal(eventCode({ ...base }), undefined);
  t.equal(eventCode(undefined), undefined);
});

t.test('eventTime: the last timestamp, else the event time, else the first, else the creation', async (t) => {
  const times = {
    lastTimestamp: new Date('2026-01-01T00:00:04Z'),
    eventTime: new Date('2026-01-01T00:00:03Z'),
    firstTimestamp: new Date('2026-01-01T00:00:02Z'),
    metadata: { creationTimestamp: new Date('2026-01-01T00:00:01Z') },
  };
  t.equal(eventTime({ ...base, ...times }), '2026-01-01T00:00:04Z');
  t.equal(eventTime({ ...base, ...times, lastTimestamp: undefined }), '2026-01-01T00:00:03Z');
  t.equal(eventTime({ ...base, ...times, lastTimestamp: undefined, eventTime: undefined }), '2026-01-01T00:00:02Z');
  t.equal(eventTime({ ...base, metadata: times.metadata }), '2026-01-01T00:00:01Z');
  t.equal(eventTime(base), undefined);
});

t.test('sortByTime: oldest first, the untimed before all, and the list given left as it was', async (t) => {
  const event = (reason: string, time?: string): CoreV1Event => ({ ...base, reason, ...(time ? { lastTimestamp: new Date(time) } : {}) });
  const events = [event('b', '2026-01-01T00:00:02Z'), event('none'), event('a', '2026-01-01T00:00:01Z')];
  t.same(sortByTime(events).map((e) => e.reason), ['none', 'a', 'b']);
  t.same(events.map((e) => e.reason), ['b', 'none', 'a']);
});

t.test('iso: whole seconds without milliseconds, Dates and strings alike, ? when unknown', async (t) => {
  t.equal(iso(new Date('2026-01-01T00:00:00Z')), '2026-01-01T00:00:00Z');
  t.equal(iso('2026-01-01T01:00:00+01:00'), '2026-01-01T00:00:00Z', 'a string in another zone, in UTC');
  t.equal(iso('2026-01-01T00:00:00.250Z'), '2026-01-01T00:00:00.250Z', 'milliseconds are kept when there are some');
  t.equal(iso(undefined), '?');
});

t.test("finishedAt: a terminated container's finish, nothing for a running or unknown one", async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  t.equal(finishedAt(pod, 'main'), FINISHED);
  t.equal(finishedAt(pod, 'proxy'), undefined);
  t.equal(finishedAt(pod, 'gone'), undefined);
  pod.status!.containerStatuses = [containerStatus('main', 0, { state: { terminated: { exitCode: 0 } } })];
  t.equal(finishedAt(pod, 'main'), undefined, 'terminated without a finish time');
});

t.test('latest: the latest of the times known', async (t) => {
  t.equal(latest(['2026-01-01T00:00:02Z', undefined, '2026-01-01T00:00:09Z', '2026-01-01T00:00:05Z']), '2026-01-01T00:00:09Z');
  t.equal(latest([undefined]), undefined);
  t.equal(latest([]), undefined);
});

t.test('optional: the field when it has a value; undefined and the empty string are none', async (t) => {
  t.same(optional('job', 'nightly'), { job: 'nightly' });
  t.same(optional('count', 0), { count: 0 }, 'zero is a value');
  t.strictSame(optional('job', ''), {}, 'no key at all');
  t.strictSame(optional('job', undefined), {}, 'no key at all');
});
