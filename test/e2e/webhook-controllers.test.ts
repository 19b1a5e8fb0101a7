// Workloads OpenKruise runs keep running when the add-on arrives, on a real control plane with
// the kubelet simulator: a Job and a CronJob created before the add-on, with a configuration
// Kruise accepts and finishes but the rules flag (the sidecar's KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE
// is "yes", which counts as "false"); a sidecar injected by a mutating webhook ordered after
// ours, with the matchConditions of serve --register-webhooks and then of the chart in force; a
// marker listed twice.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, type V1Container } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT } from '../../src/policy/index.ts';
import { render } from '../chart/helm.ts';
import { startInjector } from '../support/injector.ts';
import { simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { registeringWebhooks, startServe } from '../support/serve-process.ts';
import { finishedByWatcher, podsOfJob, startCluster, waitForJob } from '../support/stack.ts';
import { expectJobStoppedBy, expectStoppedBy } from '../support/endings.ts';
import { cronJobYaml, jobYaml, main, sidecarMarked, type JobOptions } from '../support/pods.ts';

const cluster = await startCluster(t);
const { cp, core, batch } = cluster;
const namespace = await cp.createNamespace();

const kubectl = (args: string[], input?: string) => cp.kubectl(args, { namespace, ...(input ? { input } : {}) });
const JOB_WAIT = { timeoutMs: 120_000, intervalMs: 500 };

/** Accepted and finished by OpenKruise (a sidecar, killed; "yes" counts as "false"), an error here. */
const KRUISE_ACCEPTS = sidecarMarked('true', 'proxy', { env: [{ name: ENV_IGNORE_EXIT_CODE, value: 'yes' }] });
const FINDING = `containers[1].env[${ENV_IGNORE_EXIT_CODE}]: Invalid value: "yes": must be "true" or "false"`;

/** A Job's pods: a main container that exits 0 after a second, and `sidecar` if given. */
const jobPods = (sidecar?: V1Container): JobOptions => ({
  annotations: { [simAnnotations.exitAfter('main')]: '1s' },
  containers: sidecar ? [main(), sidecar] : [main()],
});
const job = (name: string, sidecar?: V1Container) => jobYaml(name, jobPods(sidecar));

async function ownerEvents(kind: string, name: string) {
  const events = await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name}` });
  return events.items.filter((event) => event.reason === 'InvalidSidecarConfiguration');
}

// Before the add-on: a Job whose pod runs, unlabelled, and a CronJob, suspended so that its first
// Job is created once the add-on runs (a schedule alone would race with the start below).
const created = await kubectl(['apply', '-f', '-'], job('before-install', KRUISE_ACCEPTS));
if (created.code !== 0) throw new Error(created.stderr);
const cronJob = await kubectl(['apply', '-f', '-'], cronJobYaml('nightly', { schedule: '* * * * *', suspend: true, concurrencyPolicy: 'Forbid' }, jobPods(KRUISE_ACCEPTS)));
if (cronJob.code !== 0) throw new Error(cronJob.stderr);
await waitFor('the pod of before-install to run', async () => (await podsOfJob(cluster, namespace, 'before-install'))[0]?.status?.phase === 'Running', JOB_WAIT);

// Then the add-on, webhook and watcher, registered with the API server.
const certDir = await mkdtemp(join(tmpdir(), 'st-e2e-certs-'));
t.teardown(() => rm(certDir, { recursive: true, force: true }));
const serve = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, ...registeringWebhooks(port, 'Fail')]);
t.teardown(() => serve.stop());
// Ready once it listens, registered just after, picked up by the API server a moment later.
await waitFor('the API server to call the webhook', async () => {
  const dryRun = await kubectl(['create', '--dry-run=server', '-f', '-'], job('dry-run', KRUISE_ACCEPTS));
  return dryRun.code !== 0 && dryRun.stderr.includes('denied the request');
});

t.test('a Job that ran before the add-on was installed completes: its pod is labelled, as its controller made it', async (t) => {
  await waitForJob(cluster, namespace, 'before-install', 'Complete', JOB_WAIT.timeoutMs);
  const pod = await waitFor('the watcher to be finished with the pod', async () => finishedByWatcher(cluster, await podsOfJob(cluster, namespace, 'before-install')));
  t.equal(pod.status?.phase, 'Succeeded', 'labelled by the sweeper (its Job created it), stopped by the watcher');
  // "yes" counts as "false": its exit code is not ignored, so no phase is set.
  await expectStoppedBy(t, cluster, pod, { proxy: 'signal' });
});

t.test('the same Job written by a person now is denied, with the field and the fix', async (t) => {
  const result = await kubectl(['apply', '-f', '-'], job('by-hand', KRUISE_ACCEPTS));
  t.not(result.code, 0);
  t.match(result.stderr, 'admission webhook "validate.sidecar-terminator.io" denied the request');
  t.match(result.stderr, `spec.template.spec.${FINDING}`);
});

t.test("the CronJob's next Job and its pods are created, the Job completes, and the warning event is on the CronJob's Job", async (t) => {
  const resumed = await kubectl(['patch', 'cronjob', 'nightly', '--type=merge', '-p', '{"spec":{"suspend":false}}']);
  t.equal(resumed.code, 0, 'a person may still edit the CronJob: the error was there before', { stderr: resumed.stderr });
  t.match(resumed.stderr, `Warning: spec.jobTemplate.spec.template.spec.${FINDING}`);

  const first = await waitFor('a Job of the CronJob', async () => {
    const jobs = await batch.listNamespacedJob({ namespace });
    return jobs.items.find((item) => item.metadata?.ownerReferences?.some((owner) => owner.kind === 'CronJob' && owner.name === 'nightly' && owner.controller));
  }, { timeoutMs: 150_000, intervalMs: 1000 });
  const name = first.metadata!.name!;
  await waitForJob(cluster, namespace, name, 'Complete', JOB_WAIT.timeoutMs);
  const pod = await waitFor('the watcher to be finished with the pod', async () => finishedByWatcher(cluster, await podsOfJob(cluster, namespace, name)));
  t.equal(pod.status?.phase, 'Succeeded', 'labelled at admission, handled by the watcher');
  await expectStoppedBy(t, cluster, pod, { proxy: 'signal' });
  await kubectl(['patch', 'cronjob', 'nightly', '--type=merge', '-p', '{"spec":{"suspend":true}}']);

  const [onJob, ...more] = await waitFor(`the event on Job ${name}`, async () => {
    const events = await ownerEvents('Job', name);
    return events.length > 0 && events;
  });
  t.same(more, [], 'one event, not one per pod');
  t.equal(onJob?.type, 'Warning');
  t.equal(onJob?.involvedObject.uid, first.metadata!.uid);
  // The finding without the value: the event's words are the add-on's, never the object's.
  const withoutValue = FINDING.replace(': "yes"', '');
  t.match(onJob?.message, new RegExp(`^A Pod created by this Job was admitted with 1 sidecar configuration error, .*spec\\.${withoutValue.replaceAll(/[[\]().]/g, '\\$&')}.*Fix the pod template it was created from\\.$`));
  const onCronJob = await waitFor('the event on the CronJob', async () => (await ownerEvents('CronJob', 'nightly'))[0]);
  t.match(onCronJob.message, new RegExp(`^A Job created by this CronJob was admitted with 1 sidecar configuration error, .*spec\\.template\\.spec\\.`));
  t.equal(onCronJob.source?.component, 'sidecar-terminator');
});

t.test('a marked sidecar injected by a mutating webhook ordered after ours: the pod is labelled, the Job completes', async (t) => {
  await injectedSidecarStopped(t, 'sidecar-terminator');
});

/**
 * A Job without a sidecar, in a namespace where an injector adds a marked one after our mutating
 * webhook (configuration `ours`) has seen the pod: the pod is still labelled, on reinvocation.
 */
async function injectedSidecarStopped(t: Test, ours: string): Promise<void> {
  const injected = await cp.createNamespace();
  const injector = await startInjector(t, cp, injected, { name: 'log-agent', image: 'fluent/fluent-bit:3.1', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }] });
  t.ok(injector.configurationName > ours, 'the API server calls mutating webhooks in the order of their configuration names');

  const applied = await cp.kubectl(['apply', '-f', '-'], { namespace: injected, input: job('injected') });
  t.equal(applied.code, 0, 'applied', { stderr: applied.stderr });
  t.ok(await waitForJob(cluster, injected, 'injected', 'Complete', JOB_WAIT.timeoutMs));
  const pod = await waitFor('the watcher to be finished with the pod', async () =>
    finishedByWatcher(cluster, await podsOfJob(cluster, injected, 'injected')),
  );
  t.same(pod.spec?.containers.map((c) => c.name), ['main', 'log-agent'], 'the injector added its sidecar; labelled at admission');
  t.same(pod.spec?.ephemeralContainers?.map((c) => c.targetContainerName), ['log-agent'], 'the injected sidecar was stopped');
  await expectStoppedBy(t, cluster, pod, { 'log-agent': 'signal' });
  t.ok(injector.calls() >= 1, 'the injector was called');
  const mutations = serve.logs().filter((line) => line.endpoint === 'mutate' && line.namespace === injected && !line.dryRun).map((line) => line.result);
  t.same(mutations, ['allowed', 'patched'], 'called before the injection (nothing to label: the pod can finish, so matchConditions let it through), then again after it (labelled)');
}

t.test('a marker listed twice, "true" then "false": a warning at admission, and the sidecar is stopped', async (t) => {
  const result = await kubectl(['apply', '-f', '-'], job('twice', sidecarMarked('true', 'proxy', { env: [{ name: ENV_WHEN_JOB_EXIT, value: 'false' }] })));
  t.equal(result.code, 0, 'created', { stderr: result.stderr });
  t.match(result.stderr, `Warning: spec.template.spec.containers[1].env[${ENV_WHEN_JOB_EXIT}]: Duplicate value: "${ENV_WHEN_JOB_EXIT}": defined 2 times in this container; one of them is "true", so the container is a sidecar`);
  await waitForJob(cluster, namespace, 'twice', 'Complete', JOB_WAIT.timeoutMs);
  const [pod] = await podsOfJob(cluster, namespace, 'twice');
  t.same(pod?.spec?.ephemeralContainers?.map((c) => c.targetContainerName), ['proxy'], 'stopped, as OpenKruise would');
  t.equal(pod?.status?.phase, 'Succeeded');
  await expectJobStoppedBy(t, cluster, namespace, 'twice', { proxy: 'signal' });
});

t.test("the same with the chart's webhook configurations, matchConditions and all, in place of the ones serve registered", async (t) => {
  const deleted = await cp.kubectl(['delete', 'mutatingwebhookconfiguration,validatingwebhookconfiguration', 'sidecar-terminator']);
  t.equal(deleted.code, 0, "serve's own configurations are gone", { stderr: deleted.stderr });
  const rendered = await render({ webhook: { failurePolicy: 'Fail' } }, { release: 'chart', namespace: 'sidecar-terminator' });
  const caBundle = Buffer.from(await readFile(join(certDir, 'ca.crt'))).toString('base64');
  // The chart calls its Service; here the same serve answers, at its own address.
  const configurations = rendered
    .filter((m) => m.kind === 'MutatingWebhookConfiguration' || m.kind === 'ValidatingWebhookConfiguration')
    .map((m) => ({ ...m, webhooks: (m.webhooks as Array<{ clientConfig: { service: { path: string } } }>).map((webhook) => ({ ...webhook, clientConfig: { url: `${serve.url}${webhook.clientConfig.service.path}`, caBundle } })) }));
  const applied = await cp.kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: configurations }) });
  t.equal(applied.code, 0, "the chart's configurations applied", { stderr: applied.stderr });
  t.teardown(() => cp.kubectl(['delete', 'mutatingwebhookconfiguration,validatingwebhookconfiguration', 'chart-sidecar-terminator']));
  const mutating = await cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: 'chart-sidecar-terminator' });
  t.same(mutating.webhooks?.map((webhook) => webhook.matchConditions?.map((condition) => condition.name)), [['may-finish-or-marked']], 'in force on the API server');
  await waitFor("the API server to call the chart's webhooks", async () => (await kubectl(['create', '--dry-run=server', '-f', '-'], job('dry-run', KRUISE_ACCEPTS))).stderr.includes('denied the request'));
  await injectedSidecarStopped(t, 'chart-sidecar-terminator');
});
