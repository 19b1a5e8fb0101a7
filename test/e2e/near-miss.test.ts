// Near-miss markers on a real API server: `kubectl apply` of a bare pod, a Job or a CronJob whose
// only marker is misspelt prints the warning once (the pod's from both webhooks, the same text;
// the Job's and the CronJob's from the validating webhook, whose matchConditions let through a
// name that may be a near miss); so does every misspelling of test/support/near-miss-cases.ts, run
// through the API server's own CEL. A marked pod with a misspelt annotation is warned by both
// webhooks, and kubectl prints the warning once, since the API server shows a text once per request.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, MANAGED_LABEL } from '../../src/policy/index.ts';
import { startControlPlane } from '../support/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { registeringWebhooks, startServe } from '../support/serve-process.ts';
import { ANNOTATION_MISSES, ENV_MISSES } from '../support/near-miss-cases.ts';

const cp = await startControlPlane();
t.teardown(() => cp.stop());
const core = cp.kubeConfig.makeApiClient(CoreV1Api);
const certDir = await mkdtemp(join(tmpdir(), 'st-e2e-certs-'));
t.teardown(() => rm(certDir, { recursive: true, force: true }));
const serve = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, '--no-watcher', ...registeringWebhooks(port, 'Fail')]);
t.teardown(() => serve.stop());

const pod = (name: string, env: Array<{ name: string; value: string }>, annotations: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, annotations },
  spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox:1.36' }, { name: 'proxy', image: 'envoyproxy/envoy:v1.31.0', env }] },
});

/** kubectl's warnings for an apply (or another command that writes the manifest): its `Warning: ` lines. */
async function applyWarnings(namespace: string, manifest: object, command = ['apply']): Promise<string[]> {
  const result = await cp.kubectl([...command, '-f', '-'], { namespace, input: JSON.stringify(manifest) });
  if (result.code !== 0) throw new Error(`kubectl ${command.join(' ')}: ${result.stderr}`);
  return result.stderr.split('\n').filter((line) => line.startsWith('Warning: '));
}

const FIX = "write the marker's name exactly as the message gives it (names are case-sensitive), or rename the variable or annotation if it is not meant for the add-on";
/** A Job whose pod template is the pod's. */
const job = (name: string, template: ReturnType<typeof pod>) => ({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name }, spec: { backoffLimit: 0, template: { metadata: template.metadata, spec: template.spec } } });
const cronJob = (name: string, template: ReturnType<typeof pod>) => ({ apiVersion: 'batch/v1', kind: 'CronJob', metadata: { name }, spec: { schedule: '0 0 1 1 *', jobTemplate: { spec: job(name, template).spec } } });

// The API server calls a webhook a moment after it is registered.
const namespace = await cp.createNamespace();
await waitFor('the API server to call the mutating webhook', async () => {
  const result = await cp.kubectl(['create', '--dry-run=server', '-f', '-'], { namespace, input: JSON.stringify(pod('dry-run', [{ name: 'KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT', value: 'true' }])) });
  return result.stderr.includes('close to KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT');
});

t.test('a bare pod whose only marker is misspelt: kubectl apply prints the warning, naming the marker meant', async (t) => {
  const warnings = await applyWarnings(namespace, pod('misspelt', [{ name: 'KRUISE_TERMINATE_SIDECAR_WITH_IMAGE', value: 'busybox:1.36' }]));
  t.same(warnings, [
    `Warning: spec.containers[1].env[0].name: "KRUISE_TERMINATE_SIDECAR_WITH_IMAGE": not a variable the add-on reads, so it has no effect, but close to ${ENV_WITH_IMAGE}; ${FIX}`,
  ]);
  const created = await core.readNamespacedPod({ namespace, name: 'misspelt' });
  t.equal(created.metadata?.labels?.[MANAGED_LABEL], undefined, 'not managed: it has no sidecar');
});

t.test('a marked pod with a misspelt annotation: warned by both webhooks, printed once', async (t) => {
  const warnings = await applyWarnings(namespace, pod('marked', [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }], { 'sidecar-terminator.io/ignore-exit-codes': 'proxy' }));
  t.same(warnings.filter((line) => line.includes('close to sidecar-terminator.io/ignore-exit-code;')).length, 1, warnings.join('\n'));
  const created = await core.readNamespacedPod({ namespace, name: 'marked' });
  t.equal(created.metadata?.labels?.[MANAGED_LABEL], 'true', 'managed: its marker is spelt right');
});

t.test('a Job and a CronJob whose only marker is misspelt: kubectl apply prints the warning once', async (t) => {
  const misspelt = pod('template', [{ name: 'KRUISE_TERMINATE_SIDECAR_WITH_IMAGE', value: 'busybox:1.36' }]);
  const warning = (prefix: string) =>
    `Warning: ${prefix}.containers[1].env[0].name: "KRUISE_TERMINATE_SIDECAR_WITH_IMAGE": not a variable the add-on reads, so it has no effect, but close to ${ENV_WITH_IMAGE}; ${FIX}`;
  t.same(await applyWarnings(namespace, job('misspelt', misspelt)), [warning('spec.template.spec')], 'the Job');
  t.same(await applyWarnings(namespace, cronJob('misspelt', misspelt)), [warning('spec.jobTemplate.spec.template.spec')], 'the CronJob');
});

t.test("every misspelling of the table reaches the validating webhook in a Job, through the API server's CEL, and is warned about", async (t) => {
  const cases = [
    ...Object.entries(ENV_MISSES).flatMap(([meant, misses]) => misses.map(([slip, seen]) => ({ meant, slip, seen, template: pod('template', [{ name: seen, value: 'true' }]) }))),
    ...Object.entries(ANNOTATION_MISSES).flatMap(([meant, misses]) => misses.map(([slip, seen]) => ({ meant, slip, seen, template: pod('template', [], { [seen]: 'proxy' }) }))),
  ];
  let warned = 0;
  for (const { meant, slip, seen, template } of cases) {
    const result = await cp.kubectl(['create', '--dry-run=server', '-f', '-'], { namespace, input: JSON.stringify(job('table', template)) });
    // A key the API server itself refuses (an underscore in its domain) never reaches a webhook.
    if (result.code !== 0 && /is invalid/.test(result.stderr) && !result.stderr.includes('sidecar-terminator.io" denied')) {
      t.comment(`${seen}: refused by the API server's own validation`);
      continue;
    }
    t.equal(result.code, 0, `${meant}, ${slip}: created`, { stderr: result.stderr });
    const warnings = result.stderr.split('\n').filter((line) => line.startsWith('Warning: ') && line.includes(`close to ${meant};`));
    t.equal(warnings.length, 1, `${meant}, ${slip}: "${seen}" warned about once`, { stderr: result.stderr });
    warned++;
  }
  t.ok(warned >= cases.length - 3, `${warned} of ${cases.length} warned about; the others the API server refuses`);
});
