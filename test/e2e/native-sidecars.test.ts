// Native sidecar migration end to end on the kubelet simulator: `serve --native-sidecars
// labelled` registered with a real API server, Jobs applied with kubectl. In a namespace labelled
// sidecar-terminator.io/native-sidecars=enabled the marked sidecars become native sidecars, which
// the (simulated) kubelet stops after the main container, and the watcher never touches the pod;
// elsewhere, and for the pods that stay as they are, the watcher stops the sidecars as before.
import { AdmissionregistrationV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, EVENT_REASONS, MANAGED_LABEL, MIGRATED_ANNOTATION, SKIPPED_ANNOTATION } from '../../src/policy/index.ts';
import { findContainerStatus, simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { apply, eventsOf, finishedByWatcher, podOfJob, startStack, waitForJob, waitForNativeSidecarsInEffect, type Stack } from '../support/stack.ts';
import { expectJobStoppedBy, expectStoppedBy } from '../support/endings.ts';
import { imageSidecar, jobYaml, killSidecar, main, podYaml } from '../support/pods.ts';

// Debug logs: the watcher says when it looked at a pod and found nothing to do.
const stack = await startStack(t, { serveArgs: ['--native-sidecars', 'labelled', '--log-level', 'debug'] });
const { cp, core } = stack;

/** A kill sidecar with a port and a readiness probe, as a proxy has: the migration keeps them. */
const proxySidecar = (name: string, extra: Partial<V1Container> = {}) =>
  killSidecar(name, { ports: [{ containerPort: 15001 }], readinessProbe: { tcpSocket: { port: 15001 } }, ...extra });
const ignoreExitCode = { env: [{ name: ENV_IGNORE_EXIT_CODE, value: 'true' }] };
const mainExits = { [simAnnotations.exitAfter('main')]: '2s' };

/** A namespace whose pods the native-sidecars webhook serves, once the API server calls it. */
async function labelledNamespace(): Promise<string> {
  const namespace = await cp.createNamespace();
  const labelled = await cp.kubectl(['label', 'namespace', namespace, 'sidecar-terminator.io/native-sidecars=enabled']);
  if (labelled.code !== 0) throw new Error(labelled.stderr);
  return namespace;
}

/** What the watcher wrote to a pod: its events, ephemeral containers, label and condition. */
async function watcherTraces(stack: Stack, namespace: string, pod: V1Pod) {
  const current = await core.readNamespacedPod({ name: pod.metadata!.name!, namespace });
  return {
    events: (await eventsOf(stack, namespace, pod.metadata!.name!)).map((e) => e.reason),
    ephemeralContainers: current.spec?.ephemeralContainers?.length ?? 0,
    label: current.metadata?.labels?.[MANAGED_LABEL],
    condition: current.status?.conditions?.find((c) => c.type === 'SidecarTerminated')?.status,
  };
}
const NO_TRACES = { events: [], ephemeralContainers: 0, label: undefined, condition: undefined };

/** The watcher's traces once it is finished with the pod (in a terminal phase, with its event). */
async function stoppedByWatcher(namespace: string, pod: V1Pod) {
  await waitFor('the watcher to be finished with the pod', async () => finishedByWatcher(stack, [await core.readNamespacedPod({ name: pod.metadata!.name!, namespace })]));
  return watcherTraces(stack, namespace, pod);
}

t.test('the registered configuration sends labelled namespaces to the native-sidecars webhook first', async (t) => {
  const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const config = await waitFor('the MutatingWebhookConfiguration', () => admission.readMutatingWebhookConfiguration({ name: 'sidecar-terminator' }));
  t.same(config.webhooks?.map((w) => [w.name, w.clientConfig.url?.replace(/^https:\/\/127\.0\.0\.1:\d+/, '')]), [
    ['native-sidecars.sidecar-terminator.io', '/native-sidecars'],
    ['mutate.sidecar-terminator.io', '/mutate'],
  ]);
  t.same(config.webhooks?.[0]?.namespaceSelector?.matchLabels, { 'sidecar-terminator.io/native-sidecars': 'enabled' });
  t.match(stack.serve.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('native sidecar migration on')), { nativeSidecars: 'labelled', kubernetes: /^v1\.\d+/ }, 'the log says it is on, and for which server');

  // Registered just after serve is ready: wait until the API server calls it.
  t.equal(await waitForNativeSidecarsInEffect(cp, await labelledNamespace()), 'proxy', 'a dry run of a pod in a labelled namespace moves its sidecar');
});

t.test('labelled namespace: the sidecars become native sidecars, the kubelet stops them, the Job completes, the watcher writes nothing', async (t) => {
  const namespace = await labelledNamespace();
  await apply(cp, namespace, jobYaml('migrated', { annotations: mainExits, containers: [proxySidecar('proxy'), main(), proxySidecar('sql-proxy', ignoreExitCode)] }));
  await waitForJob(stack, namespace, 'migrated', 'Complete');
  const pod = await podOfJob(stack, namespace, 'migrated');
  t.same(pod.spec?.containers.map((c) => c.name), ['main'], 'the main container stays');
  t.same(pod.spec?.initContainers?.map((c) => [c.name, c.restartPolicy]), [['proxy', 'Always'], ['sql-proxy', 'Always']], 'the sidecars, in order, as native sidecars');
  const proxy = pod.spec!.initContainers![0]!;
  t.same(proxy.ports?.map((p) => p.containerPort), [15001], 'ports kept');
  t.same(proxy.readinessProbe?.tcpSocket?.port, 15001, 'probes kept');
  t.same(proxy.env?.map((e) => e.name), [ENV_WHEN_JOB_EXIT], 'env kept');
  t.equal(pod.metadata?.annotations?.[MIGRATED_ANNOTATION], 'proxy,sql-proxy');
  t.equal(pod.status?.phase, 'Succeeded');
  for (const name of ['proxy', 'sql-proxy']) t.ok(findContainerStatus(pod, name)?.state?.terminated, `${name} stopped by the kubelet`);
  t.same(await watcherTraces(stack, namespace, pod), NO_TRACES, 'no event, label, ephemeral container or condition from the watcher');
  await expectStoppedBy(t, stack, pod, { proxy: 'native', 'sql-proxy': 'native' });
});

