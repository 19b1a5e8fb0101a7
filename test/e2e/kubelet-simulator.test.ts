// The kubelet simulator reproduces kubelet's (and kruise-daemon's) behaviour against a real
// API server and the real Job controller. Outcomes only: Job conditions, phases, container
// states and exit codes; waits are generous, nothing is timed.
import {
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type V1Container,
  type V1EphemeralContainer,
  type V1Job,
  type V1Pod,
  type V1PodSpec,
} from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { CRR, findContainerStatus, simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { apiFeatures, kubernetesVersion } from '../support/control-plane.ts';
import { installCrrCrd, startCluster, waitForJob } from '../support/stack.ts';

const { cp, sim, core, batch } = await startCluster(t, { sim: { maxGracePeriodMs: 1000, restartDelayMs: 200 } });
const version = await kubernetesVersion();
const strategicMerge = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

const main: V1Container = { name: 'main', image: 'busybox:1.36' };
const sidecar: V1Container = {
  name: 'sidecar',
  image: 'envoy:1.30',
  env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' }],
};

t.test('Jobs and the real Job controller', async (t) => {
  t.test('a Job without sidecar completes', async (t) => {
    const namespace = await cp.createNamespace();
    await createJob(namespace, 'plain', { restartPolicy: 'Never', containers: [main], annotations: { [simAnnotations.exitAfter('main')]: '500ms' } });
    await waitForJob({ core, batch }, namespace, 'plain', 'Complete');
    const pod = await jobPod(namespace, 'plain');
    t.equal(pod.status?.phase, 'Succeeded');
    t.equal(findContainerStatus(pod, 'main')?.state?.terminated?.exitCode, 0);
  });

  t.test('a failing main container fails a Never Job with backoffLimit 0', async (t) => {
    const namespace = await cp.createNamespace();
    await createJob(namespace, 'failing', {
      restartPolicy: 'Never',
      containers: [main],
      annotations: { [simAnnotations.exitAfter('main')]: '500ms', [simAnnotations.exitCode('main')]: '3' },
    });
    await waitForJob({ core, batch }, namespace, 'failing', 'Failed');
    const pod = await jobPod(namespace, 'failing');
    t.equal(pod.status?.phase, 'Failed');
    t.equal(findContainerStatus(pod, 'main')?.state?.terminated?.exitCode, 3);
    t.equal(findContainerStatus(pod, 'main')?.state?.terminated?.reason, 'Error');
  });

  t.test('OnFailure: a main container that fails once is restarted, then the Job completes', async (t) => {
    const namespace = await cp.createNamespace();
    await createJob(namespace, 'flaky', {
      restartPolicy: 'OnFailure',
      containers: [main],
      annotations: { [simAnnotations.exitAfter('main')]: '500ms', [simAnnotations.exitCode('main')]: '1,0' },
      // The Job controller counts an OnFailure pod's container restarts against the backoff limit.
      backoffLimit: 2,
    });
    await waitForJob({ core, batch }, namespace, 'flaky', 'Complete');
    succeededAfterOneRestart(t, await jobPod(namespace, 'flaky'), 1);
  });

  const rulesSkip = !apiFeatures(version).containerRestartRules && `Kubernetes ${version.gitVersion} drops a container's restartPolicy and restartPolicyRules (1.35+)`;
  t.test('Never: a main container its own restart rule restarts after exit code 42 runs again, then the Job completes', { skip: rulesSkip }, async (t) => {
    const namespace = await cp.createNamespace();
    const restartedOn42: V1Container = { ...main, restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] };
    await createJob(namespace, 'rule', {
      restartPolicy: 'Never',
      containers: [restartedOn42],
      annotations: { [simAnnotations.exitAfter('main')]: '500ms', [simAnnotations.exitCode('main')]: '42,0' },
    });
    await waitForJob({ core, batch }, namespace, 'rule', 'Complete');
    succeededAfterOneRestart(t, await jobPod(namespace, 'rule'), 42);
  });

  t.test('a native sidecar is stopped after the main container and the Job completes', async (t) => {
    const namespace = await cp.createNamespace();
    const nativeSidecar: V1Container = { name: 'proxy', image: 'envoy:1.30', restartPolicy: 'Always' };
    await createJob(namespace, 'native', {
      restartPolicy: 'Never',
      containers: [main],
      annotations: { [simAnnotations.exitAfter('main')]: '500ms' },
      spec: { initContainers: [nativeSidecar] },
    });
    await waitForJob({ core, batch }, namespace, 'native', 'Complete');
    const pod = await jobPod(namespace, 'native');
    t.equal(findContainerStatus(pod, 'proxy')?.state?.terminated?.exitCode, 0);
    t.equal(findContainerStatus(pod, 'main')?.state?.terminated?.exitCode, 0);
  });

  t.test('a Job whose sidecar is replaced in place by a quick-exit image completes', async (t) => {
    const namespace = await cp.createNamespace();
    const imageSidecar: V1Container = {
      name: 'sidecar',
      image: 'fluent-bit:3.0',
      env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: 'example.com/exit0:1.0' }],
    };
    await createJob(namespace, 'image', { restartPolicy: 'Never', containers: [main, imageSidecar], annotations: { [simAnnotations.exitAfter('main')]: '200ms' } });
    const running = await sim.waitForPod(namespace, (pod) => isJobPod(pod, 'image') && isTerminated(pod, 'main') && isRunning(pod, 'sidecar'));
    t.equal(running.status?.phase, 'Running', 'the sidecar keeps the pod running');
    await setImage(running, 'sidecar', 'example.com/exit0:1.0');
    await waitForJob({ core, batch }, namespace, 'image', 'Complete');
    const status = findContainerStatus(await jobPod(namespace, 'image'), 'sidecar');
    t.equal(status?.image, 'example.com/exit0:1.0');
    t.equal(status?.restartCount, 1);
    t.equal(status?.state?.terminated?.exitCode, 0);
  });
});

