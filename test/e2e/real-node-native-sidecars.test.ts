// Native sidecar migration on a real node: kubelet, containerd and runc run the pod. In a
// namespace labelled sidecar-terminator.io/native-sidecars=enabled, a Job's marked sidecars become
// native sidecars: they start before the main container, the kubelet sends them SIGTERM once it
// has exited, and the Job completes with nothing from the watcher on the pod. The watcher runs with
// the crr mechanism (the CRD is installed, no kruise-daemon), so a ContainerRecreateRequest would
// show it acted: the same Job in a namespace without the label gets one. And a mutating webhook
// that rewrites init containers as one built on a client library older than native sidecars does,
// dropping restartPolicy: Always: called once, what it dropped is put back and the Job completes;
// called again after the add-on (reinvocationPolicy IfNeeded), the pods are refused, naming it.
import t from 'tap';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, MANAGED_LABEL, MIGRATED_ANNOTATION } from '../../src/policy/index.ts';
import { expectJobStoppedBy } from '../support/endings.ts';
import { startInitContainerRewriter } from '../support/injector.ts';
import { scrape, sumSamples } from '../support/metrics.ts';
import { findContainerStatus } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { containerLog, startRealStack, testContainer } from '../support/real-stack.ts';
import { apply, eventsOf, installCrrCrd, podOfJob, waitForJob, waitForNativeSidecarsInEffect } from '../support/stack.ts';
import { jobYaml } from '../support/pods.ts';


/** A main container that works two seconds; a sidecar that exits 0 on SIGTERM, and one that exits 143 but whose exit code is ignored. */
const containers = [
  testContainer('main', ['main', '--sleep', '2s']),
  testContainer('sidecar', ['sidecar'], [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }]),
  testContainer('sql-proxy', ['sidecar', '--on-term', '143'], [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, { name: ENV_IGNORE_EXIT_CODE, value: 'true' }]),
];

