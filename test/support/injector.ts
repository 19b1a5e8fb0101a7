// Mutating admission webhooks of the tests' own, as clusters run them after the add-on's: one that
// injects a sidecar into the pods of a namespace, as a service mesh or a log agent does, and one
// that rewrites the init containers as a webhook built on a client library older than native
// sidecars does (the field it does not know, restartPolicy, is gone).
import { once } from 'node:events';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { AdmissionregistrationV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { issueWithNewCa } from '../../src/tls/certificates.ts';
import type { ControlPlane } from './control-plane.ts';
import { waitFor } from './wait.ts';

type JsonPatch = Array<{ op: string; path: string; value?: unknown }>;

interface TestWebhook {
  /** Sorts after the add-on's configuration, so the API server calls it after the add-on's webhooks. */
  configurationName: string;
  webhookName: string;
  /** The namespace whose pods it is called for. */
  target: string;
  reinvocationPolicy: 'Never' | 'IfNeeded';
  mutate(pod: V1Pod): JsonPatch;
  /** Whether a server-side dry run of a pod shows the webhook in effect. */
  inEffect(pod: V1Pod): boolean;
}

/** Serves `webhook`, registers it, and waits until the API server calls it; removed at teardown. */
async function startTestWebhook(t: { teardown(fn: () => unknown): void }, cp: ControlPlane, webhook: TestWebhook, probe: V1Pod) {
  const tls = await issueWithNewCa({ hosts: ['127.0.0.1'], validityMs: 3_600_000, now: new Date() });
  let calls = 0;
  const server = createServer({ key: tls.key, cert: tls.cert }, (request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      calls++;
      const review = JSON.parse(body) as { request: { uid: string; object: V1Pod } };
      const patch = webhook.mutate(review.request.object);
      const answer = { uid: review.request.uid, allowed: true, ...(patch.length ? { patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') } : {}) };
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: answer }));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  await admission.createMutatingWebhookConfiguration({
    body: {
      metadata: { name: webhook.configurationName },
      webhooks: [
        {
          name: webhook.webhookName,
          clientConfig: { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/mutate`, caBundle: Buffer.from(tls.caBundle).toString('base64') },
          rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'] }],
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': webhook.target } },
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: 'Fail',
          reinvocationPolicy: webhook.reinvocationPolicy,
        },
      ],
    },
  });
  t.teardown(() => admission.deleteMutatingWebhookConfiguration({ name: webhook.configurationName }).catch(() => undefined));
  // The API server picks a new configuration up within a moment: a server-side dry run shows when.
  await waitFor(`the webhook ${webhook.webhookName} to be called`, async () => {
    const dryRun = await cp.kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], { namespace: webhook.target, input: JSON.stringify(probe) });
    return dryRun.code === 0 && webhook.inEffect(JSON.parse(dryRun.stdout) as V1Pod);
  });
  return { configurationName: webhook.configurationName, calls: () => calls };
}

const probePod = (initContainers: V1Container[] = []): V1Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'probe' },
  spec: { ...(initContainers.length ? { initContainers } : {}), containers: [{ name: 'main', image: 'busybox:1.36' }] },
});

/**
 * A mutating admission webhook as service meshes and log agents run: it adds `sidecar` to every
 * pod created in `target` that does not have it, after our mutating webhook. `id` tells apart
 * several injectors of the same sidecar (one per namespace).
 */
export async function startInjector(t: { teardown(fn: () => unknown): void }, cp: ControlPlane, target: string, sidecar: V1Container, id = sidecar.name) {
  const has = (pod: V1Pod) => pod.spec?.containers.some((c) => c.name === sidecar.name) ?? false;
  return startTestWebhook(
    t,
    cp,
    {
      configurationName: `zz-${id}-injector`,
      webhookName: `inject.${id}.example.com`,
      target,
      reinvocationPolicy: 'Never',
      mutate: (pod) => (has(pod) ? [] : [{ op: 'add', path: '/spec/containers/-', value: sidecar }]),
      inEffect: has,
    },
    probePod(),
  );
}

/**
 * A mutating admission webhook built on a client library older than native sidecars: it rewrites
 * the init containers of every pod created in `target` (as such a webhook does when it adds an
 * environment variable to each), and restartPolicy, a field its library does not know, is lost.
 * With reinvocationPolicy IfNeeded the API server calls it again after the add-on's second call.
 */
export async function startInitContainerRewriter(t: { teardown(fn: () => unknown): void }, cp: ControlPlane, target: string, reinvocationPolicy: 'Never' | 'IfNeeded') {
  const stripped = (pod: V1Pod) => (pod.spec?.initContainers ?? []).map((container) => Object.fromEntries(Object.entries(container).filter(([field]) => field !== 'restartPolicy')));
  const hasRestartPolicy = (pod: V1Pod) => (pod.spec?.initContainers ?? []).some((c) => c.restartPolicy !== undefined);
  return startTestWebhook(
    t,
    cp,
    {
      configurationName: `zz-old-client-${reinvocationPolicy.toLowerCase()}`,
      webhookName: `rewrite-init.${reinvocationPolicy.toLowerCase()}.example.com`,
      target,
      reinvocationPolicy,
      mutate: (pod) => (hasRestartPolicy(pod) ? [{ op: 'replace', path: '/spec/initContainers', value: stripped(pod) }] : []),
      // Without the add-on's webhook in the namespace (or before it puts the field back), the probe's field is gone.
      inEffect: (pod) => !hasRestartPolicy(pod),
    },
    probePod([{ name: 'probe-sidecar', image: 'busybox:1.36', restartPolicy: 'Always' }]),
  );
}
