// The watcher end to end: Jobs applied with kubectl, the webhook labelling their pods, the
// simulated kubelet running them, and the watcher stopping the sidecars, on the signal
// mechanism (no OpenKruise here, so `auto` must pick signal).
import t from 'tap';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { SERVE_FLAGS } from '../../src/config.ts';
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, MANAGED, MANAGED_LABEL, readStopRecord } from '../../src/policy/index.ts';
import { findContainerStatus, simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { apiFeatures, kubernetesVersion } from '../support/control-plane.ts';
import { apply, eventsOf, podOfJob, startStack, waitForJob } from '../support/stack.ts';
import { expectJobStoppedBy, expectStoppedBy } from '../support/endings.ts';
import { QUICK_EXIT, ignoreExitCodeSidecar, imageSidecar, jobYaml, killSidecar, main, onVirtualNode, podYaml } from '../support/pods.ts';

// The signal image runs as USER 1000, as the add-on's image does; the sidecars' images as root.
const stack = await startStack(t, { sim: { imageUsers: { [SERVE_FLAGS.signalImage.default]: 1000 } } });
const { cp, core } = stack;

const exitAfter = (container: string, after: string, code?: string) => ({
  [simAnnotations.exitAfter(container)]: after,
  ...(code ? { [simAnnotations.exitCode(container)]: code } : {}),
});

t.test('auto picks the signal mechanism without the Kruise CRD', async (t) => {
  const started = await waitFor('the watcher start log', async () => stack.serve.logs().find((l) => l.msg === 'watcher starting'));
  t.equal(started.killMechanism, 'signal');
});

t.test('Never, normal node, kill sidecar: stopped by signal, the Job completes', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('kill', { annotations: exitAfter('main', '1s'), containers: [main(), killSidecar()] }));
  await waitForJob(stack, namespace, 'kill', 'Complete');
  const pod = await podOfJob(stack, namespace, 'kill');
  t.equal(pod.status?.phase, 'Succeeded');
  t.same(pod.spec?.ephemeralContainers?.map((c) => [c.name, c.targetContainerName]), [['stop-proxy', 'proxy']], 'one ephemeral container targeting the sidecar');
  const ephemeral = pod.spec!.ephemeralContainers![0]!;
  t.same(ephemeral.securityContext?.capabilities?.drop, ['ALL']);
  t.equal(ephemeral.securityContext?.allowPrivilegeEscalation, false);
  // No condition while it runs: the event says it, as with OpenKruise; once it has ended, the stop record.
  const recorded = await waitFor('the stop record', async () => readStopRecord(await core.readNamespacedPod({ namespace, name: pod.metadata!.name! })));
  t.match(recorded, { phase: 'Succeeded', mains: [{ name: 'main', exitCode: 0 }], sidecars: [{ name: 'proxy', stoppedBy: ['signal'], exitCode: 0 }] }, 'the stop record, once the pod has ended');
  t.equal(pod.metadata?.labels?.[MANAGED_LABEL], 'true', 'no label written to take it out of the watch');
  const left = await waitFor('the watcher to see the pod leave its watch', () =>
    stack.serve.logs().find((l) => l.msg === 'sidecars stopped; the pod left the watch' && l.pod === `${namespace}/${pod.metadata!.name}`),
  );
  t.equal(left.uid, pod.metadata!.uid, 'the pod leaves the watch when it ends');
  const events = await eventsOf(stack, namespace, pod.metadata!.name!);
  t.match(events, [{ reason: 'SidecarTerminator', type: 'Normal', action: 'stop-requested', message: /proxy \(SIGTERM\)/ }], "OpenKruise's event reason, and the code in its action");
  t.notOk(events[0]?.related, 'no related object: the signal container is on the pod');
  const logged = stack.serve.logs().filter((l) => l.msg === 'stopping sidecars' && l.pod === `${namespace}/${pod.metadata!.name}`);
  t.equal(logged.length, 1, 'logged once, however many reconciles followed');
  await expectStoppedBy(t, stack, pod, { proxy: 'signal' });
});

