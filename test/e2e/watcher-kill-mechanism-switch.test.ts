// The kill mechanism follows the cluster (--kill-mechanism auto), without a restart: the watcher
// starts on a cluster without OpenKruise (signal), Kruise's ContainerRecreateRequest CRD is
// installed (crr: the simulator plays kruise-daemon), then deleted (signal again). Each change is
// a log line and an event on the watcher's Lease. A pod whose sidecar was signalled before the
// change finishes with the signal: no ContainerRecreateRequest is added to it.
import { CustomObjectsApi } from '@kubernetes/client-node';
import t from 'tap';
import { EVENT_REASONS } from '../../src/policy/index.ts';
import { CRR, simAnnotations } from '../support/kubelet-simulator.ts';
import { jobYaml, killSidecar, main } from '../support/pods.ts';
import { apply, installCrrCrd, podOfJob, startStack, waitForJob } from '../support/stack.ts';
import { expectStoppedBy } from '../support/endings.ts';
import { waitFor } from '../support/wait.ts';

// The Lease lives there: a namespace that exists before serve starts (and that the webhooks skip).
const ADDON_NAMESPACE = 'default';
const stack = await startStack(t, {
  sim: { restartDelayMs: 200 },
  serveArgs: ['--namespace', ADDON_NAMESPACE, '--leader-elect', '--leader-election-duration', '6s', '--kill-mechanism', 'auto', '--kill-mechanism-check-interval', '2s'],
});
const { cp, core } = stack;
const custom = cp.kubeConfig.makeApiClient(CustomObjectsApi);

// A short grace period: the watcher looks at a signalled pod again once it is over.
const job = (name: string, annotations: Record<string, string> = {}) =>
  jobYaml(name, { annotations: { [simAnnotations.exitAfter('main')]: '1s', ...annotations }, spec: { terminationGracePeriodSeconds: 5 }, containers: [main(), killSidecar()] });
const crrsIn = async (namespace: string) => ((await custom.listNamespacedCustomObject({ ...CRR, namespace })) as { items: Array<{ metadata: { name: string } }> }).items;
const changes = () => stack.serve.logs().filter((line) => typeof line.msg === 'string' && line.msg.startsWith('kill mechanism '));
const leaseEvents = async () =>
  (await core.listNamespacedEvent({ namespace: ADDON_NAMESPACE, fieldSelector: 'involvedObject.kind=Lease,reason=KillMechanismChanged' })).items.sort((a, b) => String(a.metadata?.name).localeCompare(String(b.metadata?.name)));

t.test('no OpenKruise: signal; Kruise installed: crr, while a pod already signalled finishes with the signal; Kruise removed: signal again', async (t) => {
  const started = await waitFor('the watcher to start', async () => stack.serve.logs().find((line) => line.msg === 'watcher starting'));
  t.equal(started.killMechanism, 'signal', 'the cluster serves no ContainerRecreateRequest');
  const namespace = await cp.createNamespace();

  // A sidecar that ignores SIGTERM: its stop began with a signal container, and it is still running when Kruise arrives.
  await apply(cp, namespace, job('in-flight', { [simAnnotations.onSigterm('proxy')]: 'ignore' }));
  const inFlight = await waitFor('the in-flight pod to be signalled', async () => {
    const pod = await podOfJob(stack, namespace, 'in-flight');
    return (pod.spec?.ephemeralContainers?.length ?? 0) > 0 && pod;
  });

  await installCrrCrd(cp);
  const [toCrr] = await waitFor('the watcher to notice the ContainerRecreateRequest API', async () => changes().length > 0 && changes());
  t.match(toCrr, { previous: 'signal', killMechanism: 'crr', msg: /^kill mechanism signal -> crr: the cluster now serves apps\.kruise\.io\/v1beta1 ContainerRecreateRequest/ }, 'said in the log, with the version it speaks (Kruise v1.9.0 prefers v1beta1)');
  const [event] = await waitFor('the event on the Lease', async () => (await leaseEvents()).length > 0 && leaseEvents());
  t.match(event, { type: 'Normal', involvedObject: { kind: 'Lease', name: 'sidecar-terminator-watcher', namespace: ADDON_NAMESPACE }, message: toCrr!.msg }, 'and as an event on the Lease');

  await apply(cp, namespace, job('with-kruise'));
  await waitForJob(stack, namespace, 'with-kruise', 'Complete');
  const withKruise = await podOfJob(stack, namespace, 'with-kruise');
  t.same((await crrsIn(namespace)).map((crr) => crr.metadata.name), [`sidecar-termination-${withKruise.metadata!.uid}`], 'a new pod is stopped by a ContainerRecreateRequest, without a restart');
  t.notOk(withKruise.spec?.ephemeralContainers, 'and no signal container');
  await expectStoppedBy(t, stack, withKruise, { proxy: 'crr' });

  // The in-flight pod is reconciled after the change: its grace period ran out, the watcher says the
  // sidecar still runs and ends it from outside (its quick-exit image), as the signal mechanism does.
  await waitFor('a reconcile of the in-flight pod under crr', async () => {
    const events = await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${inFlight.metadata!.name}` });
    return events.items.some((e) => e.reason === EVENT_REASONS.failed && e.action === 'signal-ignored');
  }, { timeoutMs: 90_000 });
  await waitForJob(stack, namespace, 'in-flight', 'Complete');
  t.notOk((await crrsIn(namespace)).some((crr) => crr.metadata.name === `sidecar-termination-${inFlight.metadata!.uid}`), 'the pod signalled before the change gets no ContainerRecreateRequest: it finishes with the signal');
  const finished = await podOfJob(stack, namespace, 'in-flight');
  t.same(finished.spec?.ephemeralContainers?.map((c) => c.targetContainerName), ['proxy'], 'one signal container, nothing else');
  // Signalled, then ended from outside by the quick-exit image: the fallback of a sidecar that ignores SIGTERM.
  await expectStoppedBy(t, stack, finished, { proxy: ['signal', 'image'] }, { warnings: ['signal-ignored'] });

  const removed = await cp.kubectl(['delete', 'crd', `${CRR.plural}.${CRR.group}`]);
  t.equal(removed.code, 0, 'Kruise removed', { stderr: removed.stderr });
  const back = await waitFor('the watcher to notice the API went away', async () => changes()[1]);
  t.match(back, { previous: 'crr', killMechanism: 'signal', msg: /^kill mechanism crr -> signal: the cluster no longer serves apps\.kruise\.io ContainerRecreateRequest/ });
  await waitFor('the second event on the Lease', async () => (await leaseEvents()).length === 2);
  await apply(cp, namespace, job('without-kruise'));
  await waitForJob(stack, namespace, 'without-kruise', 'Complete');
  const withoutKruise = await podOfJob(stack, namespace, 'without-kruise');
  t.same(withoutKruise.spec?.ephemeralContainers?.map((c) => c.targetContainerName), ['proxy'], 'a new pod is signalled again');
  await expectStoppedBy(t, stack, withoutKruise, { proxy: 'signal' });
  t.equal(changes().length, 2, 'two changes, each said once');
  t.equal(stack.serve.logs().filter((line) => line.msg === 'watcher starting').length, 1, 'the watcher was never restarted');
});