t.test('in-place image change of a long-running container', async (t) => {
  const namespace = await cp.createNamespace();
  await createPod(namespace, 'graceful', [main, sidecar]);
  await createPod(namespace, 'stubborn', [main, sidecar], { [simAnnotations.onSigterm('sidecar')]: 'ignore' });
  for (const name of ['graceful', 'stubborn']) {
    await waitForContainer(namespace, name, 'sidecar', isRunning);
    await setImage(await core.readNamespacedPod({ name, namespace }), 'sidecar', 'registry.local/quick-exit:1');
  }

  const graceful = findContainerStatus(await waitForContainer(namespace, 'graceful', 'sidecar', isTerminated), 'sidecar');
  t.equal(graceful?.state?.terminated?.exitCode, 0, 'the quick-exit image exits 0');
  t.equal(graceful?.image, 'registry.local/quick-exit:1');
  t.equal(graceful?.restartCount, 1, 'restarted although restartPolicy is Never');
  t.equal(graceful?.lastState?.terminated?.exitCode, 0, 'the old process exited 0 on SIGTERM');

  const stubborn = findContainerStatus(await waitForContainer(namespace, 'stubborn', 'sidecar', isTerminated), 'sidecar');
  t.equal(stubborn?.state?.terminated?.exitCode, 0);
  t.equal(stubborn?.lastState?.terminated?.exitCode, 137, 'the old process ignored SIGTERM and was killed');
  t.ok(isRunning(await core.readNamespacedPod({ name: 'stubborn', namespace }), 'main'), 'the main container is untouched');
});

