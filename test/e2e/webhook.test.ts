// The admission webhook as a user meets it: `serve` registers itself with a real API server,
// and `kubectl apply` shows its denials and warnings.
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, BatchV1Api, CoreV1Api, type V1EnvVar } from '@kubernetes/client-node';
import t from 'tap';
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE } from '../../src/policy/index.ts';
import { apiFeatures, kubernetesVersion, startControlPlane } from '../support/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { tryApply } from '../support/stack.ts';
import { jobYaml, main } from '../support/pods.ts';
import { registeringWebhooks, runServe, servedCertificate, startServe, type ServeProcess } from '../support/serve-process.ts';

const CONFIG_NAME = 'sidecar-terminator-e2e';

const cp = await startControlPlane();
t.teardown(() => cp.stop());
const certDir = await mkdtemp(join(tmpdir(), 'st-e2e-certs-'));
t.teardown(() => rm(certDir, { recursive: true, force: true }));
const namespace = await cp.createNamespace();
const core = cp.kubeConfig.makeApiClient(CoreV1Api);

const startWebhook = (extra: string[] = []) =>
  startServe((port) => [
    '--kubeconfig', cp.kubeconfigPath,
    '--cert-dir', certDir,
    ...registeringWebhooks(port, 'Fail', CONFIG_NAME),
    '--no-watcher',
    '--validate-workloads',
    '--webhook-timeout-seconds', '2',
    ...extra,
  ]);

let serve: ServeProcess = await startWebhook();
t.teardown(() => serve.stop());

const apply = (yaml: string) => tryApply(cp, namespace, yaml);

/** A Job whose sidecar carries this env entry. */
const job = (name: string, sidecarEnv: V1EnvVar) =>
  jobYaml(name, { containers: [main('main', 'busybox:1.36', { command: ['sh', '-c', 'echo done'] }), { name: 'proxy', image: 'nginx:1.27', env: [sidecarEnv] }] });

t.test('the registered configurations call this process with the CA of --cert-dir', async (t) => {
  const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  // serve is ready once it listens; it registers just after, so a loaded machine can read first.
  const mutating = await waitFor('the MutatingWebhookConfiguration', () => admission.readMutatingWebhookConfiguration({ name: CONFIG_NAME }));
  const validating = await waitFor('the ValidatingWebhookConfiguration', () => admission.readValidatingWebhookConfiguration({ name: CONFIG_NAME }));
  const caFile = await readFile(join(certDir, 'ca.crt'), 'utf8');
  for (const config of [mutating, validating]) {
    const [webhook] = config.webhooks ?? [];
    t.equal(Buffer.from(webhook?.clientConfig.caBundle ?? '', 'base64').toString(), caFile, `${config.kind} trusts ca.crt`);
    t.equal(webhook?.failurePolicy, 'Fail');
    t.equal(webhook?.timeoutSeconds, 2, `${config.kind}: the timeout of --webhook-timeout-seconds`);
    t.same(webhook?.admissionReviewVersions, ['v1']);
    t.match(webhook?.namespaceSelector?.matchExpressions, [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'sidecar-terminator'] }]);
  }
  t.equal(mutating.webhooks?.[0]?.sideEffects, 'None');
  t.equal(mutating.webhooks?.[0]?.reinvocationPolicy, 'IfNeeded', 'called again after a later webhook injects a sidecar');
  t.equal(validating.webhooks?.[0]?.sideEffects, 'NoneOnDryRun', 'events on owners, never on dry runs');
  t.match(mutating.webhooks?.[0]?.rules, [{ apiGroups: [''], resources: ['pods'], operations: ['CREATE'] }]);
  t.match(validating.webhooks?.[0]?.rules, [
    { apiGroups: [''], resources: ['pods'], operations: ['CREATE'] },
    { apiGroups: ['batch'], resources: ['jobs', 'cronjobs'], operations: ['CREATE', 'UPDATE'] },
    { apiGroups: ['apps'], resources: ['deployments', 'statefulsets', 'daemonsets'] },
  ], 'with --validate-workloads, workload templates too');
  t.match(serve.logs().find((line) => line.msg === 'admission webhook listening'), { timeoutSeconds: 2 }, 'the server itself gives up after the same 2 s');
  t.equal(mutating.webhooks?.[0]?.clientConfig.url, `${serve.url}/mutate`);
  t.equal(validating.webhooks?.[0]?.clientConfig.url, `${serve.url}/validate`);
  const served = await servedCertificate(serve.port);
  t.ok(served.verify(new X509Certificate(caFile).publicKey), 'the served certificate is signed by that CA');
});

t.test('a Job whose sidecar quick-exit image is its own image is rejected, with the field path and the reason', async (t) => {
  const result = await apply(job('own-image', { name: ENV_WITH_IMAGE, value: 'nginx:1.27' }));
  t.not(result.code, 0);
  t.match(result.stderr, 'admission webhook "validate.sidecar-terminator.io" denied the request');
  t.match(result.stderr, `spec.template.spec.containers[1].env[${ENV_WITH_IMAGE}]: Invalid value: "nginx:1.27"`);
  t.match(result.stderr, "the quick-exit image is the sidecar's own image");
  const jobs = await cp.kubectl(['get', 'jobs', '-o', 'name'], { namespace });
  t.notMatch(jobs.stdout, 'own-image', 'nothing was created');
});

t.test('a Job with a :latest quick-exit image is created, and kubectl prints the warning', async (t) => {
  const result = await apply(job('latest-image', { name: ENV_WITH_IMAGE, value: 'quick-exit:latest' }));
  t.equal(result.code, 0, 'applied', { stderr: result.stderr });
  t.match(result.stdout, 'job.batch/latest-image created');
  t.match(result.stderr, /^Warning: .*containers\[1\]\.env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE\].*:latest/m);
});

