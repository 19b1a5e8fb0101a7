// `sidecar-terminator status` against the real API server, serve registered and the kubelet
// simulator running the pods: one Job in each state (waiting for main, stopping, stopped,
// failed), pods the add-on does not manage and why, --fail-after, -o json, and a user whose
// RBAC lets it read pods but not events or nodes.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import type { V1Container } from '@kubernetes/client-node';
import type { PodStory } from '../../src/status/story.ts';
import { runCli } from '../cli/run.ts';
import { simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { apply, eventsOf, finishedByWatcher, podOfJob, startStack, waitForJob } from '../support/stack.ts';
import { expectJobStoppedBy } from '../support/endings.ts';
import { jobYaml, killSidecar, main, onVirtualNode, podYaml, sidecarMarked } from '../support/pods.ts';
import { serviceAccountKubeconfig } from '../support/service-account.ts';

// A sidecar that ignores SIGTERM is ended from outside only once its grace period is over (600 s
// here): the pod stays `stopping` for the test.
const stack = await startStack(t);
const { cp, core } = stack;
const namespace = await cp.createNamespace('status-demo');

const mainAndProxy = [main(), killSidecar()];

async function status(args: string[]) {
  const run = await runCli(['status', '--kubeconfig', cp.kubeconfigPath, ...args]);
  return run;
}

async function storyOf(pod: string, ns = namespace): Promise<PodStory> {
  const run = await status(['-n', ns, `pod/${pod}`, '-o', 'json']);
  if (run.code !== 0) throw new Error(`status pod/${pod}: ${run.code} ${run.stderr}`);
  return JSON.parse(run.stdout) as PodStory;
}

// The four states, one Job each.
await apply(cp, namespace, jobYaml('busy', { annotations: { [simAnnotations.exitAfter('main')]: 'never' }, containers: mainAndProxy }));
await apply(cp, namespace, jobYaml('deaf', {
  annotations: { [simAnnotations.exitAfter('main')]: '1s', [simAnnotations.onSigterm('proxy')]: 'ignore' },
  spec: { terminationGracePeriodSeconds: 600 },
  containers: mainAndProxy,
}));
await apply(cp, namespace, jobYaml('quick', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers: mainAndProxy }));
await apply(cp, namespace, jobYaml('stuck', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, spec: onVirtualNode, containers: mainAndProxy }));

const pods = {
  busy: (await podOfJob(stack, namespace, 'busy')).metadata!.name!,
  deaf: (await podOfJob(stack, namespace, 'deaf')).metadata!.name!,
  quick: (await podOfJob(stack, namespace, 'quick')).metadata!.name!,
  stuck: (await podOfJob(stack, namespace, 'stuck')).metadata!.name!,
};
await waitForJob(stack, namespace, 'quick', 'Complete');
await waitFor('the watcher to be finished with the quick pod', async () => finishedByWatcher(stack, [await core.readNamespacedPod({ name: pods.quick, namespace })]));
await waitFor('the SIGTERM to the deaf sidecar', async () => (await core.readNamespacedPod({ name: pods.deaf, namespace })).spec?.ephemeralContainers?.length === 1);
await waitFor('the Warning event on the stuck pod', async () => (await eventsOf(stack, namespace, pods.stuck)).some((e) => e.type === 'Warning'));
await waitFor('the busy pod to run', async () => (await core.readNamespacedPod({ name: pods.busy, namespace })).status?.phase === 'Running');