t.test('Never, the main container fails: the sidecar is still stopped, the Job fails', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('fails', { annotations: exitAfter('main', '1s', '3'), containers: [main(), killSidecar()] }));
  await waitForJob(stack, namespace, 'fails', 'Failed');
  const pod = await waitFor('the pod to be Failed', async () => {
    const pod = await podOfJob(stack, namespace, 'fails');
    return pod.status?.phase === 'Failed' && pod;
  });
  t.equal(findContainerStatus(pod, 'main')?.state?.terminated?.exitCode, 3);
  t.ok(findContainerStatus(pod, 'proxy')?.state?.terminated, 'the sidecar was stopped');
  t.equal(pod.spec?.ephemeralContainers?.length, 1);
  await expectStoppedBy(t, stack, pod, { proxy: 'signal' });
});

t.test('OnFailure, the main container fails once: the sidecar runs on until it succeeds', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('retry', { restartPolicy: 'OnFailure', annotations: exitAfter('main', '1s', '1,0'), containers: [main(), ignoreExitCodeSidecar('proxy')] }));
  await waitForJob(stack, namespace, 'retry', 'Complete');
  const pod = await podOfJob(stack, namespace, 'retry');
  const mainStatus = findContainerStatus(pod, 'main')!;
  const proxyStatus = findContainerStatus(pod, 'proxy')!;
  t.equal(mainStatus.restartCount, 1, 'the main container was restarted once');
  t.equal(proxyStatus.restartCount, 0, 'the sidecar was never restarted');
  t.ok(
    new Date(proxyStatus.state!.terminated!.finishedAt!).getTime() >= new Date(mainStatus.state!.terminated!.finishedAt!).getTime(),
    'the sidecar stopped after the main container succeeded',
  );
  t.equal(pod.status?.phase, 'Succeeded');
  // Its exit code ignored: the phase is set first, and the kubelet stops it (the signal container added after never runs).
  await expectJobStoppedBy(t, stack, namespace, 'retry', { proxy: 'phase' });
});

t.test('a sidecar exiting 143 with ignore-exit-code: the pod ends Succeeded', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('ignore', { annotations: { ...exitAfter('main', '1s'), [simAnnotations.onSigterm('proxy')]: 'exit143' }, containers: [main(), ignoreExitCodeSidecar('proxy')] }));
  await waitForJob(stack, namespace, 'ignore', 'Complete');
  const pod = await podOfJob(stack, namespace, 'ignore');
  t.equal(pod.status?.phase, 'Succeeded');
  t.match(pod.status?.conditions?.find((c) => c.type === 'SidecarTerminated'), { status: 'True', message: /Succeeded/ });
  // The kubelet stops it once the phase is terminal, which the Job controller may see first.
  const proxy = await waitFor('the sidecar to terminate', async () => findContainerStatus(await core.readNamespacedPod({ namespace, name: pod.metadata!.name! }), 'proxy')?.state?.terminated);
  t.ok(proxy, 'the sidecar terminated');
  await expectJobStoppedBy(t, stack, namespace, 'ignore', { proxy: 'phase' });
});

t.test('virtual node with a quick-exit image: image replaced, the Job completes', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('virtual', { annotations: exitAfter('main', '1s'), spec: onVirtualNode, containers: [main(), imageSidecar('logs', QUICK_EXIT, { env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }] })] }));
  await waitForJob(stack, namespace, 'virtual', 'Complete');
  const pod = await podOfJob(stack, namespace, 'virtual');
  t.equal(pod.spec?.nodeName, stack.sim.virtualNodes[0]);
  t.equal(pod.spec?.containers.find((c) => c.name === 'logs')?.image, QUICK_EXIT, 'the image was replaced in place');
  t.equal(findContainerStatus(pod, 'logs')?.state?.terminated?.exitCode, 0);
  t.notOk(pod.spec?.ephemeralContainers, 'no signal on a virtual node');
  await expectStoppedBy(t, stack, pod, { logs: 'image' });
});