t.test('an in-place image that cannot be pulled: kubelet retries it when it would restart the container', async (t) => {
  const namespace = await cp.createNamespace();
  const unpullable = 'registry.invalid/quick-exit:1.0';
  const exit143 = { [simAnnotations.onSigterm('sidecar')]: 'exit143' };
  await createPod(namespace, 'on-failure', [main, sidecar], exit143, { restartPolicy: 'OnFailure' });
  await createPod(namespace, 'never', [main, sidecar], exit143);
  for (const name of ['on-failure', 'never']) {
    await waitForContainer(namespace, name, 'sidecar', isRunning);
    await setImage(await core.readNamespacedPod({ name, namespace }), 'sidecar', unpullable);
  }
  const backOff = await sim.waitForPod(namespace, (pod) => pod.metadata?.name === 'on-failure' && findContainerStatus(pod, 'sidecar')?.state?.waiting?.reason === 'ImagePullBackOff', {
    description: 'the OnFailure sidecar to wait in ImagePullBackOff',
  });
  const waiting = findContainerStatus(backOff, 'sidecar');
  t.match(waiting?.state?.waiting?.message, unpullable, 'the message names the image');
  t.equal(waiting?.lastState?.terminated?.exitCode, 143, 'the old process exited 143: OnFailure restarts it, and the pull fails, again and again');
  t.equal(backOff.status?.phase, 'Running', 'the pod never ends');

  const never = findContainerStatus(await waitForContainer(namespace, 'never', 'sidecar', isTerminated), 'sidecar');
  t.equal(never?.state?.terminated?.exitCode, 143, 'restartPolicy Never: kubelet does not try again, the container stays terminated');

  await sim.exitContainer(namespace, 'on-failure', 'main', 0);
  await core.patchNamespacedPodStatus({ name: 'on-failure', namespace, body: { status: { phase: 'Succeeded' } } }, strategicMerge);
  const ended = await sim.waitForPod(namespace, (pod) => pod.metadata?.name === 'on-failure' && pod.status?.phase === 'Succeeded');
  t.notOk(isRunning(ended, 'sidecar'), 'a terminal phase ends the retries');
});

t.test('a main container that needs a container fails the run that ends while that one is not running', async (t) => {
  const namespace = await cp.createNamespace();
  const needsSidecar = { [simAnnotations.exitAfter('main')]: '1s', [simAnnotations.needs('main')]: 'sidecar' };
  await createPod(namespace, 'served', [main, sidecar], needsSidecar);
  await createPod(namespace, 'abandoned', [main, sidecar], { ...needsSidecar, [simAnnotations.exitAfter('sidecar')]: '100ms' });

  const served = findContainerStatus(await waitForContainer(namespace, 'served', 'main', isTerminated), 'main');
  t.equal(served?.state?.terminated?.exitCode, 0, 'the sidecar ran throughout: the scripted exit code');
  const abandoned = await waitForContainer(namespace, 'abandoned', 'main', isTerminated);
  t.equal(findContainerStatus(abandoned, 'main')?.state?.terminated?.exitCode, 1, 'the sidecar was gone when the run ended');
  t.equal(findContainerStatus(abandoned, 'sidecar')?.state?.terminated?.exitCode, 0);
});

t.test('a ContainerRecreateRequest stops the container and is reported Completed', async (t) => {
  await installCrrCrd(cp);
  const namespace = await cp.createNamespace();
  await createPod(namespace, 'job-pod', [main, sidecar], { [simAnnotations.onSigterm('sidecar')]: 'exit143' });
  await waitForContainer(namespace, 'job-pod', 'sidecar', isRunning);

  const customObjects = cp.kubeConfig.makeApiClient(CustomObjectsApi);
  await customObjects.createNamespacedCustomObject({
    ...CRR,
    namespace,
    body: {
      apiVersion: `${CRR.group}/${CRR.version}`,
      kind: 'ContainerRecreateRequest',
      metadata: { name: 'stop-sidecar' },
      spec: { podName: 'job-pod', containers: [{ name: 'sidecar' }], strategy: { forceRecreate: true, failurePolicy: 'Ignore' } },
    },
  });
  const crr = await waitFor('the CRR to complete', async () => {
    const current = (await customObjects.getNamespacedCustomObject({ ...CRR, namespace, name: 'stop-sidecar' })) as {
      status?: { phase?: string; completionTime?: string; containerRecreateStates?: unknown };
    };
    return current.status?.phase === 'Completed' && current;
  });
  t.ok(crr.status?.completionTime);
  t.same(crr.status?.containerRecreateStates, [{ name: 'sidecar', phase: 'Succeeded' }]);

  const pod = await waitForContainer(namespace, 'job-pod', 'sidecar', isTerminated);
  t.equal(findContainerStatus(pod, 'sidecar')?.state?.terminated?.exitCode, 143, 'its SIGTERM reaction');
  t.equal(findContainerStatus(pod, 'sidecar')?.restartCount, 0, 'restartPolicy Never: not restarted');
  t.ok(isRunning(pod, 'main'));
});

