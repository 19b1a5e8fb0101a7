// PodMemories (src/watcher/pod-memory.ts): what the watcher keeps of each pod, by uid, only while
// the pod is in the watch.
import t from 'tap';
import type { V1Pod } from '@kubernetes/client-node';
import { PodMemories, freshMemory } from '../../src/watcher/pod-memory.ts';
import { jobPod, killSidecar, main } from '../support/pods.ts';

const pod = (uid: string, name = 'job-abc'): V1Pod => jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }, { metadata: { name, uid } });

t.test('a fresh memory: no history, nothing told, stopping or observed, no event', async (t) => {
  const memory = freshMemory();
  t.same({ ...memory, events: [...memory.events] }, { history: {}, told: false, stopping: false, observed: false, events: [] });
  memory.events.add('e');
  t.equal(freshMemory().events.size, 0, 'each memory has its own set of events');
});

t.test('a pod in the watch keeps its memory from one reconcile to the next', async (t) => {
  const memories = new PodMemories();
  const first = memories.of(pod('uid-1'));
  first.told = true;
  first.history = { startedWith: 'crr', crr: ['proxy'] };
  first.events.add('abc');
  const again = memories.of(pod('uid-1'));
  t.equal(again, first, 'the same memory, read from a newer copy of the pod');
  t.equal(memories.size, 1);
});

t.test('memories are by uid: a pod created again under the same name starts afresh', async (t) => {
  const memories = new PodMemories();
  memories.of(pod('uid-1')).told = true;
  const replaced = memories.of(pod('uid-2'));
  t.equal(replaced.told, false);
  t.equal(memories.size, 2);
});

t.test('forget: what was kept is handed back once, and the pod starts afresh after', async (t) => {
  const memories = new PodMemories();
  const kept = memories.of(pod('uid-1'));
  kept.stopping = true;
  memories.of(pod('uid-2'));
  t.equal(memories.forget(pod('uid-1')), kept);
  t.equal(memories.size, 1, 'the other pod is kept');
  t.equal(memories.forget(pod('uid-1')), undefined, 'forgotten already');
  t.not(memories.of(pod('uid-1')), kept, 'a pod seen again gets a new memory');
});

t.test('a pod that left the watch gets a fresh memory that is not kept: a late reconcile cannot bring it back', async (t) => {
  const inWatch = new Set(['uid-1']);
  const memories = new PodMemories((p) => inWatch.has(p.metadata?.uid ?? ''));
  const kept = memories.of(pod('uid-1'));
  const gone = memories.of(pod('uid-2'));
  gone.told = true;
  t.equal(memories.size, 1, 'only the pod in the watch is kept');
  t.not(memories.of(pod('uid-2')), gone, 'each call for the gone pod: a memory of its own');
  t.equal(memories.of(pod('uid-2')).told, false);
  inWatch.delete('uid-1');
  t.equal(memories.of(pod('uid-1')), kept, 'what is kept stays until forgotten, even once the pod has left');
});