t.test('virtual node without a quick-exit image: a Warning event, nothing else touched', async (t) => {
  const namespace = await cp.createNamespace();
  const warned = await apply(cp, namespace, jobYaml('stuck', { annotations: exitAfter('main', '1s'), spec: onVirtualNode, containers: [main(), killSidecar()] }));
  t.match(warned, /virtual-kubelet nodes/, 'the webhook warned at creation');
  const pod = await podOfJob(stack, namespace, 'stuck');
  const events = await waitFor('a Warning event', async () => {
    const events = await eventsOf(stack, namespace, pod.metadata!.name!);
    return events.length > 0 && events;
  });
  t.match(events, [{ type: 'Warning', reason: 'SidecarTerminationFailed', action: 'virtual-node-without-image', message: /proxy cannot be stopped: .*virtual-kubelet/ }]);
  const current = await core.readNamespacedPod({ name: pod.metadata!.name!, namespace });
  t.equal(current.status?.phase, 'Running');
  t.ok(findContainerStatus(current, 'proxy')?.state?.running, 'the sidecar still runs');
  t.notOk(current.spec?.ephemeralContainers, 'no ephemeral container');
  t.equal(current.spec?.containers.find((c) => c.name === 'proxy')?.image, 'envoyproxy/envoy:v1.31.0', 'image untouched');
});

t.test('normal node with only a quick-exit image: stopped by image', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('image', { annotations: exitAfter('main', '1s'), containers: [main(), imageSidecar()] }));
  await waitForJob(stack, namespace, 'image', 'Complete');
  const pod = await podOfJob(stack, namespace, 'image');
  t.equal(pod.spec?.nodeName, stack.sim.normalNodes[0]);
  t.equal(pod.spec?.containers.find((c) => c.name === 'logs')?.image, QUICK_EXIT);
  t.notOk(pod.spec?.ephemeralContainers);
  await expectStoppedBy(t, stack, pod, { logs: 'image' });
});

t.test('two sidecars with different mechanisms in one pod', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('mixed', { annotations: exitAfter('main', '1s'), containers: [main(), killSidecar(), imageSidecar()] }));
  await waitForJob(stack, namespace, 'mixed', 'Complete');
  const pod = await podOfJob(stack, namespace, 'mixed');
  t.same(pod.spec?.ephemeralContainers?.map((c) => c.targetContainerName), ['proxy']);
  t.equal(pod.spec?.containers.find((c) => c.name === 'logs')?.image, QUICK_EXIT);
  await expectStoppedBy(t, stack, pod, { proxy: 'signal', logs: 'image' });
});

t.test('three main containers finishing at different times: nothing happens before the last', async (t) => {
  const namespace = await cp.createNamespace();
  const annotations = { ...exitAfter('a', '1s'), ...exitAfter('b', '3s', '1'), ...exitAfter('c', '5s') };
  await apply(cp, namespace, jobYaml('three', { annotations, containers: [main('a'), main('b'), main('c'), killSidecar()] }));
  await waitForJob(stack, namespace, 'three', 'Failed');
  const pod = await waitFor('the pod to end', async () => {
    const pod = await podOfJob(stack, namespace, 'three');
    return pod.status?.phase === 'Failed' && pod;
  });
  const finished = (name: string) => new Date(findContainerStatus(pod, name)!.state!.terminated!.finishedAt!).getTime();
  t.ok(finished('proxy') >= finished('c'), 'the sidecar stopped after the last main container');
  t.ok(finished('c') > finished('a'), 'the main containers did finish at different times');
  t.equal(pod.spec?.ephemeralContainers?.length, 1, 'one signal');
  await expectStoppedBy(t, stack, pod, { proxy: 'signal' });
});

