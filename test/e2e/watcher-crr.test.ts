// The watcher on the CRR mechanism: OpenKruise's ContainerRecreateRequest CRD is installed, so
// `auto` must pick it; the simulator plays kruise-daemon. The CRD is Kruise v1.9.0's, serving
// v1alpha1 and v1beta1: the watcher writes the version the cluster prefers, and v1alpha1 once
// that is the only one served (OpenKruise up to v1.8). Also: the watcher restarted in the
// middle of a burst of finishing Jobs loses none and duplicates none.
import t from 'tap';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { CRR, findContainerStatus, simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { apply, eventsOf, podOfJob, startStack, waitForJob, waitForJobsComplete } from '../support/stack.ts';
import { expectJobStoppedBy, expectStoppedBy } from '../support/endings.ts';
import { jobYaml, killSidecar, main, sidecarMarked } from '../support/pods.ts';

const stack = await startStack(t, { installCrrCrd: true, sim: { restartDelayMs: 200 } });
const { cp } = stack;
const custom = cp.kubeConfig.makeApiClient(CustomObjectsApi);

interface Crr {
  metadata: { name: string; labels?: Record<string, string>; ownerReferences?: Array<Record<string, unknown>>; managedFields?: Array<{ apiVersion?: string; fieldsV1?: unknown }> };
  spec: { podName: string; containers: Array<{ name: string }>; strategy: { forceRecreate: boolean; failurePolicy: string } };
  status?: { phase?: string };
}

const listCrrs = async (namespace: string): Promise<Crr[]> =>
  ((await custom.listNamespacedCustomObject({ group: CRR.group, version: CRR.version, namespace, plural: CRR.plural })) as { items: Crr[] }).items;

const containers = [main(), killSidecar('proxy'), sidecarMarked('TRUE', 'sql', { image: 'gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.0' })];

t.test('auto picks the CRR mechanism when the cluster serves the Kruise CRD', async (t) => {
  const started = await waitFor('the watcher start log', async () => stack.serve.logs().find((l) => l.msg === 'watcher starting'));
  t.equal(started.killMechanism, 'crr');
});

t.test('one ContainerRecreateRequest per pod, owned by it, stops every kill sidecar', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('crr', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers }));
  await waitForJob(stack, namespace, 'crr', 'Complete');
  const pod = await podOfJob(stack, namespace, 'crr');
  const crrs = await listCrrs(namespace);
  t.equal(crrs.length, 1);
  t.match(crrs[0], {
    metadata: { name: `sidecar-termination-${pod.metadata!.uid}`, ownerReferences: [{ kind: 'Pod', name: pod.metadata!.name, uid: pod.metadata!.uid }] },
    spec: { podName: pod.metadata!.name, strategy: { forceRecreate: true, failurePolicy: 'Ignore' } },
    status: { phase: 'Completed' },
  });
  t.same(crrs[0]!.spec.containers.map((c) => c.name).sort(), ['proxy', 'sql']);
  // Stored as Kruise's controller stores it (the API server prunes what Kruise's schema lacks).
  const { name, uid } = pod.metadata!;
  t.same(crrs[0]!.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Pod', name, uid, controller: true, blockOwnerDeletion: true }], 'metav1.NewControllerRef(pod)');
  t.notOk(crrs[0]!.metadata.labels, "no labels of ours (Kruise's CRR webhook adds its own)");
  t.same(crrs[0]!.spec, { podName: name, containers: [{ name: 'proxy' }, { name: 'sql' }], strategy: { failurePolicy: 'Ignore', forceRecreate: true } }, 'exactly these spec fields');
  t.notOk(pod.spec?.ephemeralContainers, 'no signal when CRR is used');
  const events = await eventsOf(stack, namespace, name!);
  t.match(events, [{ reason: 'SidecarTerminator', action: 'stop-requested', related: { kind: 'ContainerRecreateRequest', name: `sidecar-termination-${uid}`, namespace } }], 'the event names the request as its related object');
  t.ok(findContainerStatus(pod, 'proxy')?.state?.terminated && findContainerStatus(pod, 'sql')?.state?.terminated);
  await expectStoppedBy(t, stack, pod, { proxy: 'crr', sql: 'crr' });
});