t.test('the list: the pods in flight, one line each', async (t) => {
  const run = await status(['-n', namespace]);
  t.equal(run.code, 0, run.stderr);
  const [header, ...rows] = run.stdout.trimEnd().split('\n');
  t.match(header, /^POD\s+JOB\s+NODE\s+MECHANISM\s+STATE\s+SINCE\s+LAST EVENT$/);
  t.equal(rows.length, 3, 'the done pod is not in flight');
  const row = (pod: string) => rows.find((line) => line.startsWith(`${pod} `)) ?? '';
  t.match(row(pods.busy), /^\S+\s+busy\s+normal\s+kill\s+waiting for main\s+\d+\w*\s+-$/);
  t.match(row(pods.deaf), /^\S+\s+deaf\s+normal\s+signal\s+stopping\s+\d+\w*\s+stopping sidecars: proxy \(SIGTERM\)$/);
  t.match(row(pods.stuck), /^\S+\s+stuck\s+virtual\s+none\s+failed\s+\d+\w*\s+sidecar proxy cannot be stopped: /);

  const all = await status(['-n', namespace, '--all', '-o', 'json']);
  const items = (JSON.parse(all.stdout) as { items: PodStory[] }).items;
  t.same(
    Object.fromEntries(items.map((item) => [item.job, item.state])),
    { busy: 'waiting for main', deaf: 'stopping', quick: 'stopped', stuck: 'failed' },
    '--all adds the pods the watcher is done with',
  );
  const wide = await status(['-n', namespace, '-o', 'wide']);
  t.match(wide.stdout.split('\n')[0], /NODE NAME\s+SIDECARS\s+WAITING FOR$/);
  t.match(wide.stdout, new RegExp(`${pods.deaf} .*sim-node\\s+proxy\\s+proxy to exit after the SIGTERM`));

  const everywhere = await status(['-A', '-l', 'job-name=deaf']);
  t.match(everywhere.stdout, new RegExp(`^NAMESPACE\\s+POD[\\s\\S]*\\n${namespace}\\s+${pods.deaf}\\s`), '-A adds the namespace; -l narrows');
  t.equal(everywhere.stdout.trimEnd().split('\n').length, 2, 'only the deaf pod');

  const yaml = await status(['-n', namespace, '-o', 'yaml']);
  t.match(yaml.stdout, /^items:\n {2}- namespace: status-demo\n/);
});

