// The add-on as an operator installs it: its own image (assembled by scripts/build-images.ts with
// the Dockerfile's content) imported into a real node's containerd, and `helm install` of the chart.
// The API server reaches the webhook through its Service (kube-proxy), so the serving certificate's
// names and the CA bundle the webhook writes are what a real cluster checks; the watcher runs with
// leader election and the chart's RBAC; the signal mechanism's ephemeral container runs the
// stop-sidecar image beside it. The fence is on, as by default: every write of the add-on on these real containers passes
// its ValidatingAdmissionPolicies. Then the examples, a denial, a real Prometheus scraping the add-on
// as the chart's ServiceMonitors describe and firing the chart's stuck-Job alert, an upgrade while
// pods are created at a steady rate (every admission counted), and an uninstall under the same load.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { AdmissionregistrationV1Api, AppsV1Api, BatchV1Api, CoordinationV1Api } from '@kubernetes/client-node';
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, POD_ANNOTATIONS } from '../../src/policy/index.ts';
import { alertGroups, chartDir, helm, render } from '../chart/helm.ts';
import { repoRoot } from '../support/repo.ts';
import { apiFeatures, kubernetesVersion } from '../support/control-plane.ts';
import { expectJobStoppedBy } from '../support/endings.ts';
import { startPrometheus } from '../support/prometheus.ts';
import { waitFor } from '../support/wait.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { assertAdmittedThroughService, containerLog, containerStatus, startRealCluster } from '../support/real-stack.ts';
import { jobYaml } from '../support/pods.ts';
import { finishedByWatcher, podOfJob, waitForJob } from '../support/stack.ts';

const RELEASE = 'sidecar-terminator';
const NS = 'sidecar-terminator';
const MANAGED = 'sidecar-terminator.io/managed';
const WATCHER_ACCOUNT = `system:serviceaccount:${NS}:${RELEASE}-watcher`;
/** How the API server words a write refused by RBAC or by an admission policy. */
const REFUSED = /forbidden|denied request/i;
const version = await kubernetesVersion();
const chartInstalls = apiFeatures(version).validatingAdmissionPolicy;

