// Why a pod has no managed label, as src/status/unmanaged.ts tells it, called directly: what in
// its spec keeps the webhook from labelling it (no sidecar, inert markers, its restartPolicy, a
// configuration error), else what the webhook registration says, each with what to do.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { classifyContainers } from '../../src/policy/index.ts';
import { containerStory } from '../../src/status/containers.ts';
import type { PodFacts, PodStory, Readable, WebhookView } from '../../src/status/story-types.ts';
import { unmanagedStory } from '../../src/status/unmanaged.ts';
import { jobPod, killSidecar, main, normalNode, sidecarMarked } from '../support/pods.ts';

/** A pod without the managed label, of these containers. */
function unlabelled(containers: V1Container[], restartPolicy?: string): V1Pod {
  const pod = jobPod(containers, { main: 'running' }, { metadata: { labels: {} } });
  if (restartPolicy === undefined) delete pod.spec!.restartPolicy;
  else pod.spec!.restartPolicy = restartPolicy;
  return pod;
}

/** The story of `pod` as unmanagedStory is given it (its frame), then told with this webhook registration. */
function tell(pod: V1Pod, webhook?: Readable<WebhookView>): PodStory {
  const containers = classifyContainers(pod.spec!).map((role) => containerStory(role, pod, undefined));
  const frame: PodStory = {
    namespace: 'team', pod: 'job-abc', nodeKind: 'normal', state: 'waiting for main', mechanism: '-', restartPolicy: pod.spec!.restartPolicy ?? 'Always',
    containers, trigger: '', actions: [], notManaged: [], advice: [], limits: [],
  };
  const facts: PodFacts = { pod, node: { value: normalNode }, events: { value: [] }, crr: { value: undefined }, now: new Date(), ...(webhook ? { webhook } : {}) };
  return unmanagedStory(frame, facts);
}

const registered = { value: { registered: true, namespaceExcluded: false } };

t.test('no container marked: that is the reason, and marking the sidecar the advice', async (t) => {
  const story = tell(unlabelled([main(), main('helper')], 'Never'), registered);
  t.equal(story.state, 'not managed');
  t.match(story.notManaged, [/^no container is marked as a sidecar \(env KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true"/]);
  t.equal(story.notManaged.length, 1, 'the webhook is not blamed for a pod it would not label');
  t.same(story.advice, ['Mark the sidecar: add env KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT: "true" to it in the Job template.']);
});

t.test('markers that make no sidecar are named as such', async (t) => {
  const story = tell(unlabelled([main(), sidecarMarked('false', 'proxy')], 'Never'));
  t.match(story.notManaged, [/^no container is a sidecar: the markers on proxy do not make one/]);
});

t.test('a restartPolicy other than Never or OnFailure, set or unset, is a reason of its own', async (t) => {
  const always = tell(unlabelled([main(), killSidecar()], 'Always'));
  t.same(always.notManaged, ['restartPolicy is Always: sidecars are stopped only in pods whose restartPolicy is Never or OnFailure']);
  t.same(always.advice, ['Set restartPolicy: Never or OnFailure in the pod template (Jobs require one of them).']);
  t.match(tell(unlabelled([main(), killSidecar()])).notManaged, [/^restartPolicy is unset, which means Always:/]);
});

t.test('a configuration error: counted, formatted, and the fix of its rule at its field', async (t) => {
  const story = tell(unlabelled([main(), sidecarMarked('yes', 'proxy')], 'Never'));
  t.match(story.notManaged, [/^no container is a sidecar/, /^its sidecar configuration has an error, so the webhook denies such a pod .*env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT\]: Invalid value: "yes"/]);
  t.match(story.advice.at(-1), /^spec\.containers\[1\]\.env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT\]: /);
  const two = tell(unlabelled([main(), sidecarMarked('yes', 'proxy'), sidecarMarked('on', 'logs')], 'Never'));
  t.match(two.notManaged.at(-1), /has 2 errors/);
});

t.test('a pod the webhook would label: the registration says why it did not', async (t) => {
  const valid = unlabelled([main(), killSidecar()], 'Never');
  const unregistered = tell(valid, { value: { registered: false, namespaceExcluded: false } });
  t.equal(unregistered.state, 'not managed');
  t.same(unregistered.notManaged, ['no sidecar-terminator mutating webhook is registered in the cluster: the add-on is not installed, or its webhook configuration was removed']);
  t.same(unregistered.advice, [], 'nothing said of the sweeper: it would not help');
  const excluded = tell(valid, { value: { registered: true, namespaceExcluded: true } });
  t.match(excluded.notManaged, [/^the namespace team is excluded from the webhooks/]);
  t.same(excluded.advice, ['Run the Job in a namespace the webhooks serve, or remove the namespace from webhook.excludedNamespaces.']);
  for (const [webhook, why] of [[registered, 'registered and serving the namespace'], [{ missing: 'list mutatingwebhookconfigurations' }, 'unreadable'], [undefined, 'not looked up']] as const) {
    const story = tell(valid, webhook);
    t.match(story.notManaged, [/^the webhook did not label it although it would: the webhook was unreachable/], why);
    t.match(story.advice, [/sweeper labels such running pods every --sweep-interval/], why);
  }
});
