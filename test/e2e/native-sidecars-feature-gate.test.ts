// Native sidecar migration on an API server whose SidecarContainers feature gate is off (possible up
// to Kubernetes 1.32; the gate is locked on since 1.33): the API server drops restartPolicy from
// the migrated init containers, which would then never finish and hold the main containers back
// forever. The validating webhook refuses such pods, saying why and what to change: kubectl shows
// it, and a Job's FailedCreate event carries it.
import t from 'tap';
import { ENV_WHEN_JOB_EXIT } from '../../src/policy/index.ts';
import { waitFor } from '../support/wait.ts';
import { kubernetesVersion } from '../support/control-plane.ts';
import { apply, startStack } from '../support/stack.ts';
import { jobYaml } from '../support/pods.ts';

const version = await kubernetesVersion();
if (version.minor >= 33) {
  t.plan(0, `skipped: Kubernetes ${version.gitVersion} locks the SidecarContainers feature gate on`);
} else {
  // Every pod with a kill sidecar is refused here, the stack's own probe too: the test waits itself.
  const stack = await startStack(t, { controlPlane: { apiServerArgs: ['--feature-gates=SidecarContainers=false'] }, serveArgs: ['--native-sidecars', 'all'], webhooksInEffect: false });
  const { cp } = stack;
  const proxy = { name: 'proxy', image: 'envoyproxy/envoy:v1.31.0', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }] };
  const containers = [{ name: 'main', image: 'busybox:1.36' }, proxy];
  const pod = JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'gated' }, spec: { restartPolicy: 'Never', containers } });
  const REFUSAL = /native sidecar lost: spec\.initContainers\[0\]\.restartPolicy: Required value: proxy was moved here as a native sidecar .* the API server dropped its restartPolicy: Always, as it does when the SidecarContainers feature gate is off; .*turn the feature gate on, or set --native-sidecars=none/;

  t.test('the webhook migrates (the server is 1.29 or later), the API server drops the move, kubectl shows the refusal', async (t) => {
    t.match(stack.serve.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('native sidecar migration on')), { kubernetes: version.gitVersion });
    const namespace = await cp.createNamespace();
    // Registered just after serve is ready: wait until the API server calls it.
    const refused = await waitFor('the refusal', async () => {
      const created = await cp.kubectl(['create', '-f', '-'], { namespace, input: pod });
      return created.code !== 0 && REFUSAL.test(created.stderr) && created;
    });
    t.match(refused.stderr, /admission webhook "validate.sidecar-terminator.io" denied the request: 1 native sidecar lost/);
  });

  t.test("a Job's pods are refused too: its FailedCreate event says why", async (t) => {
    const namespace = await cp.createNamespace();
    // JSON is YAML: the container list as one flow sequence.
    await apply(cp, namespace, jobYaml('gated', { containers: `        ${JSON.stringify(containers)}` }));
    const event = await waitFor('the FailedCreate event', async () =>
      (await stack.core.listNamespacedEvent({ namespace, fieldSelector: 'reason=FailedCreate' })).items.find((e) => e.involvedObject.name === 'gated'),
    );
    t.match(event.message, REFUSAL);
    t.same((await stack.core.listNamespacedPod({ namespace })).items, [], 'no pod that would hang');
  });
}