t.test('waiting for main: what is awaited, nothing to do', async (t) => {
  const story = await storyOf(pods.busy);
  t.match(story, { state: 'waiting for main', code: 'mains-running', job: 'busy', nodeKind: 'normal', managed: 'true', restartPolicy: 'Never' });
  t.match(story.waitingFor, /^the main container to finish: main \(running since /);
  t.match(story.trigger, /restartPolicy Never: the sidecars are stopped once every main container has exited, whatever its exit code/);
  t.match(story.containers, [{ name: 'main', role: 'main', markers: [] }, { name: 'proxy', role: 'sidecar', markers: ['KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true"'], mechanism: 'kill' }]);
  t.match(story.advice, [/Nothing to do for the sidecars/]);
});

t.test('stopping: the SIGTERM sent, the sidecar still running', async (t) => {
  const run = await status(['-n', namespace, `pod/${pods.deaf}`]);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, new RegExp(`^Pod:\\s+${namespace}/${pods.deaf}\\nJob:\\s+deaf\\nNode:\\s+sim-node \\(normal\\)\\nManaged:\\s+yes \\(label sidecar-terminator.io/managed=true\\)\\nState:\\s+stopping since \\S+ \\(\\w+ ago\\)\\n`));
  t.match(run.stdout, /\n {2}proxy {2}sidecar {2}running since \S+\n {9}KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true"\n {9}stopped by: signal \(an ephemeral container sends it SIGTERM, or its HTTP shutdown request\)\n/);
  t.match(run.stdout, /What happened:\n.*event Normal SidecarTermina\w+: stopping sidecars: proxy \(SIGTERM\)\n.*ephemeral container \S+ targeting proxy/);
  t.match(run.stdout, /\nWaiting for: proxy to exit after the SIGTERM its ephemeral container sent \(or to be ended from outside once its grace period is over\)\n/);
  const explain = await runCli(['explain', '--kubeconfig', cp.kubeconfigPath, '-n', namespace, `pod/${pods.deaf}`]);
  t.same(explain.stdout.replace(/\(\w+ ago\)/, ''), run.stdout.replace(/\(\w+ ago\)/, ''), 'explain pod/NAME is the same story');
});

t.test('stopped: the actions, in order, with their times', async (t) => {
  const story = await storyOf(pods.quick);
  t.match(story, { state: 'stopped', code: 'sidecars-stopped', managed: 'true', mechanism: 'signal' });
  const whats = story.actions.map((a) => a.what);
  const expected = [/event Normal SidecarTermina\w+: stopping sidecars: proxy \(SIGTERM\)/, /ephemeral container \S+ targeting proxy started/, /ephemeral container \S+ exited 0/, /sidecar proxy exited 0/];
  // Last, once the watcher has read the ended pod: its stop record.
  if (whats.length > expected.length) expected.push(/^condition SidecarTerminated=True: stop record: main exited 0; proxy stopped by signal, exited 0 \d+s after the main containers$/);
  t.match(whats, expected);
  t.equal(whats.length, expected.length, whats.join('\n'));
  t.match(story.result, { mains: [{ name: 'main', exitCode: 0 }], sidecars: [{ name: 'proxy', stoppedBy: ['signal'], exitCode: 0 }] }, 'its result');
  for (const action of story.actions) t.match(action.time, /^\d{4}-\d\d-\d\dT/, `${action.what}: a time`);
  await expectJobStoppedBy(t, stack, namespace, 'quick', { proxy: 'signal' });
});

t.test('failed: the reason and the fix', async (t) => {
  const story = await storyOf(pods.stuck);
  t.match(story, { state: 'failed', code: 'virtual-node-without-image', nodeKind: 'virtual', node: 'sim-virtual-node', mechanism: 'none' });
  t.equal(story.waitingFor, 'nothing: sidecar proxy cannot be stopped on this node');
  t.match(story.lastEvent?.message, /sidecar proxy cannot be stopped: the pod runs on a virtual-kubelet node/);
  t.match(story.advice, [/quick-exit image \(env KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE\)/]);
  t.match(story.lastEvent, { type: 'Warning', reason: 'SidecarTerminationFailed' });
});

t.test('--fail-after: exit 1 for the pods waiting for their sidecars longer than that', async (t) => {
  const late = await status(['-n', namespace, '--fail-after', '1s']);
  t.equal(late.code, 1);
  t.match(late.stderr, new RegExp(`pod ${namespace}/${pods.deaf} has waited \\d+s for its sidecars to stop \\(--fail-after 1s\\): stopping`));
  t.match(late.stderr, new RegExp(`pod ${namespace}/${pods.stuck} has waited \\d+s .*: failed`));
  t.notMatch(late.stderr, pods.busy, 'a pod whose main container still works is not stuck');
  t.equal((await status(['-n', namespace, '--fail-after', '1h'])).code, 0);
  t.equal((await status(['-n', namespace, `pod/${pods.deaf}`, '--fail-after', '1s'])).code, 1, 'for one pod too');
  t.equal((await status(['-n', namespace, `pod/${pods.busy}`, '--fail-after', '1s'])).code, 0);
});

t.test('pods the add-on does not manage, and why', async (t) => {
  const bare = (name: string, restartPolicy: string, containers: V1Container[]) =>
    podYaml(name, containers, { annotations: { [simAnnotations.exitAfter('main')]: 'never' }, spec: { restartPolicy } });
  await apply(cp, namespace, bare('always', 'Always', mainAndProxy));
  await apply(cp, namespace, bare('plain', 'Never', [main()]));
  // The add-on's own namespace is excluded from the webhooks: nothing labels or validates there.
  const excluded = await cp.createNamespace('sidecar-terminator');
  await apply(cp, excluded, bare('skipped', 'Never', mainAndProxy));
  await apply(cp, excluded, bare('broken', 'Never', [main(), sidecarMarked('yes')]));

  const always = await storyOf('always');
  t.match(always, { state: 'not managed', notManaged: [/restartPolicy is Always: sidecars are stopped only in pods whose restartPolicy is Never or OnFailure/] });
  t.match(always.advice, [/Set restartPolicy: Never or OnFailure/]);
  t.match(await storyOf('plain'), { notManaged: [/no container is marked as a sidecar/] });
  t.match(await storyOf('skipped', excluded), { notManaged: [/the namespace sidecar-terminator is excluded from the webhooks/] });
  const broken = await storyOf('broken', excluded);
  t.match(broken.notManaged, [/no container is a sidecar: the markers on proxy do not make one/, /its sidecar configuration has an error, .*env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT\]: Invalid value: "yes"/]);
  t.match(broken.advice, [/Mark the sidecar/, /Set the marker to "true"/]);

  const text = await status(['-n', namespace, 'pod/always']);
  t.match(text.stdout, /Managed:\s+no \(no sidecar-terminator.io\/managed label\)\n[\s\S]*Why the add-on does not manage it:\n {2}- restartPolicy is Always/);
});

