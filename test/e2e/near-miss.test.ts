// Near-miss markers on a real API server: `kubectl apply` of a bare pod whose only marker is
// misspelt prints the mutating webhook's warning (the validating webhook's matchConditions keep
// the pod from it); a marked pod with a misspelt annotation is warned by both webhooks, and
// kubectl prints the warning once, since the API server shows a text once per request.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, MANAGED_LABEL } from '../../src/policy/index.ts';
import { startControlPlane } from '../support/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { registeringWebhooks, startServe } from '../support/serve-process.ts';

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

/** kubectl's warnings for an apply: its `Warning: ` lines. */
async function applyWarnings(namespace: string, manifest: object): Promise<string[]> {
  const result = await cp.kubectl(['apply', '-f', '-'], { namespace, input: JSON.stringify(manifest) });
  if (result.code !== 0) throw new Error(`kubectl apply: ${result.stderr}`);
  return result.stderr.split('\n').filter((line) => line.startsWith('Warning: '));
}

// The API server calls a webhook a moment after it is registered.
const namespace = await cp.createNamespace();
await waitFor('the API server to call the mutating webhook', async () => {
  const result = await cp.kubectl(['create', '--dry-run=server', '-f', '-'], { namespace, input: JSON.stringify(pod('dry-run', [{ name: 'KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT', value: 'true' }])) });
  return result.stderr.includes('close to KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT');
});

t.test('a bare pod whose only marker is misspelt: kubectl apply prints the warning, naming the marker meant', async (t) => {
  const warnings = await applyWarnings(namespace, pod('misspelt', [{ name: 'KRUISE_TERMINATE_SIDECAR_WITH_IMAGE', value: 'busybox:1.36' }]));
  t.same(warnings, [
    `Warning: spec.containers[1].env[0].name: "KRUISE_TERMINATE_SIDECAR_WITH_IMAGE": not a variable the add-on reads, so it has no effect, but close to ${ENV_WITH_IMAGE}; write the marker's name exactly as the message gives it (names are case-sensitive), or rename the variable or annotation if it is not meant for the add-on`,
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