if (!chartInstalls) t.plan(0, `Kubernetes ${version.gitVersion} is older than the chart's kubeVersion (>=1.30): helm refuses to install it`);
else if (canRunRealNode(t)) {
  const cluster = await startRealCluster(t, {
    reachableFromPods: true,
    node: { images: ['sidecar-terminator', 'busybox'] },
  });
  const { cp, core } = cluster;
  const apps = cp.kubeConfig.makeApiClient(AppsV1Api);
  const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const helmHome = mkdtempSync(join(tmpdir(), 'st-helm-home-'));
  t.teardown(() => rmSync(helmHome, { recursive: true, force: true }));
  const helmEnv = { KUBECONFIG: cp.kubeconfigPath, HELM_CONFIG_HOME: join(helmHome, 'config'), HELM_CACHE_HOME: join(helmHome, 'cache'), HELM_DATA_HOME: join(helmHome, 'data') };
  // Fail: a webhook that cannot be reached refuses pods, so every admission below proves it answered.
  const values = ['--set', 'webhook.failurePolicy=Fail'];

  const kubectl = async (args: string[], namespace?: string, input?: string) => cp.kubectl(args, { ...(namespace ? { namespace } : {}), ...(input !== undefined ? { input } : {}) });

  t.test('helm install: both Deployments become ready with the add-on\'s own image', async (t) => {
    const installed = await helm(['install', RELEASE, chartDir, '--namespace', NS, '--create-namespace', ...values, '--wait', '--timeout', '300s'], { env: helmEnv });
    if (installed.code !== 0) t.comment((await kubectl(['get', 'pods,events', '-o', 'wide'], NS)).stdout);
    t.equal(installed.code, 0, `helm install: ${installed.stderr}`);
    for (const component of ['webhook', 'watcher']) {
      const deployment = await apps.readNamespacedDeployment({ name: `${RELEASE}-${component}`, namespace: NS });
      t.equal(deployment.status?.readyReplicas, deployment.spec?.replicas, `${component}: ${deployment.status?.readyReplicas} of ${deployment.spec?.replicas} replicas ready`);
      t.equal(deployment.spec?.template.spec?.containers[0]?.image, 'ghcr.io/sidecar-terminator/sidecar-terminator:0.1.0', `${component} runs the add-on's image`);
    }
    const configuration = await waitFor('the webhook to write its CA into the webhook configurations', async () => {
      const mutating = await admission.readMutatingWebhookConfiguration({ name: RELEASE });
      return (mutating.webhooks?.[0]?.clientConfig.caBundle ?? '') !== '' && mutating;
    });
    t.same(configuration.webhooks?.[0]?.clientConfig.service, { namespace: NS, name: RELEASE, path: '/mutate', port: 443 }, 'the API server calls the webhook through its Service');
    await assertAdmittedThroughService(t, cp, await cp.createNamespace());
    const lease = await waitFor('the watcher to hold its Lease', async () => {
      const current = await cp.kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: `${RELEASE}-watcher`, namespace: NS });
      return current.spec?.holderIdentity ? current : undefined;
    });
    t.match(lease.spec?.holderIdentity, new RegExp(`^${RELEASE}-watcher-`), 'the watcher pod leads');
    const bindings = (await admission.listValidatingAdmissionPolicyBinding()).items.filter((binding) => binding.metadata?.name?.startsWith(`${RELEASE}-`));
    t.same(bindings.map((binding) => [binding.spec?.policyName, binding.spec?.validationActions]).sort(), [[`${RELEASE}-watcher`, ['Deny']], [`${RELEASE}-webhook`, ['Deny']]], 'the fence is on by default, for both ServiceAccounts');
  });

  t.test("the fence refuses the watcher's ServiceAccount a write the add-on never makes", async (t) => {
    const namespace = await cp.createNamespace();
    const created = await kubectl(['run', 'bystander', '--image', 'busybox:1.35', '--restart', 'Never', '--command', '--', 'sleep', '3600'], namespace);
    t.equal(created.code, 0, `kubectl run bystander: ${created.stderr}`);
    const labelled = await kubectl(['label', 'pod', 'bystander', 'team=attacker', '--as', WATCHER_ACCOUNT], namespace);
    t.not(labelled.code, 0, 'kubectl label as the watcher fails');
    t.match(labelled.stderr, new RegExp(`ValidatingAdmissionPolicy '${RELEASE}-watcher' .*denied request: sidecar-terminator fence: the watcher may change only the ${MANAGED.replaceAll('.', '\\.')} label`), labelled.stderr);
  });

  t.test('the examples complete through the installed add-on, on real containers', async (t) => {
    const namespace = await cp.createNamespace();
    for (const example of ['log-shipper', 'ignore-exit-code']) {
      const applied = await kubectl(['apply', '-f', join(repoRoot, `examples/${example}.yaml`)], namespace);
      t.equal(applied.code, 0, `kubectl apply -f examples/${example}.yaml: ${applied.stderr}`);
    }
    await waitForJob(cluster, namespace, 'log-shipper', 'Complete', 180_000);
    await waitForJob(cluster, namespace, 'ignore-exit-code', 'Complete', 180_000);
    const shipper = await podOfJob(cluster, namespace, 'log-shipper');
    t.ok(await waitFor('the watcher to be finished with the pod', async () => finishedByWatcher(cluster, [await podOfJob(cluster, namespace, 'log-shipper')])), 'the webhook labelled the pod and the watcher finished with it');
    const shipperStatus = await containerStatus(cluster, namespace, shipper.metadata!.name!, 'log-shipper', (s) => s.state?.terminated !== undefined);
    t.equal(shipperStatus.state?.terminated?.exitCode, 0, 'the log shipper exited 0 on SIGTERM');
    t.match(await containerLog(cp, namespace, shipper.metadata!.name!, 'log-shipper'), /row 5\n(.|\n)*shipped/, 'it shipped every row, then stopped');
    const signal = shipper.spec?.ephemeralContainers?.[0];
    t.equal(signal?.image, 'ghcr.io/sidecar-terminator/stop-sidecar:0.1.0', 'the signal container ran the stop-sidecar image beside the chart\'s own');
    const proxy = await podOfJob(cluster, namespace, 'ignore-exit-code');
    t.equal(proxy.status?.phase, 'Succeeded', 'the pod whose sidecar exits 143 is Succeeded');
    // The chart's kill mechanism, auto, is signal here (no OpenKruise); ignore-exit-code sets the phase too.
    await expectJobStoppedBy(t, cluster, namespace, 'log-shipper', { 'log-shipper': 'signal' });
    await expectJobStoppedBy(t, cluster, namespace, 'ignore-exit-code', { 'sql-proxy': 'phase' });
    const logs = await kubectl(['logs', '--selector', 'app.kubernetes.io/component=watcher', '--tail', '-1', '--prefix'], NS);
    t.equal(logs.code, 0, `kubectl logs of the watcher: ${logs.stderr}`);
    t.notMatch(logs.stdout, REFUSED, 'no write of the watcher was refused, by RBAC or by the fence');
  });

  t.test('kubectl apply of a misconfigured Job shows the denial', async (t) => {
    const namespace = await cp.createNamespace();
    const denied = await kubectl(['apply', '-f', join(repoRoot, 'examples/misconfigured.yaml')], namespace);
    t.not(denied.code, 0, 'kubectl apply fails');
    t.match(denied.stderr, /admission webhook "validate\.sidecar-terminator\.io" denied the request: .*the quick-exit image is the sidecar's own image/, denied.stderr);
  });

  t.test("a real Prometheus scrapes the add-on as the chart's ServiceMonitors describe, and the stuck-Job alert fires", async (t) => {
    // The chart's rules, with thresholds a test can wait for; the release itself has no
    // ServiceMonitor (this cluster runs no prometheus-operator): Prometheus is given the scrape
    // configuration the operator would make of them, the job named after the Service.
    const monitored = { serviceMonitor: { enabled: true }, prometheusRule: { enabled: true, waitingOnSidecarsSeconds: 20, for: '10s', failedStopsWindow: '10m', unavailableFor: '1m' } };
    const groups = alertGroups(await render({ ...monitored, webhook: { failurePolicy: 'Fail' } }, { namespace: NS }));
    const secret = await core.readNamespacedSecret({ name: `${RELEASE}-tls`, namespace: NS });
    const caFile = join(helmHome, 'webhook-ca.crt');
    writeFileSync(caFile, Buffer.from(secret.data!['ca.crt']!, 'base64'));
    // Debian builds Prometheus without Kubernetes service discovery: the targets are the pods the
    // ServiceMonitors select (their Services' endpoints), listed here, each labelled as the
    // operator labels it.
    const scrape = async (component: string, port: number, job: string, tls?: object) => ({
      job_name: `serviceMonitor/${NS}/${RELEASE}-${component}/0`,
      ...(tls ? { scheme: 'https', tls_config: tls } : {}),
      static_configs: (await core.listNamespacedPod({ namespace: NS, labelSelector: `app.kubernetes.io/component=${component}` })).items
        .filter((pod) => pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp)
        .map((pod) => ({ targets: [`${pod.status!.podIP}:${port}`], labels: { job, namespace: NS, pod: pod.metadata!.name! } })),
    });
    const prometheus = await startPrometheus({
      global: { scrape_interval: '2s', evaluation_interval: '2s' },
      rule_files: ['rules.yaml'],
      scrape_configs: [
        await scrape('watcher', 8081, `${RELEASE}-watcher-metrics`),
        await scrape('webhook', 9443, RELEASE, { ca_file: caFile, server_name: `${RELEASE}.${NS}.svc` }),
      ],
    }, { groups });
    t.teardown(() => prometheus.stop());
    const up = await waitFor('Prometheus to scrape both components', async () => {
      const targets = await prometheus.query('up == 1');
      return targets.length === 3 && targets;
    }, { timeoutMs: 60_000 });
    t.same(up.map((target) => target.metric.job).sort(), [RELEASE, RELEASE, `${RELEASE}-watcher-metrics`], 'the two webhook replicas and the watcher are up');
    t.same((await prometheus.query(`sidecar_terminator_leader{namespace="${NS}"} == 1`)).length, 1, 'one replica leads');

    // A Job whose sidecar handles SIGTERM and keeps running, given ten minutes to exit: it waits on
    // its sidecar. And one whose quick-exit image cannot be pulled (the node may pull nothing for
    // that container), with OnFailure, under which the kubelet keeps trying: a stop that failed.
    const namespace = await cp.createNamespace();
    const job = (name: string, annotations: Record<string, string>, env: Array<{ name: string; value: string }>, command: string[], pull = 'IfNotPresent', restartPolicy: 'Never' | 'OnFailure' = 'Never') =>
      jobYaml(name, {
        restartPolicy,
        annotations,
        spec: { terminationGracePeriodSeconds: 5 },
        containers: [
          { name: 'main', image: 'busybox:1.35', command: ['sh', '-c', 'sleep 1'] },
          { name: 'proxy', image: 'busybox:1.35', imagePullPolicy: pull, command, env },
        ],
      });
    const applied = await kubectl(['apply', '-f', '-'], namespace, [
      job('stuck', { [`${POD_ANNOTATIONS.gracePeriodPrefix}proxy`]: '600' }, [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }], ['sh', '-c', "trap 'echo ignored' TERM; while true; do sleep 1; done"]),
      job('unpullable', {}, [{ name: ENV_WITH_IMAGE, value: 'registry.example.com/quick-exit:1' }], ['sleep', '3600'], 'Never', 'OnFailure'),
    ].join('\n---\n'));
    t.equal(applied.code, 0, `kubectl apply: ${applied.stderr}`);
    const firing = (name: string) => async () => (await prometheus.alerts()).find((alert) => alert.labels.alertname === name && alert.state === 'firing');
    const stuck = await waitFor('SidecarTerminatorPodsWaitingOnSidecars to fire', firing('SidecarTerminatorPodsWaitingOnSidecars'), { timeoutMs: 180_000, intervalMs: 1000 }).catch((error: unknown) => {
      t.comment(prometheus.logTail(30));
      throw error;
    });
    t.match(stuck.labels, { namespace: NS, severity: 'warning' }, 'the stuck-Job alert fires, for this release');
    t.ok(Number(stuck.value) > 20, `the pod has waited ${stuck.value} s on its sidecar`);
    const cannot = await waitFor('SidecarTerminatorCannotStopSidecars to fire', firing('SidecarTerminatorCannotStopSidecars'), { timeoutMs: 60_000, intervalMs: 1000 }).catch(async (error: unknown) => {
      t.comment((await kubectl(['get', 'pods,events', '-o', 'wide'], namespace)).stdout);
      throw error;
    });
    t.ok(Number(cannot.value) >= 1, 'and the quick-exit image that cannot be pulled is counted from its first time: its series was at 0 before');
    const others = (await prometheus.alerts()).filter((alert) => !['SidecarTerminatorPodsWaitingOnSidecars', 'SidecarTerminatorCannotStopSidecars'].includes(alert.labels.alertname ?? ''));
    t.same(others.map((alert) => `${alert.labels.alertname} ${alert.state}`), [], 'no other alert: both components up, a leader, a valid certificate');
    for (const pod of (await core.listNamespacedPod({ namespace })).items) {
      await kubectl(['delete', 'pod', pod.metadata!.name!, '--grace-period=0', '--force', '--wait=false'], namespace);
    }
  });

  t.test('helm upgrade with changed values rolls both Deployments without a denied pod', async (t) => {
    const namespace = await cp.createNamespace();
    const pod = (index: number) => JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `during-upgrade-${index}` },
      spec: {
        restartPolicy: 'Never',
        containers: [
          { name: 'main', image: 'busybox:1.35', command: ['sh', '-c', 'sleep 1'] },
          { name: 'proxy', image: 'busybox:1.35', command: ['sh', '-c', "trap 'exit 0' TERM; sleep 2147483647 & wait"], env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' }] },
        ],
      },
    });
    const before = (await apps.readNamespacedDeployment({ name: `${RELEASE}-webhook`, namespace: NS })).metadata?.generation ?? 0;
    let upgrading = true;
    const failures: string[] = [];
    let created = 0;
    const load = (async () => {
      while (upgrading) {
        const result = await kubectl(['create', '-f', '-'], namespace, pod(created));
        if (result.code === 0) created++;
        else failures.push(result.stderr.trim());
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    const upgraded = await helm(['upgrade', RELEASE, chartDir, '--namespace', NS, ...values, '--set', 'logLevel=debug', '--wait', '--timeout', '300s'], { env: helmEnv });
    // A little longer: endpoints and kube-proxy catch up with the last replaced pod.
    await new Promise((resolve) => setTimeout(resolve, 5000));
    upgrading = false;
    await load;
    t.equal(upgraded.code, 0, `helm upgrade: ${upgraded.stderr}`);
    const after = await apps.readNamespacedDeployment({ name: `${RELEASE}-webhook`, namespace: NS });
    t.ok((after.metadata?.generation ?? 0) > before, 'the webhook Deployment rolled');
    t.equal(after.status?.updatedReplicas, after.spec?.replicas, 'every webhook replica was replaced');
    t.comment(`admissions during the rolling update: ${created + failures.length} pod creations, ${failures.length} refused or lost`);
    t.same(failures, [], `no pod was refused during the roll (${created} created)`);
    t.ok(created > 10, `pods were created throughout the roll (${created})`);
    const pods = (await core.listNamespacedPod({ namespace })).items;
    const unlabelled = pods.filter((p) => p.metadata?.labels?.[MANAGED] === undefined).map((p) => p.metadata?.name);
    t.same(unlabelled, [], 'every pod went through the mutating webhook');
  });

  t.test('helm uninstall removes the webhook configurations before the webhook, losing no admission under load, and leaves none behind', async (t) => {
    const loadNamespace = await cp.createNamespace();
    const bare = (index: number) => JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: `during-uninstall-${index}` }, spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox:1.35', command: ['sh', '-c', 'sleep 1'] }] } });
    let uninstalling = true;
    let created = 0;
    const refused: string[] = [];
    // When the webhook configurations went, and when the webhook Deployment began to go.
    let configurationsGoneAt: number | undefined;
    let webhookGoingAt: number | undefined;
    const watchOrder = (async () => {
      while (uninstalling && (configurationsGoneAt === undefined || webhookGoingAt === undefined)) {
        const names = (await admission.listValidatingWebhookConfiguration()).items.map((c) => c.metadata?.name);
        if (configurationsGoneAt === undefined && !names.includes(RELEASE)) configurationsGoneAt = Date.now();
        const deployment = await apps.readNamespacedDeployment({ name: `${RELEASE}-webhook`, namespace: NS }).catch(() => undefined);
        if (webhookGoingAt === undefined && (!deployment || deployment.metadata?.deletionTimestamp)) webhookGoingAt = Date.now();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const load = (async () => {
      for (let index = 0; uninstalling; index++) {
        const result = await kubectl(['create', '-f', '-'], loadNamespace, bare(index));
        if (result.code === 0) created++;
        else refused.push(result.stderr.trim());
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    const uninstalled = await helm(['uninstall', RELEASE, '--namespace', NS, '--wait', '--timeout', '180s'], { env: helmEnv });
    await new Promise((resolve) => setTimeout(resolve, 3000));
    uninstalling = false;
    await Promise.all([load, watchOrder]);
    t.equal(uninstalled.code, 0, uninstalled.stderr);
    t.comment(`admissions during helm uninstall: ${created + refused.length} pod creations, ${refused.length} refused`);
    t.same(refused, [], `no pod was refused while the add-on went (${created} created)`);
    t.ok(configurationsGoneAt !== undefined && webhookGoingAt !== undefined && configurationsGoneAt <= webhookGoingAt, `the webhook configurations went first (${configurationsGoneAt === undefined || webhookGoingAt === undefined ? 'not seen' : `${webhookGoingAt - configurationsGoneAt} ms before the webhook Deployment`}): the pre-delete hook`);
    const mutating = (await admission.listMutatingWebhookConfiguration()).items.map((c) => c.metadata?.name);
    const validating = (await admission.listValidatingWebhookConfiguration()).items.map((c) => c.metadata?.name);
    t.notOk(mutating.includes(RELEASE), `no MutatingWebhookConfiguration ${RELEASE} (${mutating.join(', ') || 'none'})`);
    t.notOk(validating.includes(RELEASE), `no ValidatingWebhookConfiguration ${RELEASE} (${validating.join(', ') || 'none'})`);
    const policies = (await admission.listValidatingAdmissionPolicy()).items.map((policy) => policy.metadata?.name);
    t.notOk(policies.some((name) => name?.startsWith(`${RELEASE}-`)), `no ValidatingAdmissionPolicy of the fence (${policies.join(', ') || 'none'})`);
    const jobs = (await cp.kubeConfig.makeApiClient(BatchV1Api).listNamespacedJob({ namespace: NS })).items.map((job) => job.metadata?.name);
    t.same(jobs, [], 'the hook Job is deleted once it succeeded');
    const namespace = await cp.createNamespace();
    const job = readFileSync(join(repoRoot, 'examples/misconfigured.yaml'), 'utf8');
    const applied = await kubectl(['apply', '-f', '-'], namespace, job);
    t.equal(applied.code, 0, 'with the add-on gone, nothing is checked any more: the misconfigured Job is admitted');
  });
}