t.test('the watcher restarted in the middle of a burst of 200 finishing Jobs', async (t) => {
  const namespace = await cp.createNamespace();
  const count = 200;
  // The main containers run until the test ends them: when the burst starts and how much of it
  // the first watcher sees is set here, not by how fast a loaded machine creates 200 pods.
  const manifests = Array.from({ length: count }, (_, i) => jobYaml(`burst-${i}`, { annotations: { [simAnnotations.exitAfter('main')]: 'never' }, containers })).join('\n---\n');
  await apply(cp, namespace, manifests);
  // The burst is of finishing Jobs: every pod exists before the watcher goes down (with the
  // webhook's failurePolicy Fail, pods cannot be created while it is down).
  const running = await waitFor(`${count} running labelled pods`, async () => {
    const pods = (await stack.core.listNamespacedPod({ namespace, labelSelector: 'sidecar-terminator.io/managed' })).items;
    return pods.length === count && pods.every((pod) => pod.status?.phase === 'Running') && pods;
  }, { timeoutMs: 180_000, intervalMs: 1000 });
  const finish = (pods: typeof running) => Promise.all(pods.map((pod) => stack.sim.exitContainer(namespace, pod.metadata!.name!, 'main', 0)));

  // A first part of the burst, then the watcher killed hard once it has handled some; the rest
  // finishes while it is down, and it is started again.
  await finish(running.slice(0, 40));
  await waitFor('the first CRRs of the burst', async () => (await listCrrs(namespace)).length >= 10, { timeoutMs: 120_000 });
  const killed = stack.serve;
  process.kill(killed.pid, 'SIGKILL');
  await killed.exited;
  const handledWhileDown = (await listCrrs(namespace)).length;
  await finish(running.slice(40));
  await stack.restartServe();

  await waitForJobsComplete(t, stack, namespace, count, async () => `${(await listCrrs(namespace)).length} CRRs`, 300_000);
  const crrs = await listCrrs(namespace);
  const pods = new Set(crrs.map((crr) => crr.spec.podName));
  t.ok(handledWhileDown < count, `the restart happened mid-burst (${handledWhileDown} of ${count} handled before it)`);
  t.equal(crrs.length, count, 'one CRR per pod');
  t.equal(pods.size, count, 'no pod got two CRRs');
  const ended = (await stack.core.listNamespacedPod({ namespace })).items;
  const pendingPods = ended.filter((p) => p.status?.phase !== 'Succeeded');
  t.same(pendingPods.map((p) => p.metadata?.name), [], 'every pod succeeded');
  // By its ContainerRecreateRequest, and announced, whichever watcher made it.
  for (const pod of ended) await expectStoppedBy(t, stack, pod, { proxy: 'crr', sql: 'crr' });
});

/** The apiVersion the CRR's spec was written with: its managedFields keep the version of each write. */
const createdAs = (crr: Crr) => crr.metadata.managedFields?.find((entry) => JSON.stringify(entry.fieldsV1 ?? {}).includes('"f:spec"'))?.apiVersion;

t.test("the CRR is written in the version the cluster prefers: v1beta1 with OpenKruise v1.9.0's CRD", async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('beta', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers }));
  await waitForJob(stack, namespace, 'beta', 'Complete');
  const [crr] = await listCrrs(namespace);
  t.equal(createdAs(crr!), `${CRR.group}/v1beta1`, 'created through apps.kruise.io/v1beta1');
  t.same(crr!.spec.containers.map((c) => c.name).sort(), ['proxy', 'sql'], 'and read back through v1alpha1 (the simulator, as an older kruise-daemon) the same');
  await expectJobStoppedBy(t, stack, namespace, 'beta', { proxy: 'crr', sql: 'crr' });
});

t.test('a cluster that serves ContainerRecreateRequest in v1alpha1 only (OpenKruise up to v1.8): the watcher writes v1alpha1', async (t) => {
  // v1alpha1 becomes the stored version and v1beta1 is no longer served, as in Kruise v1.8's CRD.
  const patch = JSON.stringify([
    { op: 'replace', path: '/spec/versions/0/storage', value: true },
    { op: 'replace', path: '/spec/versions/1/storage', value: false },
    { op: 'replace', path: '/spec/versions/1/served', value: false },
  ]);
  const patched = await cp.kubectl(['patch', 'crd', `${CRR.plural}.${CRR.group}`, '--type=json', '-p', patch]);
  t.equal(patched.code, 0, patched.stderr);
  await waitFor('discovery to drop v1beta1', async () => {
    const group = await cp.kubectl(['get', '--raw', `/apis/${CRR.group}`]);
    return group.code === 0 && !group.stdout.includes('v1beta1') && group.stdout.includes('v1alpha1');
  });
  // The version is chosen when the watcher starts.
  await stack.serve.stop();
  await stack.restartServe();
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('alpha', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers }));
  await waitForJob(stack, namespace, 'alpha', 'Complete');
  const [crr] = await listCrrs(namespace);
  t.equal(createdAs(crr!), `${CRR.group}/v1alpha1`, 'created through apps.kruise.io/v1alpha1');
  await expectJobStoppedBy(t, stack, namespace, 'alpha', { proxy: 'crr', sql: 'crr' });
});