t.test('an ephemeral container signals its target', async (t) => {
  const namespace = await cp.createNamespace();
  await createPod(namespace, 'separate', [main, sidecar]);
  await createPod(namespace, 'shared', [main, sidecar], {}, { shareProcessNamespace: true });
  for (const name of ['separate', 'shared']) {
    await waitForContainer(namespace, name, 'sidecar', isRunning);
    await core.patchNamespacedPodEphemeralcontainers(
      { name, namespace, body: { spec: { ephemeralContainers: [{ name: 'killer', image: 'sidecar-terminator:dev', targetContainerName: 'sidecar' }] } } },
      strategicMerge,
    );
  }

  const separate = await waitForContainer(namespace, 'separate', 'killer', isTerminated);
  t.equal(separate.status?.ephemeralContainerStatuses?.[0]?.state?.terminated?.exitCode, 0);
  const target = findContainerStatus(await waitForContainer(namespace, 'separate', 'sidecar', isTerminated), 'sidecar');
  t.equal(target?.state?.terminated?.exitCode, 0, 'the sidecar exited on SIGTERM');

  const shared = await waitForContainer(namespace, 'shared', 'killer', isTerminated);
  t.equal(findContainerStatus(shared, 'killer')?.state?.terminated?.exitCode, 0);
  t.ok(isRunning(shared, 'sidecar'), 'with a shared PID namespace the signal hits the pause process');
});