if (canRunRealNode(t)) {
  // The rewriting webhooks are there before serve starts, as in a cluster the add-on joins: its first read of them names them.
  const rewritten = { once: '', again: '' };
  const stack = await startRealStack(t, {
    node: { images: ['test-container'] },
    beforeServe: async ({ cp }) => {
      await installCrrCrd(cp);
      for (const [namespace, policy] of [['once', 'Never'], ['again', 'IfNeeded']] as const) {
        rewritten[namespace] = await cp.createNamespace();
        await cp.kubectl(['label', 'namespace', rewritten[namespace], 'sidecar-terminator.io/native-sidecars=enabled']);
        await startInitContainerRewriter(t, cp, rewritten[namespace], policy);
      }
    },
    // crr asked for: with auto, a node without a ready kruise-daemon pod is signalled instead.
    serveArgs: ['--native-sidecars', 'labelled', '--kill-mechanism', 'crr'],
  });
  const { cp } = stack;

  const crrs = async (namespace: string) => {
    const listed = await cp.kubectl(['get', 'containerrecreaterequests.apps.kruise.io', '-o', 'name'], { namespace });
    if (listed.code !== 0) throw new Error(listed.stderr);
    return listed.stdout.split('\n').filter(Boolean);
  };

  t.test('setup: the watcher uses crr, and the API server calls the native-sidecars webhook', async (t) => {
    const started = await waitFor('the watcher start log', async () => stack.serve.logs().find((l) => l.msg === 'watcher starting'));
    t.equal(started.killMechanism, 'crr');
    const namespace = await cp.createNamespace();
    await cp.kubectl(['label', 'namespace', namespace, 'sidecar-terminator.io/native-sidecars=enabled']);
    // Registered just after serve is ready: a server-side dry run shows when the API server calls it.
    t.equal(await waitForNativeSidecarsInEffect(cp, namespace), 'proxy');
  });

  t.test('labelled namespace: the sidecars run as native sidecars, the kubelet stops them with SIGTERM, the Job completes, the watcher writes nothing', { buffered: true }, async (t) => {
    const namespace = await cp.createNamespace();
    await cp.kubectl(['label', 'namespace', namespace, 'sidecar-terminator.io/native-sidecars=enabled']);
    await apply(cp, namespace, jobYaml('native', { containers }));
    await waitForJob(stack, namespace, 'native', 'Complete', 180_000);
    const pod = await podOfJob(stack, namespace, 'native');
    const podName = pod.metadata!.name!;
    t.same(pod.spec?.initContainers?.map((c) => [c.name, c.restartPolicy]), [['sidecar', 'Always'], ['sql-proxy', 'Always']], 'native sidecars, in order');
    t.same(pod.spec?.containers.map((c) => c.name), ['main']);
    t.equal(pod.metadata?.annotations?.[MIGRATED_ANNOTATION], 'sidecar,sql-proxy');
    t.equal(pod.status?.phase, 'Succeeded', 'the sidecar exiting 143 does not count');

    const sidecar = findContainerStatus(pod, 'sidecar');
    const sqlProxy = findContainerStatus(pod, 'sql-proxy');
    const main = findContainerStatus(pod, 'main');
    t.equal(sidecar?.state?.terminated?.exitCode, 0, 'kubelet reports the sidecar terminated, exit 0');
    t.equal(sqlProxy?.state?.terminated?.exitCode, 143, 'and the other one, exit 143');
    t.equal(sidecar?.restartCount, 0, 'never restarted');
    t.ok(sidecar!.state!.terminated!.startedAt! <= main!.state!.terminated!.startedAt!, 'the sidecar started before the main container');
    t.ok(sidecar!.state!.terminated!.finishedAt! >= main!.state!.terminated!.finishedAt!, 'and stopped after it finished');
    t.match(await containerLog(cp, namespace, podName, 'sidecar'), /uid=0 sidecar: received SIGTERM, exiting with code 0/, 'the sidecar logged the SIGTERM the kubelet sent');

    const current = await stack.core.readNamespacedPod({ name: podName, namespace });
    t.same((await eventsOf(stack, namespace, podName)).map((e) => e.reason), [], 'no event from the add-on');
    t.equal(current.metadata?.labels?.[MANAGED_LABEL], undefined, 'no managed label');
    t.equal(current.spec?.ephemeralContainers, undefined, 'no ephemeral container');
    t.equal(current.status?.conditions?.find((c) => c.type === 'SidecarTerminated'), undefined, 'no condition');
    t.same(await crrs(namespace), [], 'no ContainerRecreateRequest');
    await expectJobStoppedBy(t, stack, namespace, 'native', { sidecar: 'native', 'sql-proxy': 'native' });
  });

  t.test('a later webhook on an old client drops restartPolicy: Always: put back when the add-on is called again, the Job completes with native sidecars', { buffered: true }, async (t) => {
    const namespace = rewritten.once;
    const restoredBefore = sumSamples(await scrape(`${stack.serve.url}/metrics`), 'sidecar_terminator_native_sidecar_pods_total', { result: 'restored' });
    await apply(cp, namespace, jobYaml('rewritten', { containers }));
    await waitForJob(stack, namespace, 'rewritten', 'Complete', 180_000);
    const pod = await podOfJob(stack, namespace, 'rewritten');
    t.same(pod.spec?.initContainers?.map((c) => [c.name, c.restartPolicy]), [['sidecar', 'Always'], ['sql-proxy', 'Always']], 'native sidecars, as the first call left them');
    t.equal(pod.metadata?.annotations?.[MIGRATED_ANNOTATION], 'sidecar,sql-proxy');
    const restored = sumSamples(await scrape(`${stack.serve.url}/metrics`), 'sidecar_terminator_native_sidecar_pods_total', { result: 'restored' });
    t.ok(restored > restoredBefore, `counted as restored (${restoredBefore} before, ${restored} after)`);
    await expectJobStoppedBy(t, stack, namespace, 'rewritten', { sidecar: 'native', 'sql-proxy': 'native' });
  });

  t.test('a later webhook called again after the add-on drops it for good: the pods are refused, naming that webhook, and the Job says so', { buffered: true }, async (t) => {
    const namespace = rewritten.again;
    await apply(cp, namespace, jobYaml('refused', { containers }));
    const event = await waitFor(
      "the Job controller's FailedCreate event",
      async () => (await stack.core.listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.kind=Job,involvedObject.name=refused' })).items.find((e) => e.reason === 'FailedCreate'),
      { timeoutMs: 60_000 },
    );
    t.match(event.message, /admission webhook "validate\.sidecar-terminator\.io" denied the request: 2 native sidecars lost: spec\.initContainers\[0\]\.restartPolicy: Required value: sidecar was moved here as a native sidecar/);
    t.match(event.message, /; the mutating webhooks for pods called again after the others \(reinvocationPolicy IfNeeded\), one of which dropped it: zz-old-client-ifneeded\/rewrite-init\.ifneeded\.example\.com$/, 'naming the webhook that dropped it');
    const pods = await stack.core.listNamespacedPod({ namespace });
    t.same(pods.items, [], 'no pod was created');
  });

  t.test('the same Job in a namespace without the label: the watcher asks for a ContainerRecreateRequest', { buffered: true }, async (t) => {
    const namespace = await cp.createNamespace();
    await apply(cp, namespace, jobYaml('watched', { containers }));
    const found = await waitFor('a ContainerRecreateRequest', async () => (await crrs(namespace)).at(0), { timeoutMs: 180_000 });
    t.match(found, /sidecar-termination-/, 'so the check above would have seen one');
    const pod = await podOfJob(stack, namespace, 'watched');
    t.equal(pod.spec?.initContainers, undefined, 'nothing moved');
    t.equal(pod.metadata?.labels?.[MANAGED_LABEL], 'true');
  });
}
