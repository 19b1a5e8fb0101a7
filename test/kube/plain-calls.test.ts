// withPlainPodCalls, withPlainCustomObjectCalls: the watcher's calls for each pod, as plain JSON,
// to the paths the generated API would use; every other method is the generated API's.
import t from 'tap';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { withPlainCustomObjectCalls, withPlainPodCalls } from '../../src/kube/plain-calls.ts';
import { recordingServer } from '../support/recording-api-server.ts';

t.test('pod reads, pod patches and events go as plain JSON to the same paths', async (t) => {
  const { seen, kubeConfig } = await recordingServer(t, 200, { metadata: { name: 'p', creationTimestamp: '2026-11-29T17:00:00Z' } });
  const generated = kubeConfig.makeApiClient(CoreV1Api);
  const core = withPlainPodCalls(generated, kubeConfig);
  const pod = await core.readNamespacedPod({ name: 'p', namespace: 'a b' });
  t.equal(pod.metadata?.creationTimestamp, '2026-11-29T17:00:00Z', 'the pod as plain JSON: a timestamp stays a string, as in the watch');
  const patch = [{ op: 'add', path: '/status/phase', value: 'Succeeded' }];
  await core.patchNamespacedPodStatus({ name: 'p', namespace: 'a', body: patch }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch));
  await core.patchNamespacedPodEphemeralcontainers({ name: 'p', namespace: 'a', body: patch });
  await core.patchNamespacedPod({ name: 'p', namespace: 'a', body: { metadata: { labels: { x: 'y' } } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
  await core.createNamespacedEvent({ namespace: 'a', body: { metadata: { name: 'p.1' }, involvedObject: { kind: 'Pod', name: 'p' } }, dryRun: 'All', fieldManager: 'x' });
  t.same(
    seen.map(({ method, url, contentType }) => `${method} ${url} ${contentType ?? '-'}`),
    [
      'GET /api/v1/namespaces/a%20b/pods/p -',
      'PATCH /api/v1/namespaces/a/pods/p/status application/json-patch+json',
      'PATCH /api/v1/namespaces/a/pods/p/ephemeralcontainers application/json-patch+json',
      'PATCH /api/v1/namespaces/a/pods/p application/merge-patch+json',
      'POST /api/v1/namespaces/a/events?dryRun=All&fieldManager=x application/json',
    ],
    'each to its path, with its content type, and the other parameters in the query as the generated API sends them',
  );
  t.same(JSON.parse(seen[1]!.body), patch, 'the patch as given');
  t.same(JSON.parse(seen[4]!.body), { metadata: { name: 'p.1' }, involvedObject: { kind: 'Pod', name: 'p' } }, 'the event as given');

  await core.readNode({ name: 'n' });
  t.equal(seen[5]!.url, '/api/v1/nodes/n', 'another method: the generated one, unchanged');
  t.notOk(Object.hasOwn(core, 'readNode'), 'not one of the plain calls: inherited from the generated API');
});

t.test('custom object creations go as plain JSON', async (t) => {
  const { seen, kubeConfig } = await recordingServer(t, 201, { kind: 'ContainerRecreateRequest' });
  const custom = withPlainCustomObjectCalls(kubeConfig.makeApiClient(CustomObjectsApi), kubeConfig);
  const body = { kind: 'ContainerRecreateRequest', apiVersion: 'apps.kruise.io/v1alpha1', metadata: { name: 'c' }, spec: { podName: 'p' } };
  t.same(await custom.createNamespacedCustomObject({ group: 'apps.kruise.io', version: 'v1alpha1', namespace: 'a', plural: 'containerrecreaterequests', body }), { kind: 'ContainerRecreateRequest' });
  t.match(seen[0], { method: 'POST', url: '/apis/apps.kruise.io/v1alpha1/namespaces/a/containerrecreaterequests', contentType: 'application/json' });
  t.same(JSON.parse(seen[0]!.body), body);
});