t.test('usage and read errors: exit 2 or 3, saying what and how to fix it', async (t) => {
  const missing = await status(['-n', namespace, 'pod/nowhere']);
  t.equal(missing.code, 3);
  t.match(missing.stderr, `pod nowhere not found in namespace ${namespace}`);
  const named = await status(['--context', 'local', '-n', namespace]);
  t.equal(named.code, 0, '--context with a context of the kubeconfig');
  t.match(named.stdout, pods.deaf);
  const context = await status(['--context', 'prod']);
  t.equal(context.code, 2);
  t.match(context.stderr, /context "prod" is not in the kubeconfig; its contexts are: local/);
  const selector = await status(['-n', namespace, '-l', 'a in (']);
  t.equal(selector.code, 2);
  t.match(selector.stderr, /the API server refused the request: .*unable to parse requirement/);
  const target = await status(['deployment/x']);
  t.equal(target.code, 2);
  t.match(target.stderr, /"deployment\/x" is not a pod: write pod\/NAME/);
  t.equal((await status(['-A', 'pod/x'])).code, 2);
  const unreachable = await runCli(['status', '--kubeconfig', unreachableKubeconfig()]);
  t.equal(unreachable.code, 3);
  t.match(unreachable.stderr, /cannot reach the API server https:\/\/127\.0\.0\.1:1: /);
});

t.test('a user who may read pods only: the rest is shown, and what is missing is named', async (t) => {
  await cp.kubectl(['create', 'serviceaccount', 'viewer'], { namespace });
  await cp.kubectl(['create', 'role', 'pods-only', '--verb=get,list', '--resource=pods'], { namespace });
  await cp.kubectl(['create', 'rolebinding', 'viewer-pods', '--role=pods-only', `--serviceaccount=${namespace}:viewer`], { namespace });
  // The authorizer reads RBAC objects through its informers: a binding just created counts a moment later.
  await waitFor('the binding to apply', async () => (await cp.kubectl(['auth', 'can-i', 'list', 'pods', '-n', namespace, '--as', `system:serviceaccount:${namespace}:viewer`])).stdout.trim() === 'yes');
  const limited = await serviceAccountKubeconfig(cp, namespace, 'viewer', t);

  const list = await runCli(['status', '--kubeconfig', limited, '-n', namespace]);
  t.equal(list.code, 0, list.stderr);
  t.match(list.stdout, new RegExp(`${pods.deaf}\\s+deaf\\s+unknown\\s+signal\\s+stopping`), 'the ephemeral container still tells the mechanism');
  t.match(list.stderr, `Not shown, for lack of permission to: get nodes; list events in namespace ${namespace}.`);
  const one = await runCli(['status', '--kubeconfig', limited, '-n', namespace, `pod/${pods.deaf}`]);
  t.equal(one.code, 0, one.stderr);
  t.match(one.stdout, /Node:\s+sim-node \(unknown\)/);
  t.match(one.stdout, /\nNot shown, for lack of permission to: get nodes; list events in namespace status-demo\.\n$/);
  const elsewhere = await runCli(['status', '--kubeconfig', limited, '-n', 'default']);
  t.equal(elsewhere.code, 3);
  t.match(elsewhere.stderr, /cannot list pods in namespace default: forbidden; status needs at least permission to list pods in namespace default/);
});

function unreachableKubeconfig(): string {
  const path = join(cp.dir, 'unreachable.kubeconfig');
  writeFileSync(path, JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'x',
    clusters: [{ name: 'x', cluster: { server: 'https://127.0.0.1:1', 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'x', user: { token: 'x' } }],
    contexts: [{ name: 'x', context: { cluster: 'x', user: 'x' } }],
  }));
  return path;
}