t.test('the same Job in a namespace without the label: labelled and stopped by the watcher', async (t) => {
  const namespace = await cp.createNamespace();
  await apply(cp, namespace, jobYaml('watched', { annotations: mainExits, containers: [main(), proxySidecar('proxy')] }));
  await waitForJob(stack, namespace, 'watched', 'Complete');
  const pod = await podOfJob(stack, namespace, 'watched');
  t.equal(pod.spec?.initContainers, undefined, 'nothing moved');
  t.equal(pod.metadata?.annotations?.[MIGRATED_ANNOTATION], undefined);
  t.match(await stoppedByWatcher(namespace, pod), { events: [EVENT_REASONS.stopping], ephemeralContainers: 1 });
  await expectJobStoppedBy(t, stack, namespace, 'watched', { proxy: 'signal' });
});

t.test('labelled namespace, a sidecar with a startup probe: it stays, the pod is annotated why, the watcher stops it', async (t) => {
  const namespace = await labelledNamespace();
  const probed = proxySidecar('proxy', { readinessProbe: undefined, startupProbe: { tcpSocket: { port: 15001 } } });
  await apply(cp, namespace, jobYaml('probed', { annotations: mainExits, containers: [main(), probed] }));
  await waitForJob(stack, namespace, 'probed', 'Complete');
  const pod = await podOfJob(stack, namespace, 'probed');
  t.equal(pod.spec?.initContainers, undefined);
  t.equal(pod.metadata?.annotations?.[SKIPPED_ANNOTATION], 'spec.containers[1].startupProbe: as a native sidecar, proxy would hold back the main containers until this probe succeeds');
  t.match(await stoppedByWatcher(namespace, pod), { events: [EVENT_REASONS.stopping], ephemeralContainers: 1 });
  await expectJobStoppedBy(t, stack, namespace, 'probed', { proxy: 'signal' });
});

t.test('labelled namespace, a pod template annotated native-sidecars: disabled stays with the watcher', async (t) => {
  const namespace = await labelledNamespace();
  await apply(cp, namespace, jobYaml('opted-out', { annotations: { ...mainExits, 'sidecar-terminator.io/native-sidecars': 'disabled' }, containers: [main(), proxySidecar('proxy')] }));
  await waitForJob(stack, namespace, 'opted-out', 'Complete');
  const pod = await podOfJob(stack, namespace, 'opted-out');
  t.equal(pod.spec?.initContainers, undefined);
  t.same(Object.keys(pod.metadata?.annotations ?? {}).filter((key) => key.startsWith('sidecar-terminator.io/native-sidecars-')), [], 'no migration annotation');
  t.match(await stoppedByWatcher(namespace, pod), { events: [EVENT_REASONS.stopping], ephemeralContainers: 1 }, 'stopped by the watcher');
  await expectJobStoppedBy(t, stack, namespace, 'opted-out', { proxy: 'signal' });
});

t.test('kubectl shows why a bare pod is not moved', async (t) => {
  const namespace = await labelledNamespace();
  const created = await cp.kubectl(['create', '-f', '-'], { namespace, input: podYaml('image-only', [main(), imageSidecar('logs')]) });
  t.equal(created.code, 0, created.stderr);
  t.match(created.stderr, /^Warning: not moved to native sidecars \(the watcher stops the sidecars\): spec\.containers\[1\]\.env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE\]: sidecar logs is stopped by its quick-exit image alone/m);
  const stored = await core.readNamespacedPod({ name: 'image-only', namespace });
  t.equal(stored.metadata?.labels?.[MANAGED_LABEL], 'true');
});

t.test('a migrated pod labelled managed by hand: the watcher sees it and does nothing', async (t) => {
  const namespace = await labelledNamespace();
  // The main container runs until the test ends it, so the label is there before it finishes.
  await apply(cp, namespace, jobYaml('by-hand', { containers: [main(), proxySidecar('proxy')] }));
  const pod = await waitFor('the pod to run', async () => {
    const pod = await podOfJob(stack, namespace, 'by-hand');
    return pod.status?.phase === 'Running' && pod;
  });
  const labelling = Date.now();
  const labelled = await cp.kubectl(['label', 'pod', pod.metadata!.name!, `${MANAGED_LABEL}=true`], { namespace });
  t.equal(labelled.code, 0, labelled.stderr);
  // Looked at while it runs: once it ends, the pod leaves the watch (a terminal phase) unseen.
  const looked = await waitFor('the watcher to look at the labelled pod', async () =>
    stack.serve.logs().find((l) => l.pod === `${namespace}/${pod.metadata!.name}` && l.msg === 'nothing to do' && Number(l.time) >= labelling),
  );
  t.match(looked, { reason: /sidecar/ }, 'it finds no sidecar in spec.containers');
  await stack.sim.exitContainer(namespace, pod.metadata!.name!, 'main', 0);
  await waitForJob(stack, namespace, 'by-hand', 'Complete');
  t.same(await watcherTraces(stack, namespace, pod), { ...NO_TRACES, label: 'true' }, 'the label as the user set it, and nothing else');
  await expectJobStoppedBy(t, stack, namespace, 'by-hand', { proxy: 'native' });
});
