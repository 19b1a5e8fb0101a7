// The webhook down while workloads are created. The webhook and the watcher run as separate
// processes (`serve --no-watcher`, `serve --no-webhook`), as the chart deploys them.
// - failurePolicy Fail: the API server refuses the pod with its own message, and nothing exists.
// - failurePolicy Ignore: pods are admitted unlabelled; the watcher's sweeper labels those with
//   sidecar markers (and only those), so their Jobs still complete.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { MANAGED_LABEL } from '../../src/policy/index.ts';
import { expectJobStoppedBy } from '../support/endings.ts';
import { simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { registeringWebhooks, startServe, startWatcherProcess } from '../support/serve-process.ts';
import { finishedByWatcher, startCluster, tryApply, waitForJob, waitForWebhooksInEffect } from '../support/stack.ts';
import { imageSidecar, jobYaml, killSidecar, main, podYaml } from '../support/pods.ts';

const CONFIG_NAME = 'st-webhook-down';

const { cp, core, batch, custom } = await startCluster(t, { sim: { restartDelayMs: 200 } });
const certDir = await mkdtemp(join(tmpdir(), 'st-e2e-certs-'));
t.teardown(() => rm(certDir, { recursive: true, force: true }));

const startWebhook = (failurePolicy: 'Fail' | 'Ignore') =>
  startServe((port) => [
    '--kubeconfig', cp.kubeconfigPath,
    '--cert-dir', certDir,
    ...registeringWebhooks(port, failurePolicy, CONFIG_NAME),
    '--no-watcher',
  ]);

const watcher = await startWatcherProcess(['--kubeconfig', cp.kubeconfigPath, '--sweep-interval', '2s', '--kill-mechanism', 'signal']);
t.teardown(() => watcher.stop());

const apply = (namespace: string, yaml: string) => tryApply(cp, namespace, yaml);

async function readPod(namespace: string, name: string): Promise<V1Pod | undefined> {
  try {
    return await core.readNamespacedPod({ namespace, name });
  } catch (error) {
    if ((error as { code?: number }).code === 404) return undefined;
    throw error;
  }
}

t.test('failurePolicy Fail, webhook down: the pod is refused with the API server message, and nothing is created', async (t) => {
  const namespace = await cp.createNamespace();
  const webhook = await startWebhook('Fail');
  await waitForWebhooksInEffect(cp, namespace, `webhooks at ${webhook.url}`);
  await webhook.stop();

  const result = await apply(namespace, podYaml('refused', [main(), killSidecar()]));
  t.not(result.code, 0, 'kubectl apply fails');
  t.match(result.stderr, /failed calling webhook "(mutate|validate)\.sidecar-terminator\.io"/, 'with the API server message');
  t.match(result.stderr, /connection refused/, 'naming the cause');
  t.equal(await readPod(namespace, 'refused'), undefined, 'the pod does not exist');
  const pods = await core.listNamespacedPod({ namespace });
  t.same(pods.items.map((p) => p.metadata?.name), [], 'no pod at all in the namespace');

  const job = await apply(namespace, jobYaml('refused-job', { containers: [main(), killSidecar()] }));
  t.not(job.code, 0, "a Job is refused too (its template is validated)", { stdout: job.stdout, stderr: job.stderr });
  t.match(job.stderr, /failed calling webhook "validate\.sidecar-terminator\.io"/);
  t.same((await batch.listNamespacedJob({ namespace })).items, [], 'no Job was created');
});

t.test('failurePolicy Ignore, webhook down: the sweeper labels the pods it missed and their Jobs complete', async (t) => {
  const namespace = await cp.createNamespace();
  const webhook = await startWebhook('Ignore');
  await waitForWebhooksInEffect(cp, namespace, `webhooks at ${webhook.url}`);
  // With the webhook up, a Job's pod is labelled at admission: the webhook is in the path.
  const before = await apply(namespace, jobYaml('while-up', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers: [main(), killSidecar()] }));
  t.equal(before.code, 0, 'applied', { stderr: before.stderr });
  const admitted = await waitFor('the pod of Job while-up', async () => (await core.listNamespacedPod({ namespace, labelSelector: 'job-name=while-up' })).items[0]);
  t.equal(admitted.metadata?.labels?.[MANAGED_LABEL], 'true', 'labelled by the webhook');
  const exit = await webhook.stop();
  t.equal(exit.code, 0, 'the webhook stopped');
  // Dry runs pass once the API server uses the re-registered configuration (failurePolicy Ignore).
  await waitFor('failurePolicy Ignore to be in effect', async () => (await cp.kubectl(['apply', '--dry-run=server', '-f', '-'], { namespace, input: podYaml('dry-run', [main(), killSidecar()]) })).code === 0);

  // Created while the webhook is down: admitted without a label.
  const jobs = ['kill-0', 'kill-1', 'kill-2', 'image-0'];
  const exitAfter = { [simAnnotations.exitAfter('main')]: '3s' };
  for (const name of jobs) {
    const sidecar = name.startsWith('image') ? imageSidecar() : killSidecar();
    const result = await apply(namespace, jobYaml(name, { annotations: exitAfter, containers: [main(), sidecar] }));
    t.equal(result.code, 0, `${name} admitted without the webhook`, { stderr: result.stderr });
  }
  // Pods the sweeper must leave alone: no markers; markers with an error (no main container);
  // markers in a namespace the webhook is not registered for (the add-on's own).
  t.equal((await apply(namespace, podYaml('no-markers', [main(), main('other', 'nginx:1.27')]))).code, 0, 'no-markers admitted');
  t.equal((await apply(namespace, podYaml('only-sidecars', [killSidecar()]))).code, 0, 'only-sidecars admitted');
  const addonNamespace = await cp.createNamespace('sidecar-terminator');
  t.equal((await apply(addonNamespace, podYaml('excluded', [main(), killSidecar()], { annotations: exitAfter }))).code, 0, 'excluded admitted');

  for (const name of jobs) await waitForJob({ core, batch }, namespace, name, 'Complete');
  const completed = (await batch.listNamespacedJob({ namespace })).items.filter((job) => job.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True'));
  t.same(jobs.filter((name) => !completed.some((job) => job.metadata?.name === name)), [], 'every Job created while the webhook was down completed');

  const swept = watcher.logs().filter((line) => line.msg === 'sweeper labelled pods the webhook missed').flatMap((line) => line.pods as string[]);
  for (const name of jobs) {
    const [pod] = (await core.listNamespacedPod({ namespace, labelSelector: `job-name=${name}` })).items;
    t.ok(swept.includes(`${namespace}/${pod?.metadata?.name}`), `${name}: its pod was labelled by the sweeper`);
    t.ok(await finishedByWatcher({ core }, pod ? [pod] : []), `${name}: the watcher finished with it`);
    t.equal(pod?.status?.phase, 'Succeeded', `${name}: its pod succeeded`);
    // The kill sidecars by their signal container; the one with only a quick-exit image by that image.
    await expectJobStoppedBy(t, { core, batch, custom }, namespace, name, name.startsWith('image') ? { logs: 'image' } : { proxy: 'signal' });
  }
  const [killPod] = (await core.listNamespacedPod({ namespace, labelSelector: 'job-name=kill-0' })).items;
  t.same(killPod?.spec?.ephemeralContainers?.map((c) => c.targetContainerName), ['proxy'], 'stopped by one signal');
  const [imagePod] = (await core.listNamespacedPod({ namespace, labelSelector: 'job-name=image-0' })).items;
  t.equal(imagePod?.spec?.containers.find((c) => c.name === 'logs')?.image, 'registry.example.com/quick-exit:1.0', 'stopped by its quick-exit image');

  // Two more sweeps (every 2 s) pass; the pods the webhook would not have labelled stay untouched.
  await sleep(5000);
  t.ok(watcher.running(), 'the watcher still runs');
  for (const [ns, name] of [[namespace, 'no-markers'], [namespace, 'only-sidecars'], [addonNamespace, 'excluded']] as const) {
    const pod = await readPod(ns, name);
    t.equal(pod?.status?.phase, 'Running', `${name}: still running`);
    t.equal(pod?.metadata?.labels?.[MANAGED_LABEL], undefined, `${name}: not labelled`);
    t.notOk(pod?.spec?.ephemeralContainers, `${name}: not signalled`);
  }
});

t.test('namespaces opted in by label: the sweeper labels pods in those only, as the webhook serves those only', async (t) => {
  // The webhook configuration of the test above stays, failurePolicy Ignore, nothing answering:
  // pods are admitted unlabelled. A watcher told the opt-in labels sweeps instead of the one above.
  await watcher.stop();
  const optedIn = await cp.createNamespace();
  const notOptedIn = await cp.createNamespace();
  t.equal((await cp.kubectl(['label', 'namespace', optedIn, 'team=batch', 'tier=jobs'])).code, 0, 'one namespace opts in');
  t.equal((await cp.kubectl(['label', 'namespace', notOptedIn, 'team=batch'])).code, 0, 'the other carries one of the two labels only');
  const labelled = await startWatcherProcess(['--kubeconfig', cp.kubeconfigPath, '--sweep-interval', '2s', '--kill-mechanism', 'signal', '--namespace-labels', 'team=batch,tier=jobs']);
  t.teardown(() => labelled.stop());

  const job = (name: string) => jobYaml(name, { annotations: { [simAnnotations.exitAfter('main')]: '2s' }, containers: [main(), killSidecar()] });
  for (const namespace of [optedIn, notOptedIn]) t.equal((await apply(namespace, job('swept'))).code, 0, `admitted unlabelled in ${namespace}`);
  await waitForJob({ core, batch }, optedIn, 'swept', 'Complete');
  const [opted] = (await core.listNamespacedPod({ namespace: optedIn, labelSelector: 'job-name=swept' })).items;
  t.equal(opted?.metadata?.labels?.[MANAGED_LABEL], 'true', 'the pod of the namespace that opted in was labelled by the sweeper');
  await expectJobStoppedBy(t, { core, batch, custom }, optedIn, 'swept', { proxy: 'signal' });

  await sleep(5000); // two more sweeps
  const [left] = (await core.listNamespacedPod({ namespace: notOptedIn, labelSelector: 'job-name=swept' })).items;
  t.equal(left?.metadata?.labels?.[MANAGED_LABEL], undefined, 'the pod of the namespace that did not opt in is not labelled');
  t.notOk(left?.spec?.ephemeralContainers, 'and its sidecar not signalled');
  t.equal(left?.status?.phase, 'Running', 'it runs on, as it would without the add-on');
  t.notOk(labelled.logs().some((line) => Number(line.level) >= 40), 'no warning: listing namespaces by label works');
});