t.test('pods without the label, and labelled pods with restartPolicy Always, are not touched', async (t) => {
  // The add-on's own namespace is excluded from the webhook, so nothing labels pods there.
  const namespace = await cp.createNamespace('sidecar-terminator');
  const pod = (name: string, restartPolicy: string, labels: Record<string, string>) =>
    podYaml(name, [main(), killSidecar()], { labels, annotations: exitAfter('main', '1s'), spec: { restartPolicy } });
  await apply(cp, namespace, pod('unlabelled', 'Never', {}));
  await apply(cp, namespace, pod('always', 'Always', { [MANAGED_LABEL]: MANAGED }));
  await apply(cp, namespace, pod('control', 'Never', { [MANAGED_LABEL]: MANAGED }));
  await waitFor('the labelled control pod to succeed', async () => (await core.readNamespacedPod({ name: 'control', namespace })).status?.phase === 'Succeeded');
  await waitFor('the Always pod to have restarted its main container', async () =>
    (findContainerStatus(await core.readNamespacedPod({ name: 'always', namespace }), 'main')?.restartCount ?? 0) >= 2,
  );
  for (const name of ['unlabelled', 'always']) {
    const current = await core.readNamespacedPod({ name, namespace });
    t.notOk(current.spec?.ephemeralContainers, `${name}: no ephemeral container`);
    t.ok(findContainerStatus(current, 'proxy')?.state?.running, `${name}: the sidecar still runs`);
    t.same(await eventsOf(stack, namespace, name), [], `${name}: no event`);
  }
  await expectStoppedBy(t, stack, await core.readNamespacedPod({ name: 'control', namespace }), { proxy: 'signal' });
});

t.test('a sidecar that ignores SIGTERM: a Warning event after its grace period, and its quick-exit image in its place', async (t) => {
  const namespace = await cp.createNamespace();
  const annotations = { ...exitAfter('main', '1s'), [simAnnotations.onSigterm('proxy')]: 'ignore' };
  await apply(cp, namespace, jobYaml('deaf', { annotations, spec: { terminationGracePeriodSeconds: 2 }, containers: [main(), killSidecar()] }));
  await waitForJob(stack, namespace, 'deaf', 'Complete');
  const pod = await podOfJob(stack, namespace, 'deaf');
  const warning = (await eventsOf(stack, namespace, pod.metadata!.name!)).find((e) => e.type === 'Warning');
  t.match(warning, { reason: 'SidecarTerminationFailed', action: 'signal-ignored', message: /sidecar proxy still runs 2s after SIGTERM, .*; ending it from outside: its image is replaced by the quick-exit image ghcr\.io\/sidecar-terminator\/quick-exit:/ });
  t.equal(pod.spec?.containers.find((c) => c.name === 'proxy')?.image, SERVE_FLAGS.quickExitImage.default, 'the quick-exit image in its place');
  t.match(findContainerStatus(pod, 'proxy'), { restartCount: 1, state: { terminated: { exitCode: 0 } } }, 'the kubelet ran it, and it exited 0');
  t.equal(pod.spec?.ephemeralContainers?.length, 1, 'signalled once');
  await expectStoppedBy(t, stack, pod, { proxy: ['signal', 'image'] }, { warnings: ['signal-ignored'] });
});

t.test('shareProcessNamespace: the signal container is told the sidecar\'s container ID, and stops it', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('shared', { annotations: exitAfter('main', '1s'), spec: { shareProcessNamespace: true }, containers: [main(), killSidecar()] }));
  await waitForJob(stack, namespace, 'shared', 'Complete');
  const pod = await podOfJob(stack, namespace, 'shared');
  const id = findContainerStatus(pod, 'proxy')?.containerID?.replace(/^[a-z0-9-]+:\/\//, '');
  t.match(pod.spec?.ephemeralContainers?.[0]?.args, ['--grace-period=30', `--container-id=${id}`]);
  t.same((await eventsOf(stack, namespace, pod.metadata!.name!)).filter((e) => e.type === 'Warning'), [], 'no warning');
  await expectStoppedBy(t, stack, pod, { proxy: 'signal' });
});