t.test("a valid Job's pod, created by the Job controller, carries the managed label", async (t) => {
  const result = await apply(job('valid', { name: ENV_WHEN_JOB_EXIT, value: 'true' }));
  t.equal(result.code, 0, 'applied', { stderr: result.stderr });
  t.equal(result.stderr.trim(), '', 'no warnings');
  const pod = await waitFor('the pod of Job valid', async () => {
    const pods = await core.listNamespacedPod({ namespace, labelSelector: 'job-name=valid' });
    return pods.items[0];
  });
  t.equal(pod.metadata?.labels?.['sidecar-terminator.io/managed'], 'true');
});

t.test('a bare pod with restartPolicy Always and a marker (as a Deployment makes) is admitted with a warning, unlabelled', async (t) => {
  const result = await apply(`
apiVersion: v1
kind: Pod
metadata: {name: always}
spec:
  containers:
    - {name: main, image: "busybox:1.36"}
    - name: proxy
      image: "nginx:1.27"
      env: [{name: ${ENV_WHEN_JOB_EXIT}, value: "true"}]
`);
  t.equal(result.code, 0, 'applied', { stderr: result.stderr });
  t.match(result.stderr, /^Warning: spec\.restartPolicy: .*/m);
  const pod = await core.readNamespacedPod({ name: 'always', namespace });
  t.equal(pod.metadata?.labels?.['sidecar-terminator.io/managed'], undefined);
});

t.test('a Deployment whose pod template has a marker is created with a warning, and its pods are not labelled', async (t) => {
  const result = await apply(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - {name: main, image: "nginx:1.27"}
        - name: proxy
          image: "envoyproxy/envoy:v1.31.0"
          env: [{name: ${ENV_WHEN_JOB_EXIT}, value: "true"}]
`);
  t.equal(result.code, 0, 'created, not denied', { stderr: result.stderr });
  t.match(result.stderr, /^Warning: spec\.template\.spec\.restartPolicy: Unsupported value: "Always": .*/m, 'kubectl prints the warning');
  const pods = await waitFor('the Deployment\'s pod', async () => {
    const list = await core.listNamespacedPod({ namespace, labelSelector: 'app=web' });
    return list.items.length > 0 && list.items;
  });
  t.equal(pods[0]?.metadata?.labels?.['sidecar-terminator.io/managed'], undefined, 'not labelled');
});

const restartRules = apiFeatures(await kubernetesVersion()).containerRestartRules;
t.test(
  'container restart rules that keep a Job from completing: kubectl prints each warning, with the field and the fix, and the Job is created',
  { skip: !restartRules && 'this Kubernetes release has no container restart rules (1.35+, gate ContainerRestartRules)' },
  async (t) => {
    const result = await apply(`
apiVersion: batch/v1
kind: Job
metadata: {name: restart-rules}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: "busybox:1.36"
          restartPolicy: Never
          restartPolicyRules:
            - action: Restart
              exitCodes: {operator: In, values: [0, 42]}
        - name: proxy
          image: "nginx:1.27"
          restartPolicy: OnFailure
          env: [{name: ${ENV_WHEN_JOB_EXIT}, value: "true"}]
`);
    t.equal(result.code, 0, 'created: warnings, not a denial', { stderr: result.stderr });
    t.match(result.stderr, /^Warning: spec\.template\.spec\.containers\[0\]\.restartPolicyRules\[0\]: the kubelet restarts this main container when it exits 0 \(rule 1: exit code 0 In \[0, 42\]\), so it is never done.*; leave exit code 0 out of this rule/m, 'the main container a rule restarts after success');
    t.match(result.stderr, new RegExp(`^Warning: spec\\.template\\.spec\\.containers\\[1\\]\\.env\\[${ENV_WHEN_JOB_EXIT}\\]: with the container's restartPolicy OnFailure, kubelet restarts a sidecar that exits non-zero when it is stopped.*set KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE="true"`, 'm'), 'the sidecar its own restartPolicy restarts after its stop');
    const job = await cp.kubeConfig.makeApiClient(BatchV1Api).readNamespacedJob({ name: 'restart-rules', namespace });
    t.same(job.spec?.template.spec?.containers.map((c) => c.restartPolicy), ['Never', 'OnFailure'], 'the API server kept the fields: the gate is on');
  },
);

t.test('SIGTERM stops serve gracefully, with exit code 0', async (t) => {
  const exit = await serve.stop();
  t.same(exit, { code: 0, signal: null }, 'exit code 0', { output: serve.output() });
  const messages = serve.logs().map((line) => line.msg);
  t.same(messages.slice(-2), ['shutting down', 'stopped'], 'logged');
});

t.test('--enforcement warn admits a pod with errors and returns them as warnings', async (t) => {
  serve = await startWebhook(['--enforcement', 'warn']);
  const result = await apply(`
apiVersion: v1
kind: Pod
metadata: {name: warned}
spec:
  restartPolicy: Never
  containers:
    - {name: main, image: "busybox:1.36"}
    - name: proxy
      image: "nginx:1.27"
      env: [{name: ${ENV_WITH_IMAGE}, value: "nginx:1.27"}]
`);
  t.equal(result.code, 0, 'applied', { stderr: result.stderr });
  t.match(result.stderr, `Warning: spec.containers[1].env[${ENV_WITH_IMAGE}]: Invalid value: "nginx:1.27": the quick-exit image is the sidecar's own image`);
  t.ok(await core.readNamespacedPod({ name: 'warned', namespace }), 'created');
});

t.test('serve with nothing to run exits with a clear message', async (t) => {
  const result = await runServe(['--no-webhook', '--no-watcher']);
  t.equal(result.code, 2);
  t.match(result.output, /nothing to run/);
});
