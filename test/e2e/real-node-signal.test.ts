// The signal mechanism on a real node: kubelet, containerd and runc run the containers, the
// stop-sidecar image runs the ephemeral container that sends SIGTERM, and what the tests read is
// what kubelet reports (container state, exit code) and the containers' own logs.
//
// The users a real cluster has: a root sidecar with nothing set on the pod, a sidecar with
// runAsUser, a pod that only says runAsNonRoot (the sidecar's user comes from its image), and a
// namespace that enforces the restricted Pod Security level. And a sidecar that ignores SIGTERM,
// ended from outside by its quick-exit image (docs/sidecars.md); and one whose exit code 143 a
// Job's podFailurePolicy judges, which fails the Job as it does under OpenKruise, with the warning
// at kubectl apply and the watcher's event that name the rule.
import type { V1Container, V1SecurityContext } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, EVENT_REASONS } from '../../src/policy/index.ts';
import { apiFeatures, kubernetesVersion } from '../support/control-plane.ts';
import { expectJobStoppedBy, stopRecordOfJob } from '../support/endings.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { TEST_IMAGE, containerLog, containerStatus, startRealStack, testContainer } from '../support/real-stack.ts';
import { apply, eventsOf, podOfJob, waitForJob } from '../support/stack.ts';
import { jobYaml } from '../support/pods.ts';
import { waitFor } from '../support/wait.ts';

const NONROOT_IMAGE = 'sidecar-terminator.local/test-container-nonroot:1';
const version = await kubernetesVersion();
const keepsContainerUser = apiFeatures(version).containerUser;

/** A main container that works two seconds and exits 0, and a sidecar that logs the signal it gets. */
function containers(sidecar: { image: string; securityContext?: V1SecurityContext; args?: string[] }, main: { securityContext?: V1SecurityContext } = {}): V1Container[] {
  return [
    testContainer('main', ['main', '--sleep', '2s'], [], main.securityContext ? { securityContext: main.securityContext } : {}),
    testContainer('sidecar', sidecar.args ?? ['sidecar'], [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }], { image: sidecar.image, ...(sidecar.securityContext ? { securityContext: sidecar.securityContext } : {}) }),
  ];
}

const RESTRICTED_CONTAINER: V1SecurityContext = { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };

if (canRunRealNode(t)) {
  const stack = await startRealStack(t, {
    node: { images: ['test-container', 'test-container-nonroot'] },
    serveArgs: ['--kill-mechanism', 'signal'],
  });
  const { cp } = stack;
  // The scenarios run side by side, each in its own namespace: most of their time is waiting.
  t.jobs = 8;

  /** Runs the Job to completion and checks that the sidecar itself got SIGTERM and exited 0. */
  async function stoppedBySigterm(t: Test, namespace: string, name: string, uid: number): Promise<void> {
    await waitForJob(stack, namespace, name, 'Complete', 180_000);
    const pod = await podOfJob(stack, namespace, name);
    const podName = pod.metadata!.name!;
    const sidecar = await containerStatus(stack, namespace, podName, 'sidecar', (s) => s.state?.terminated !== undefined);
    t.equal(sidecar.state?.terminated?.exitCode, 0, 'kubelet reports the sidecar exited 0');
    t.equal(sidecar.restartCount, 0, 'the sidecar was never restarted');
    t.match(await containerLog(cp, namespace, podName, 'sidecar'), new RegExp(`uid=${uid} sidecar: received SIGTERM, exiting with code 0`), 'the sidecar logged SIGTERM, as its own user');
    const signal = pod.spec?.ephemeralContainers?.find((c) => c.targetContainerName === 'sidecar');
    t.ok(signal, 'an ephemeral container targeted the sidecar');
    const signalStatus = await containerStatus(stack, namespace, podName, signal!.name, (s) => s.state?.terminated !== undefined);
    // 0, or 137 when the sidecar's exit ended their shared PID namespace before the signal container exited.
    t.ok([0, 137].includes(signalStatus.state!.terminated!.exitCode), `the signal container's kill succeeded (exit code ${signalStatus.state?.terminated?.exitCode})`);
    t.notMatch(signalStatus.state?.terminated?.message ?? '', /EPERM/, 'no permission error');
    const reasons = (await eventsOf(stack, namespace, podName)).map((e) => e.reason);
    t.notOk(reasons.includes('SidecarTerminationFailed'), `no failure event (events: ${reasons.join(', ')})`);
    await expectJobStoppedBy(t, stack, namespace, name, { sidecar: 'signal' });
    const record = await stopRecordOfJob(stack, namespace, name);
    t.match(record, { phase: 'Succeeded', mains: [{ name: 'main', exitCode: 0, reason: 'Completed' }], sidecars: [{ name: 'sidecar', stoppedBy: ['signal'], exitCode: 0 }] }, "the stop record in the pod's SidecarTerminated condition");
    t.ok(record.sidecars[0]!.secondsAfterMains! >= 0, `the sidecar ended ${record.sidecars[0]?.secondsAfterMains}s after the main container`);
  }

  t.test('Never: a root sidecar with nothing set on the pod is stopped by SIGTERM, the Job completes', { buffered: true }, async (t) => {
    const namespace = await cp.createNamespace();
    await apply(cp, namespace, jobYaml('root-sidecar', { containers: containers({ image: TEST_IMAGE }) }));
    await stoppedBySigterm(t, namespace, 'root-sidecar', 0);
  });

  t.test('a sidecar with runAsUser: 1337 is stopped by SIGTERM', { buffered: true }, async (t) => {
    const namespace = await cp.createNamespace();
    await apply(
      cp,
      namespace,
      jobYaml('run-as-user', {
        containers: containers({ image: TEST_IMAGE, securityContext: { runAsUser: 1337 } }),
      }),
    );
    await stoppedBySigterm(t, namespace, 'run-as-user', 1337);
  });

  t.test('a pod with runAsNonRoot whose sidecar runs as its image\'s numeric user is stopped by SIGTERM', { buffered: true }, async (t) => {
    const namespace = await cp.createNamespace();
    await apply(
      cp,
      namespace,
      jobYaml('non-root-image', {
        spec: '\n      securityContext:\n        runAsNonRoot: true',
        containers: containers({ image: NONROOT_IMAGE }, { securityContext: { runAsUser: 1000 } }),
      }),
    );
    if (keepsContainerUser) {
      await stoppedBySigterm(t, namespace, 'non-root-image', 1337);
      return;
    }
    // The API server drops the user kubelet reports: unknown, and root is forbidden. Refused, saying what to set.
    const podName = (await podOfJob(stack, namespace, 'non-root-image')).metadata!.name!;
    const refused = await waitFor('the SidecarTerminationFailed event', async () => (await eventsOf(stack, namespace, podName)).find((e) => e.reason === 'SidecarTerminationFailed'), { timeoutMs: 180_000 });
    t.match(refused.message, /its user is unknown .* set spec\.containers\[1\]\.securityContext\.runAsUser to the uid the sidecar runs as/, `Kubernetes ${version.gitVersion}: refused, naming the field to set`);
  });

  t.test('in a namespace enforcing the restricted Pod Security level the sidecar is stopped by SIGTERM', { buffered: true }, async (t) => {
    const namespace = await cp.createNamespace();
    const labelled = await cp.kubectl(['label', 'namespace', namespace, 'pod-security.kubernetes.io/enforce=restricted']);
    t.equal(labelled.code, 0, labelled.stderr);
    await apply(
      cp,
      namespace,
      jobYaml('restricted', {
        spec: '\n      securityContext:\n        runAsNonRoot: true\n        runAsUser: 1337\n        seccompProfile: { type: RuntimeDefault }',
        containers: containers({ image: TEST_IMAGE, securityContext: RESTRICTED_CONTAINER }, { securityContext: RESTRICTED_CONTAINER }),
      }),
    );
    await stoppedBySigterm(t, namespace, 'restricted', 1337);
  });

  t.test('a sidecar whose PID 1 handles SIGTERM and keeps running is ended from outside: the quick-exit image in its place', { buffered: true }, async (t) => {
    const namespace = await cp.createNamespace();
    await apply(
      cp,
      namespace,
      jobYaml('ignores-sigterm', {
        spec: '\n      terminationGracePeriodSeconds: 5',
        containers: containers({ image: TEST_IMAGE, args: ['sidecar', '--ignore-term'] }),
      }),
    );
    await waitForJob(stack, namespace, 'ignores-sigterm', 'Complete', 180_000);
    const pod = await podOfJob(stack, namespace, 'ignores-sigterm');
    const podName = pod.metadata!.name!;
    const failure = (await eventsOf(stack, namespace, podName)).find((e) => e.reason === 'SidecarTerminationFailed');
    t.match(failure, { action: 'signal-ignored', message: /sidecar sidecar still runs 5s after SIGTERM .*; ending it from outside: its image is replaced by the quick-exit image/ }, 'the event says the sidecar ignores SIGTERM, and how it is ended');
    const sidecar = await containerStatus(stack, namespace, podName, 'sidecar', (s) => s.state?.terminated !== undefined);
    t.match(sidecar, { restartCount: 1, state: { terminated: { exitCode: 0 } }, lastState: { terminated: { exitCode: 137 } } }, 'the kubelet killed it (137) and ran the quick-exit image, which exited 0');
    const signal = await containerStatus(stack, namespace, podName, 'stop-sidecar', (s) => s.state?.terminated !== undefined);
    t.equal(signal.state?.terminated?.exitCode, 4, 'the signal container said it still ran');
    t.match(signal.state?.terminated?.message, /Z sending SIGTERM to PID 1 \(\/test-container sidecar --ignore-term\)\n.*Z the sidecar still runs 5s after it was told to stop/, 'after its SIGTERM, each step with its time');
    // The fallback this test is about: told by its signal container, then its image replaced (it sets no command).
    await expectJobStoppedBy(t, stack, namespace, 'ignores-sigterm', { sidecar: ['signal', 'image'] }, { warnings: ['signal-ignored'] });
    t.match(await stopRecordOfJob(stack, namespace, 'ignores-sigterm'), { phase: 'Succeeded', sidecars: [{ name: 'sidecar', stoppedBy: ['signal', 'image'], exitCode: 0 }] }, 'the stop record: told by SIGTERM, then its image replaced');
  });

  // A proxy whose shutdown endpoint ends it before its answer is written (cloud-sql-proxy can):
  // the request did its work, and the connection closed without an answer is not a failure to
  // cover with SIGTERM while the sidecar is exiting. One that closes it and runs on is sent SIGTERM.
  // Each request or signal is written before it is sent: the sidecar, PID 1 of the namespace the
  // signal container shares, may exit on it at once, and the kernel then kills the signal container
  // (137) wherever it is. So an account that ends early ends just after such a line.
  const request = /^.*Z POST http:\/\/localhost:8091\/quit: sending the shutdown request\n/;
  for (const [name, listen, path, said] of [
    ['closes-and-exits', ['--listen', ':8091', '--exit-on-request'], 'http', new RegExp(`${request.source}(.*Z POST http://localhost:8091/quit: the connection closed without an answer \\(.*\\); watching the sidecar for 3s\\n(.*Z the sidecar exited\\n)?)?$`)],
    ['closes-and-runs', ['--listen', ':8091'], 'signal', new RegExp(`${request.source}.*Z POST http://localhost:8091/quit: the connection closed without an answer \\(.*\\); watching the sidecar for 3s\\n.*Z POST http://localhost:8091/quit: the sidecar still runs: sending SIGTERM instead\\n.*Z sending SIGTERM to PID 1 \\(/test-container sidecar --listen :8091\\)\\n(.*Z the sidecar exited\\n)?$`)],
  ] as const) {
    t.test(`a shutdown request whose connection the sidecar closes without an answer, ${name}: ${path === 'http' ? 'it exits on the request, no SIGTERM' : 'SIGTERM a few seconds later'}`, { buffered: true }, async (t) => {
      const namespace = await cp.createNamespace();
      await apply(cp, namespace, jobYaml(name, { annotations: { 'stop.sidecar-terminator.io/sidecar': 'POST http://localhost:8091/quit' }, containers: containers({ image: TEST_IMAGE, args: ['sidecar', ...listen] }) }));
      await waitForJob(stack, namespace, name, 'Complete', 180_000);
      const [ending] = await expectJobStoppedBy(t, stack, namespace, name, { sidecar: path });
      const signal = ending?.sidecars[0]?.signal;
      t.match(signal?.message, said, `the signal container says what it did, step by step (exit code ${signal?.exitCode})`);
      const pod = await podOfJob(stack, namespace, name);
      t.match(await containerLog(cp, namespace, pod.metadata!.name!, 'sidecar'), path === 'http' ? /sidecar: received a request on :8091, exiting with code 0 without answering/ : /sidecar: received SIGTERM, exiting with code 0/);
    });
  }

  t.test('containers proxy and stop-proxy, both marked: both stopped by SIGTERM, no name collides', { buffered: true }, async (t) => {
    const namespace = await cp.createNamespace();
    const marked = (name: string) => `        - name: ${name}
          image: ${TEST_IMAGE}
          args: ["sidecar"]
          env:
            - name: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT
              value: "true"
`;
    await apply(cp, namespace, jobYaml('collide', { containers: `        - name: main
          image: ${TEST_IMAGE}
          args: ["main", "--sleep", "2s"]
${marked('proxy')}${marked('stop-proxy')}` }));
    await waitForJob(stack, namespace, 'collide', 'Complete', 180_000);
    const pod = await podOfJob(stack, namespace, 'collide');
    for (const name of ['proxy', 'stop-proxy']) {
      const sidecar = await containerStatus(stack, namespace, pod.metadata!.name!, name, (s) => s.state?.terminated !== undefined);
      t.equal(sidecar.state?.terminated?.exitCode, 0, `${name} exited 0`);
      t.match(await containerLog(cp, namespace, pod.metadata!.name!, name), /received SIGTERM/, `${name} got SIGTERM`);
    }
    const names = [...pod.spec!.containers, ...(pod.spec!.ephemeralContainers ?? [])].map((c) => c.name);
    t.equal(new Set(names).size, names.length, `every container name is unique (${names.join(', ')})`);
    await expectJobStoppedBy(t, stack, namespace, 'collide', { proxy: 'signal', 'stop-proxy': 'signal' });
  });

  t.test("a podFailurePolicy rule without containerName: warned of at kubectl apply; the sidecar's 143 fails the Job as under OpenKruise, and the watcher's event names the rule; with ignore-exit-code the same Job completes", { buffered: true }, async (t) => {
    const namespace = await cp.createNamespace();
    // A retry left: without the rule, the Job would run a second pod; the rule fails it at the first.
    const jobSpec = { backoffLimit: 2, podFailurePolicy: { rules: [{ action: 'FailJob', onExitCodes: { operator: 'NotIn' as const, values: [0] } }] } };
    const job = (name: string, env: Array<{ name: string; value: string }>) =>
      jobYaml(name, { jobSpec, containers: [testContainer('main', ['main', '--sleep', '2s']), testContainer('sidecar', ['sidecar', '--on-term', '143'], [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, ...env])] });
    const warnings = await apply(cp, namespace, job('judged', []));
    t.match(warnings, /Warning: spec\.podFailurePolicy\.rules\[0\]\.onExitCodes: this rule \(FailJob\) matches exit code 137 or 143 of sidecar sidecar/, 'kubectl shows the warning, with the field');
    t.equal(await apply(cp, namespace, job('ignored', [{ name: ENV_IGNORE_EXIT_CODE, value: 'true' }])), '', 'its exit code ignored: nothing to warn of');

    const failed = await waitForJob(stack, namespace, 'judged', 'Failed', 180_000);
    t.match(failed.status?.conditions?.find((c) => c.type === 'Failed'), { reason: 'PodFailurePolicy', message: /Container sidecar for pod .* failed with exit code 143 matching FailJob rule at index 0/ }, 'the Job controller failed the Job by the rule, at its first pod');
    const pod = await podOfJob(stack, namespace, 'judged');
    const podName = pod.metadata!.name!;
    const sidecar = await containerStatus(stack, namespace, podName, 'sidecar', (s) => s.state?.terminated !== undefined);
    t.equal(sidecar.state?.terminated?.exitCode, 143, 'the sidecar exited 143 on SIGTERM');
    const event = await waitFor('the SidecarExitFailedPod event', async () => (await eventsOf(stack, namespace, podName)).find((e) => e.reason === EVENT_REASONS.exitFailedPod), { timeoutMs: 60_000 });
    t.match(event, {
      type: 'Warning',
      action: 'sidecar-exit-failed-pod',
      related: { kind: 'Job', name: 'judged' },
      message: /^the pod failed although its main containers succeeded: sidecar sidecar exited 143 after it was stopped .*; the Job's podFailurePolicy\.rules\[0\] \(FailJob\) matched that exit code, so the pod fails the whole Job, with no retry; set KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE="true" on sidecar .* and set onExitCodes\.containerName to the main container/,
    });
    await expectJobStoppedBy(t, stack, namespace, 'judged', { sidecar: 'signal' }, { warnings: ['sidecar-exit-failed-pod'] });

    await waitForJob(stack, namespace, 'ignored', 'Complete', 180_000);
    await expectJobStoppedBy(t, stack, namespace, 'ignored', { sidecar: 'phase' });
  });

  t.test('a marker listed twice, "true" then "false": stopped as OpenKruise would, with a warning at kubectl apply', { buffered: true }, async (t) => {
    const namespace = await cp.createNamespace();
    const containers = [testContainer('main', ['main', '--sleep', '2s']), testContainer('sidecar', ['sidecar'], [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, { name: ENV_WHEN_JOB_EXIT, value: 'false' }])];
    const warnings = await apply(cp, namespace, jobYaml('twice', { containers }));
    t.match(warnings, /Warning: .*KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT/, 'kubectl shows a warning about the duplicate');
    await stoppedBySigterm(t, namespace, 'twice', 0);
  });
}