t.test("a sidecar running as root (most do) is signalled as root: the signal image's own user could not", async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('root', { annotations: exitAfter('main', '1s'), containers: [main(), killSidecar()] }));
  await waitForJob(stack, namespace, 'root', 'Complete');
  const pod = await podOfJob(stack, namespace, 'root');
  if (apiFeatures(await kubernetesVersion()).containerUser) {
    t.same(findContainerStatus(pod, 'proxy')?.user?.linux?.uid, 0, 'the kubelet reports the sidecar runs as root');
    t.match(pod.spec?.ephemeralContainers?.[0]?.securityContext, { runAsUser: 0, capabilities: { drop: ['ALL'] }, allowPrivilegeEscalation: false, seccompProfile: { type: 'RuntimeDefault' } });
  } else {
    // The API server drops the reported user: unknown, so root with CAP_KILL alone, which can signal any user.
    t.match(pod.spec?.ephemeralContainers?.[0]?.securityContext, { runAsUser: 0, capabilities: { drop: ['ALL'], add: ['KILL'] }, allowPrivilegeEscalation: false, seccompProfile: { type: 'RuntimeDefault' } });
  }
  t.equal(findContainerStatus(pod, 'stop-proxy')?.state?.terminated?.exitCode, 0, 'the signal was allowed');
  await expectStoppedBy(t, stack, pod, { proxy: 'signal' });

  await apply(cp, namespace, jobYaml('as-user', { annotations: exitAfter('main', '1s'), spec: { securityContext: { runAsUser: 1337, runAsNonRoot: true } }, containers: [main(), killSidecar()] }));
  await waitForJob(stack, namespace, 'as-user', 'Complete');
  const asUser = await podOfJob(stack, namespace, 'as-user');
  t.match(asUser.spec?.ephemeralContainers?.[0]?.securityContext, { runAsUser: 1337, capabilities: { drop: ['ALL'] } }, "the pod's runAsUser");
  await expectStoppedBy(t, stack, asUser, { proxy: 'signal' });
});

t.test('containers proxy and stop-proxy, both marked: both stopped, no name collides', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('collide', { annotations: exitAfter('main', '1s'), containers: [main(), killSidecar('proxy'), killSidecar('stop-proxy')] }));
  await waitForJob(stack, namespace, 'collide', 'Complete');
  const pod = await podOfJob(stack, namespace, 'collide');
  const sent = pod.spec?.ephemeralContainers ?? [];
  t.same(sent.map((c) => c.targetContainerName).sort(), ['proxy', 'stop-proxy'], 'one signal container each');
  const containerNames = pod.spec!.containers.map((c) => c.name);
  t.same(sent.filter((c) => containerNames.includes(c.name)).map((c) => c.name), [], 'none named like a container');
  for (const name of ['proxy', 'stop-proxy']) t.ok(findContainerStatus(pod, name)?.state?.terminated, `${name} stopped`);
  t.same((await eventsOf(stack, namespace, pod.metadata!.name!)).filter((e) => e.type === 'Warning'), [], 'no failure');
  await expectStoppedBy(t, stack, pod, { proxy: 'signal', 'stop-proxy': 'signal' });
});

