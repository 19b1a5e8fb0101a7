// A mutating admission webhook of the tests' own, as a service mesh or a log agent runs one: it
// injects a sidecar into the pods of a namespace, after the add-on's mutating webhook.
import { once } from 'node:events';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { AdmissionregistrationV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { issueWithNewCa } from '../../src/tls/certificates.ts';
import type { ControlPlane } from './control-plane.ts';
import { waitFor } from './wait.ts';

/**
 * A mutating admission webhook as service meshes and log agents run: it adds `sidecar` to every
 * pod created in `target` that does not have it. Its configuration's name sorts after ours, so
 * the API server calls it after our mutating webhook.
 */
export async function startInjector(t: { teardown(fn: () => unknown): void }, cp: ControlPlane, target: string, sidecar: V1Container) {
  const tls = await issueWithNewCa({ hosts: ['127.0.0.1'], validityMs: 3_600_000, now: new Date() });
  let calls = 0;
  const server = createServer({ key: tls.key, cert: tls.cert }, (request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      calls++;
      const review = JSON.parse(body) as { request: { uid: string; object: V1Pod } };
      const injected = review.request.object.spec?.containers.some((c) => c.name === sidecar.name);
      const patch = injected ? [] : [{ op: 'add', path: '/spec/containers/-', value: sidecar }];
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
  const configurationName = `zz-${sidecar.name}-injector`;
  const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  await admission.createMutatingWebhookConfiguration({
    body: {
      metadata: { name: configurationName },
      webhooks: [
        {
          name: `inject.${sidecar.name}.example.com`,
          clientConfig: { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/inject`, caBundle: Buffer.from(tls.caBundle).toString('base64') },
          rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'] }],
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': target } },
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: 'Fail',
          reinvocationPolicy: 'Never',
        },
      ],
    },
  });
  t.teardown(() => admission.deleteMutatingWebhookConfiguration({ name: configurationName }).catch(() => undefined));
  // The API server picks a new configuration up within a moment: a server-side dry run shows when.
  await waitFor('the injector to be called', async () => {
    const dryRun = await cp.kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], { namespace: target, input: JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'probe' }, spec: { containers: [{ name: 'main', image: 'busybox:1.36' }] } }) });
    return dryRun.code === 0 && (JSON.parse(dryRun.stdout) as V1Pod).spec?.containers.some((c) => c.name === sidecar.name);
  });
  return { configurationName, calls: () => calls };
}
