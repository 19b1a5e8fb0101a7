// The ContainerRecreateRequest, byte for byte as OpenKruise's SidecarTerminator controller sends
// it: Go's encoding/json of Kruise's types (TypeMeta: kind, apiVersion; ObjectMeta: name,
// namespace, ownerReferences from metav1.NewControllerRef; spec: podName, containers[].name,
// strategy{failurePolicy, forceRecreate}), without the zero values Go also writes and the API
// server drops (creationTimestamp: null, status.phase: ""). No labels: Kruise's CRR webhook adds its own.
import t from 'tap';
import { crrName } from '../../src/policy/index.ts';
import { containerRecreateRequest } from '../../src/watcher/crr.ts';
import { jobPod, killSidecar, main } from '../support/pods.ts';

t.test('the request body is what Kruise sends', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy'), killSidecar('sql')], {});
  t.equal(crrName(pod.metadata!.uid!), 'sidecar-termination-uid-1');
  t.equal(
    JSON.stringify(containerRecreateRequest(pod, 'v1alpha1', ['proxy', 'sql'])),
    '{"kind":"ContainerRecreateRequest","apiVersion":"apps.kruise.io/v1alpha1",' +
      '"metadata":{"name":"sidecar-termination-uid-1","namespace":"default",' +
      '"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"job-abc","uid":"uid-1","controller":true,"blockOwnerDeletion":true}]},' +
      '"spec":{"podName":"job-abc","containers":[{"name":"proxy"},{"name":"sql"}],"strategy":{"failurePolicy":"Ignore","forceRecreate":true}}}',
  );
});