t.test('normal node, a quick-exit image that cannot be pulled: a Warning event, and the pod still ends', async (t) => {
  const namespace = await cp.createNamespace();
  const unpullable = 'registry.invalid/quick-exit:1.0';
  // OnFailure and a sidecar exiting 143 on SIGTERM: kubelet restarts it with the new image, whose pull fails forever.
  const annotations = { ...exitAfter('main', '1s'), [simAnnotations.onSigterm('logs')]: 'exit143' };
  const logs = imageSidecar('logs', unpullable);
  await apply(cp, namespace, jobYaml('unpullable', { restartPolicy: 'OnFailure', annotations, containers: [main(), logs] }));
  await waitForJob(stack, namespace, 'unpullable', 'Complete');
  const pod = await podOfJob(stack, namespace, 'unpullable');
  t.equal(pod.spec?.containers.find((c) => c.name === 'logs')?.image, unpullable, 'the image was swapped first');
  t.equal(pod.status?.phase, 'Succeeded', 'the terminal phase, from the main container');
  t.notOk(findContainerStatus(pod, 'logs')?.state?.running, 'the sidecar is stopped');
  const events = await eventsOf(stack, namespace, pod.metadata!.name!);
  t.match(events.filter((e) => e.type === 'Warning'), [
    { reason: 'SidecarTerminationFailed', action: 'quick-exit-image-not-pulled', message: new RegExp(`sidecar logs is not stopped by its quick-exit image ${unpullable}: the node cannot pull it \\((ErrImagePull|ImagePullBackOff)`) },
  ], 'one Warning event, naming the image');
  // The phase's reason until the pod has ended, then the stop record in its place.
  const condition = pod.status?.conditions?.find((c) => c.type === 'SidecarTerminated');
  if (readStopRecord(pod)) t.match(readStopRecord(pod), { phase: 'Succeeded', sidecars: [{ name: 'logs', stoppedBy: ['phase'] }] });
  else t.match(condition, { status: 'True', message: /the quick-exit image of logs cannot be pulled/ });
  // The fallback under test: its image replaced, then the pod's phase set, with the warning.
  await expectStoppedBy(t, stack, pod, { logs: 'phase' }, { warnings: ['quick-exit-image-not-pulled'] });
});

t.test('a virtual node that cannot pull the quick-exit image: a Warning event naming it, and the condition says why the pod waits', async (t) => {
  const namespace = await cp.createNamespace();
  const unpullable = 'registry.invalid/quick-exit:1.0';
  const logs = imageSidecar('logs', unpullable);
  await apply(cp, namespace, jobYaml('virtual-unpullable', { restartPolicy: 'OnFailure', annotations: { ...exitAfter('main', '1s'), [simAnnotations.onSigterm('logs')]: 'exit143' }, spec: onVirtualNode, containers: [main(), logs] }));
  const pod = await podOfJob(stack, namespace, 'virtual-unpullable');
  const waiting = await waitFor('the condition to say why the pod waits', async () => {
    const current = await core.readNamespacedPod({ name: pod.metadata!.name!, namespace });
    const condition = current.status?.conditions?.find((c) => c.type === 'SidecarTerminated');
    return condition?.status === 'False' && current;
  });
  t.match(waiting.status?.conditions?.find((c) => c.type === 'SidecarTerminated'), { reason: 'QuickExitImageNotPulled', message: new RegExp(`sidecar logs waits for its quick-exit image ${unpullable}`) });
  const warnings = (await eventsOf(stack, namespace, pod.metadata!.name!)).filter((e) => e.type === 'Warning');
  t.match(warnings, [{ reason: 'SidecarTerminationFailed', message: new RegExp(`waits for its quick-exit image ${unpullable}, which the node cannot pull`) }], 'one Warning event, naming the image');
  t.equal(waiting.status?.phase, 'Running', 'no terminal phase written on a virtual node');
});

const statusPatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
/** Plays the kubelet of a node the simulator does not run: main exited 0, the sidecar running. */
async function reportMainDone(namespace: string, name: string): Promise<void> {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const statuses = [
    { name: 'main', image: 'busybox:1.36', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: now, finishedAt: now } } },
    { name: 'proxy', image: 'envoyproxy/envoy:v1.31.0', imageID: '', ready: true, restartCount: 0, state: { running: { startedAt: now } } },
  ];
  await core.patchNamespacedPodStatus({ namespace, name, body: { status: { phase: 'Running', containerStatuses: statuses } } }, statusPatch);
}