t.test('a signal reaches another user only from root with CAP_KILL; a refused one exits 1 with EPERM', async (t) => {
  const reportsUser = apiFeatures(version).containerUser;
  const namespace = await cp.createNamespace();
  const asUser = (uid: number): V1Container => ({ ...sidecar, securityContext: { runAsUser: uid } });
  const killer = (securityContext: V1EphemeralContainer['securityContext']): V1EphemeralContainer => ({ name: 'killer', image: 'signal:1', targetContainerName: 'sidecar', securityContext });
  const cases: Array<[string, V1Container, V1EphemeralContainer, number]> = [
    ['same-user', asUser(1000), killer({ runAsUser: 1000, capabilities: { drop: ['ALL'] } }), 0],
    ['other-user', asUser(1000), killer({ runAsUser: 2000, capabilities: { drop: ['ALL'] } }), 1],
    ['root-without-kill', asUser(1000), killer({ runAsUser: 0, capabilities: { drop: ['ALL'] } }), 1],
    ['root-with-kill', asUser(1000), killer({ runAsUser: 0, capabilities: { drop: ['ALL'], add: ['KILL'] } }), 0],
  ];
  for (const [name, target] of cases) await createPod(namespace, name, [main, target]);
  for (const [name, , ephemeral] of cases) {
    const pod = await waitForContainer(namespace, name, 'sidecar', isRunning);
    if (reportsUser) t.same(findContainerStatus(pod, 'sidecar')?.user?.linux, { uid: 1000, gid: 1000, supplementalGroups: [1000] }, `${name}: the status reports the sidecar's user`);
    else t.equal(findContainerStatus(pod, 'sidecar')?.user, undefined, `${name}: Kubernetes ${version.gitVersion} drops the user the simulator reports (its SupplementalGroupsPolicy gate is off)`);
    await core.patchNamespacedPodEphemeralcontainers({ name, namespace, body: { spec: { ephemeralContainers: [ephemeral] } } }, strategicMerge);
  }
  for (const [name, , , exitCode] of cases) {
    const pod = await waitForContainer(namespace, name, 'killer', isTerminated);
    const terminated = findContainerStatus(pod, 'killer')?.state?.terminated;
    t.equal(terminated?.exitCode, exitCode, `${name}: the signal container exits ${exitCode}`);
    if (exitCode === 0) {
      t.ok(isTerminated(await waitForContainer(namespace, name, 'sidecar', isTerminated), 'sidecar'), `${name}: the sidecar got SIGTERM`);
    } else {
      t.match(terminated?.message, /SIGTERM to PID 1 \(sidecar\) failed: operation not permitted \(EPERM/, `${name}: its output is the termination message`);
      t.ok(isRunning(await core.readNamespacedPod({ name, namespace }), 'sidecar'), `${name}: the sidecar runs on`);
    }
  }
});

t.test('a terminal phase set by someone else is kept and the remaining containers are stopped', async (t) => {
  const namespace = await cp.createNamespace();
  await createPod(namespace, 'patched', [main, sidecar], { [simAnnotations.onSigterm('sidecar')]: 'ignore' });
  await sim.exitContainer(namespace, 'patched', 'main', 0);
  await waitForContainer(namespace, 'patched', 'main', isTerminated);
  // What the watcher does for KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE sidecars.
  const sidecarTerminated = { type: 'SidecarTerminated', status: 'True', reason: 'MainContainersCompleted' };
  await core.patchNamespacedPodStatus(
    { name: 'patched', namespace, body: { status: { phase: 'Succeeded', conditions: [sidecarTerminated] } } },
    strategicMerge,
  );
  const pod = await waitForContainer(namespace, 'patched', 'sidecar', isTerminated);
  t.equal(findContainerStatus(pod, 'sidecar')?.state?.terminated?.exitCode, 137, 'ignored SIGTERM, killed after the grace period');
  t.equal(pod.status?.phase, 'Succeeded');
  const kept = pod.status?.conditions?.find((c) => c.type === sidecarTerminated.type);
  t.match(kept, sidecarTerminated, 'a condition set by others survives the status writes');
});

t.test('a deleted pod has its containers stopped and is then removed with grace period 0', async (t) => {
  const namespace = await cp.createNamespace();
  // A finalizer of the test's own holds the deleted pod, so its last status can be read.
  const hold = 'sim.sidecar-terminator.io/test-hold';
  await core.createNamespacedPod({
    namespace,
    body: { metadata: { name: 'doomed', finalizers: [hold] }, spec: { restartPolicy: 'Never', containers: [main, sidecar] } },
  });
  await waitForContainer(namespace, 'doomed', 'main', isRunning);
  await core.deleteNamespacedPod({ name: 'doomed', namespace });

  const held = await sim.waitForPod(namespace, (pod) => pod.metadata?.deletionGracePeriodSeconds === 0, {
    description: 'the deleted pod to be removed with grace period 0',
  });
  t.equal(findContainerStatus(held, 'main')?.state?.terminated?.exitCode, 0);
  t.equal(findContainerStatus(held, 'sidecar')?.state?.terminated?.exitCode, 0);
  t.equal(held.status?.phase, 'Succeeded', 'every container exited 0 on SIGTERM');

  await core.patchNamespacedPod(
    { name: 'doomed', namespace, body: { metadata: { finalizers: null } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  await waitFor('the pod to be gone', async () => (await core.listNamespacedPod({ namespace })).items.length === 0);
});

t.test('binding: virtual-kubelet pods go to the virtual node, others to a normal node', async (t) => {
  const namespace = await cp.createNamespace();
  await createPod(namespace, 'tolerates', [main], {}, {
    tolerations: [{ key: 'virtual-kubelet.io/provider', operator: 'Exists', effect: 'NoSchedule' }],
  });
  await createPod(namespace, 'selects', [main], {}, { nodeSelector: { type: 'virtual-kubelet' } });
  await createPod(namespace, 'plain', [main]);
  for (const [name, node] of [['tolerates', sim.virtualNodes[0]], ['selects', sim.virtualNodes[0]], ['plain', sim.normalNodes[0]]] as const) {
    const pod = await waitForContainer(namespace, name, 'main', isRunning);
    t.equal(pod.spec?.nodeName, node, name);
    t.ok(pod.status?.conditions?.some((c) => c.type === 'PodScheduled' && c.status === 'True'), `${name} is scheduled`);
  }
  const virtualNode = await core.readNode({ name: sim.virtualNodes[0] ?? '' });
  t.equal(virtualNode.metadata?.labels?.type, 'virtual-kubelet');
  t.same(virtualNode.spec?.taints?.map((taint) => `${taint.key}=${taint.value}:${taint.effect}`), ['virtual-kubelet.io/provider=mock:NoSchedule']);
});

t.test('the simulator keeps working across an API server restart', async (t) => {
  const namespace = await cp.createNamespace();
  await createPod(namespace, 'before', [main]);
  await waitForContainer(namespace, 'before', 'main', isRunning);
  await cp.restartApiServer();

  await sim.exitContainer(namespace, 'before', 'main', 0);
  await waitForContainer(namespace, 'before', 'main', isTerminated);
  await createPod(namespace, 'after', [main], { [simAnnotations.exitAfter('main')]: '200ms' });
  const after = await sim.waitForPod(namespace, (pod) => pod.metadata?.name === 'after' && pod.status?.phase === 'Succeeded');
  t.equal(findContainerStatus(after, 'main')?.state?.terminated?.exitCode, 0, 'a pod created after the restart runs');
});

interface JobPlan {
  restartPolicy: 'Never' | 'OnFailure';
  containers: V1Container[];
  annotations: Record<string, string>;
  backoffLimit?: number;
  spec?: Partial<V1PodSpec>;
}

async function createJob(namespace: string, name: string, plan: JobPlan): Promise<void> {
  const { restartPolicy, containers, annotations, backoffLimit = 0, spec = {} } = plan;
  const job: V1Job = {
    metadata: { name },
    spec: { backoffLimit, template: { metadata: { annotations }, spec: { restartPolicy, containers, ...spec } } },
  };
  await batch.createNamespacedJob({ namespace, body: job });
}

async function createPod(
  namespace: string,
  name: string,
  containers: V1Container[],
  annotations: Record<string, string> = {},
  spec: Partial<V1PodSpec> = {},
): Promise<void> {
  await core.createNamespacedPod({ namespace, body: { metadata: { name, annotations }, spec: { restartPolicy: 'Never', containers, ...spec } } });
}

async function jobPod(namespace: string, job: string): Promise<V1Pod> {
  return sim.waitForPod(namespace, (pod) => isJobPod(pod, job), { description: `the pod of Job ${job}` });
}

function waitForContainer(namespace: string, podName: string, container: string, state: (pod: V1Pod, container: string) => boolean): Promise<V1Pod> {
  return sim.waitForPod(namespace, (pod) => pod.metadata?.name === podName && state(pod, container), {
    description: `container ${container} of pod ${podName} to be ${state.name}`,
  });
}

/** The pod succeeded; its main container ran twice: the first run exited with this code, the second 0. */
function succeededAfterOneRestart(t: Test, pod: V1Pod, firstExitCode: number): void {
  const status = findContainerStatus(pod, 'main');
  t.equal(pod.status?.phase, 'Succeeded');
  t.equal(status?.restartCount, 1, `restarted once, under the pod's restartPolicy ${pod.spec?.restartPolicy}`);
  t.equal(status?.lastState?.terminated?.exitCode, firstExitCode);
  t.equal(status?.state?.terminated?.exitCode, 0);
}

function isJobPod(pod: V1Pod, job: string): boolean {
  return pod.metadata?.labels?.['job-name'] === job;
}

function isRunning(pod: V1Pod, container: string): boolean {
  return !!findContainerStatus(pod, container)?.state?.running;
}

function isTerminated(pod: V1Pod, container: string): boolean {
  return !!findContainerStatus(pod, container)?.state?.terminated;
}

async function setImage(pod: V1Pod, container: string, image: string): Promise<void> {
  const { name = '', namespace = '' } = pod.metadata ?? {};
  await core.patchNamespacedPod({ name, namespace, body: { spec: { containers: [{ name: container, image }] } } }, strategicMerge);
}