t.test('a node that does not exist is not taken for a normal one: nothing is stopped until it is back, then by its kind', async (t) => {
  const namespace = await cp.createNamespace();
  const nodeName = `gone-${namespace}`;
  // Both markers: a normal node would kill it, a virtual node replaces its image.
  const both = killSidecar('proxy', { env: [{ name: ENV_WITH_IMAGE, value: QUICK_EXIT }] });
  await apply(cp, namespace, podYaml('orphan', [main(), both], { spec: { nodeName } }));
  await reportMainDone(namespace, 'orphan');
  const warning = await waitFor('the missing node to be reported', async () => (await eventsOf(stack, namespace, 'orphan')).find((e) => e.type === 'Warning'));
  t.match(warning.message, `the pod's node ${nodeName} does not exist`);
  const meanwhile = await core.readNamespacedPod({ namespace, name: 'orphan' });
  t.notOk(meanwhile.spec?.ephemeralContainers, 'not signalled as if on a normal node');
  t.equal(meanwhile.spec?.containers[1]?.image, 'envoyproxy/envoy:v1.31.0', 'nor its image replaced');

  // The node registers (again), as a virtual-kubelet node, before the pod garbage collector removes the pod.
  await core.createNode({ body: { metadata: { name: nodeName, labels: { type: 'virtual-kubelet' } } } });
  t.teardown(() => core.deleteNode({ name: nodeName }).catch(() => undefined));
  const replaced = await waitFor('the sidecar to be stopped by its virtual node\'s mechanism', async () => {
    const current = await core.readNamespacedPod({ namespace, name: 'orphan' });
    return current.spec?.containers[1]?.image === QUICK_EXIT && current;
  });
  t.notOk(replaced.spec?.ephemeralContainers, 'the image was replaced, no signal: the node was looked up again, not remembered as normal');
});

t.test('a pod deleted and created again under the same name is a new pod: it is stopped when its own main container is done', async (t) => {
  const namespace = await cp.createNamespace();
  const reborn = (exit: string) => podYaml('reborn', [main(), killSidecar()], { annotations: exitAfter('main', exit) });
  await apply(cp, namespace, reborn('1s'));
  const first = await waitFor('the first pod to succeed', async () => {
    const pod = await core.readNamespacedPod({ namespace, name: 'reborn' });
    return pod.status?.phase === 'Succeeded' && pod;
  });
  await expectStoppedBy(t, stack, first, { proxy: 'signal' });
  await core.deleteNamespacedPod({ namespace, name: 'reborn', body: { gracePeriodSeconds: 0 } });
  await waitFor('the first pod to be gone', async () => !(await core.listNamespacedPod({ namespace })).items.some((p) => p.metadata?.uid === first.metadata?.uid));
  await apply(cp, namespace, reborn('4s'));
  const second = await waitFor('the second pod to run', async () => {
    const pod = await core.readNamespacedPod({ namespace, name: 'reborn' });
    return pod.metadata?.uid !== first.metadata?.uid && findContainerStatus(pod, 'main')?.state?.running && pod;
  });
  t.notOk(second.spec?.ephemeralContainers, 'nothing decided for its predecessor reaches it');
  const done = await waitFor('the second pod to succeed', async () => {
    const pod = await core.readNamespacedPod({ namespace, name: 'reborn' });
    return pod.status?.phase === 'Succeeded' && pod;
  });
  t.equal(done.metadata?.uid, second.metadata?.uid);
  t.equal(done.spec?.ephemeralContainers?.length, 1, 'one signal container, its own');
  await expectStoppedBy(t, stack, done, { proxy: 'signal' });
  const events = (await eventsOf(stack, namespace, 'reborn')).filter((e) => e.reason === 'SidecarTerminator');
  t.same(events.map((e) => e.involvedObject.uid).sort(), [first.metadata!.uid!, second.metadata!.uid!].sort(), 'one announcement for each pod');
});
