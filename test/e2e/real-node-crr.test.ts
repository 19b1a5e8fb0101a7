// The crr mechanism on a real node with OpenKruise's own components: the watcher creates a
// ContainerRecreateRequest, kruise-manager's webhook completes it (node, pod UID, container ID),
// and kruise-daemon stops the sidecar through containerd. What the test reads is what kubelet
// reports, the sidecar's own log, and the CRR's status as kruise-daemon wrote it. The watcher's
// CRR, as Kruise's webhook completes it, passes the fence that serve registers for the watcher's
// ServiceAccount.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { ENV_WHEN_JOB_EXIT, EVENT_REASONS } from '../../src/policy/index.ts';
import { containerRecreateRequest } from '../../src/watcher/crr.ts';
import { apiFeatures, kubernetesVersion } from '../support/control-plane.ts';
import { expectJobStoppedBy, stopRecordOfJob } from '../support/endings.ts';
import { startKruise } from '../support/kruise.ts';
import { waitFor } from '../support/wait.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { TEST_IMAGE, containerLog, containerStatus, startRealCluster, testContainer } from '../support/real-stack.ts';
import { registeringWebhooks, startServe } from '../support/serve-process.ts';
import { apply, eventsOf, podOfJob, waitForJob, waitForWebhooksInEffect } from '../support/stack.ts';
import { jobYaml } from '../support/pods.ts';

const CRR = { group: 'apps.kruise.io', version: 'v1alpha1', plural: 'containerrecreaterequests' };
/** A main container that exits 0 after `sleep`, and a sidecar marked for the kill. */
const mainAndProxy = (sleep: string) =>
  [testContainer('main', ['main', '--sleep', sleep]), testContainer('proxy', ['sidecar'], [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }])];
/** The watcher's ServiceAccount as serve --register-webhooks fences it by default (its namespace, its name). */
const WATCHER_ACCOUNT = { namespace: 'sidecar-terminator', name: 'sidecar-terminator-watcher' };
const version = await kubernetesVersion();

interface ContainerRecreateRequest {
  metadata: { name: string; labels?: Record<string, string>; ownerReferences?: { kind: string; name: string; uid: string; controller?: boolean }[] };
  spec: { podName: string; containers: { name: string; statusContext?: { containerID?: string } }[] };
  status?: { phase?: string; containerRecreateStates?: { name: string; phase: string; isKilled?: boolean }[] };
}

if (canRunRealNode(t)) {
  const cluster = await startRealCluster(t, { node: { images: ['test-container'] } });
  const { cp, node } = cluster;
  const kruise = await startKruise(cp, { nodes: [node] });
  t.teardown(() => kruise.stop());
  // Started after Kruise: the watcher asks the API server whether it serves ContainerRecreateRequests.
  const certDir = mkdtempSync(join(tmpdir(), 'st-e2e-certs-'));
  t.teardown(() => rmSync(certDir, { recursive: true, force: true }));
  const serve = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, ...registeringWebhooks(port, 'Fail'), '--kill-mechanism', 'crr']);
  t.teardown(() => serve.stop());
  const custom = cp.kubeConfig.makeApiClient(CustomObjectsApi);
  const readCrr = (namespace: string, name: string) =>
    custom.getNamespacedCustomObject({ ...CRR, namespace, name }) as Promise<ContainerRecreateRequest>;

  t.test('kruise-daemon stops the sidecar through containerd; the Job completes; the CRR goes with its pod', async (t) => {
    const namespace = await cp.createNamespace();
    await apply(
      cp,
      namespace,
      jobYaml('crr', {
        containers: mainAndProxy('2s'),
      }),
    );
    try {
      await waitForJob(cluster, namespace, 'crr', 'Complete', 180_000);
    } catch (err) {
      t.comment(kruise.logTails());
      throw err;
    }
    const pod = await podOfJob(cluster, namespace, 'crr');
    const podName = pod.metadata!.name!;
    const uid = pod.metadata!.uid!;

    const proxy = await containerStatus(cluster, namespace, podName, 'proxy', (s) => s.state?.terminated !== undefined);
    t.equal(proxy.state?.terminated?.exitCode, 0, 'kubelet reports the sidecar exited 0');
    t.equal(proxy.restartCount, 0, 'and was not started again');
    t.match(await containerLog(cp, namespace, podName, 'proxy'), /sidecar: received SIGTERM, exiting with code 0/, 'the runtime sent the sidecar SIGTERM');

    // kruise-daemon reports the kill; the request stays Recreating, since a finished Job's
    // container is never started again, until its pod goes (as with Kruise's own controller).
    const crr = await waitFor('kruise-daemon to report the sidecar killed in the CRR', async () => {
      const current = await readCrr(namespace, `sidecar-termination-${uid}`);
      return current.status?.containerRecreateStates?.some((s) => s.name === 'proxy' && s.isKilled) && current;
    });
    t.equal(crr.status?.phase, 'Recreating', 'the CRR is Recreating: its container was stopped and will not start again');
    t.equal(crr.spec.podName, podName, 'the CRR names the pod');
    t.same(crr.spec.containers.map((c) => c.name), ['proxy'], 'and the sidecar only');
    t.equal(crr.metadata.labels?.['crr.apps.kruise.io/node-name'], node.name, "Kruise's webhook labelled it with the node");
    t.equal(crr.metadata.labels?.['crr.apps.kruise.io/pod-uid'], uid, 'and the pod UID');
    t.equal(crr.spec.containers[0]?.statusContext?.containerID, pod.status?.containerStatuses?.find((s) => s.name === 'proxy')?.containerID, 'and the container ID kubelet reported');
    t.same(
      crr.metadata.ownerReferences?.map((o) => ({ kind: o.kind, name: o.name, uid: o.uid, controller: o.controller })),
      [{ kind: 'Pod', name: podName, uid, controller: true }],
      'the pod owns the CRR',
    );
    const reasons = (await eventsOf(cluster, namespace, podName)).map((e) => e.reason);
    t.notOk(reasons.includes('SidecarTerminationFailed'), `no failure event (events: ${reasons.join(', ')})`);
    await expectJobStoppedBy(t, cluster, namespace, 'crr', { proxy: 'crr' });
    const record = await stopRecordOfJob(cluster, namespace, 'crr');
    t.match(record, { phase: 'Succeeded', mains: [{ name: 'main', exitCode: 0 }], sidecars: [{ name: 'proxy', stoppedBy: ['crr'], exitCode: 0 }] }, "the stop record in the pod's SidecarTerminated condition");
    t.ok(record.sidecars[0]!.secondsAfterMains! >= 0, `the sidecar ended ${record.sidecars[0]?.secondsAfterMains}s after the main container`);

    const deleted = await cp.kubectl(['delete', 'job', 'crr', '--cascade=foreground', '--wait=true', '--timeout=120s'], { namespace });
    t.equal(deleted.code, 0, deleted.stderr);
    const gone = await waitFor(
      'the CRR to be garbage-collected with its pod',
      () => readCrr(namespace, `sidecar-termination-${uid}`).then(() => undefined, (err: { code?: number }) => (err.code === 404 ? 'not found' : undefined)),
      { timeoutMs: 120_000 },
    );
    t.equal(gone, 'not found', 'the CRR is gone with the pod');
  });

  t.test('a sidecar that ignores SIGTERM is killed by the runtime after its grace period: exit 137', async (t) => {
    const namespace = await cp.createNamespace();
    const sidecar = (ignoreExitCode: boolean) => `        - name: main
          image: ${TEST_IMAGE}
          args: ["main", "--sleep", "2s"]
        - name: proxy
          image: ${TEST_IMAGE}
          args: ["sidecar", "--ignore-term"]
          env:
            - name: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT
              value: "true"${ignoreExitCode ? '\n            - name: KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE\n              value: "true"' : ''}
`;
    const grace = '\n      terminationGracePeriodSeconds: 3';
    await apply(cp, namespace, jobYaml('ignores-sigterm', { spec: grace, containers: sidecar(false) }));
    await apply(cp, namespace, jobYaml('ignores-sigterm-exit-code-ignored', { spec: grace, containers: sidecar(true) }));

    await waitForJob(cluster, namespace, 'ignores-sigterm', 'Failed', 180_000);
    const failed = await podOfJob(cluster, namespace, 'ignores-sigterm');
    const killed = await containerStatus(cluster, namespace, failed.metadata!.name!, 'proxy', (s) => s.state?.terminated !== undefined);
    t.equal(killed.state?.terminated?.exitCode, 137, 'kruise-daemon stopped it with SIGKILL after SIGTERM was ignored');
    t.match(await containerLog(cp, namespace, failed.metadata!.name!, 'proxy'), /received SIGTERM, ignoring it/, 'it got SIGTERM first');
    t.equal(failed.status?.phase, 'Failed', 'restartPolicy Never: exit 137 fails the pod, and the Job');
    // Read once the pod has left the watch: the watcher says what failed it.
    const said = await waitFor('the SidecarExitFailedPod event', async () => (await eventsOf(cluster, namespace, failed.metadata!.name!)).find((e) => e.reason === EVENT_REASONS.exitFailedPod), { timeoutMs: 60_000 });
    t.match(said.message, /sidecar proxy exited 137 after it was stopped .*; no rule of the Job's podFailurePolicy matched it, so the pod counts as failed toward the Job's backoffLimit/);
    // Told by the CRR alone: kruise-daemon's SIGKILL after the grace period is the CRR's own, no fallback of the add-on.
    await expectJobStoppedBy(t, cluster, namespace, 'ignores-sigterm', { proxy: 'crr' }, { warnings: ['sidecar-exit-failed-pod'] });

    await waitForJob(cluster, namespace, 'ignores-sigterm-exit-code-ignored', 'Complete', 180_000);
    const complete = await podOfJob(cluster, namespace, 'ignores-sigterm-exit-code-ignored');
    t.equal(complete.status?.phase, 'Succeeded', 'with KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE the pod is Succeeded and the Job completes');
    await expectJobStoppedBy(t, cluster, namespace, 'ignores-sigterm-exit-code-ignored', { proxy: ['crr', 'phase'] });
    t.match(await stopRecordOfJob(cluster, namespace, 'ignores-sigterm-exit-code-ignored'), { phase: 'Succeeded', sidecars: [{ name: 'proxy', stoppedBy: ['crr', 'phase'], exitCode: 137 }] }, 'the stop record waited for the kubelet to kill the sidecar: its 137, ignored');
  });

  const fenceSkip = !apiFeatures(version).validatingAdmissionPolicy && `Kubernetes ${version.gitVersion} serves no ValidatingAdmissionPolicy, so there is no fence`;
  t.test("the watcher's ContainerRecreateRequest, as Kruise's webhook completes it, passes the fence of the watcher's ServiceAccount", { skip: fenceSkip }, async (t) => {
    const namespace = await cp.createNamespace();
    const user = `system:serviceaccount:${WATCHER_ACCOUNT.namespace}:${WATCHER_ACCOUNT.name}`;
    // The chart's grant on ContainerRecreateRequests, for this namespace; kubectl acts as the account.
    for (const args of [
      ['create', 'role', 'crr-writer', '--verb=create', '--resource=containerrecreaterequests.apps.kruise.io'],
      ['create', 'rolebinding', 'crr-writer', '--role=crr-writer', `--serviceaccount=${WATCHER_ACCOUNT.namespace}:${WATCHER_ACCOUNT.name}`],
    ]) {
      const result = await cp.kubectl(args, { namespace });
      t.equal(result.code, 0, `kubectl ${args.slice(0, 2).join(' ')}: ${result.stderr}`);
    }
    // The main container runs on: the watcher leaves the pod alone, and the test writes the CRR itself.
    await apply(
      cp,
      namespace,
      jobYaml('fenced', {
        containers: mainAndProxy('1h'),
      }),
    );
    const name = (await podOfJob(cluster, namespace, 'fenced')).metadata!.name!;
    await containerStatus(cluster, namespace, name, 'proxy', (s) => s.state?.running !== undefined);
    const pod = await cp.kubeConfig.makeApiClient(CoreV1Api).readNamespacedPod({ namespace, name });
    const crr = containerRecreateRequest(pod, CRR.version, ['proxy']);
    const create = (body: object) => cp.kubectl(['create', '-f', '-', '--as', user], { namespace, input: JSON.stringify(body) });

    const renamed = await create({ ...crr, metadata: { ...crr.metadata, name: 'restart-proxy' } });
    t.not(renamed.code, 0, 'the fence is in force for the account: a CRR of another name is refused');
    t.match(renamed.stderr, /denied request: sidecar-terminator fence: the watcher may create a ContainerRecreateRequest only named sidecar-termination-<pod uid>/, renamed.stderr);

    const created = await create(crr);
    t.equal(created.code, 0, `the watcher's own CRR is created through Kruise's webhook and the fence: ${created.stderr}`);
    const completed = await readCrr(namespace, crr.metadata.name);
    t.equal(completed.metadata.labels?.['crr.apps.kruise.io/pod-uid'], pod.metadata?.uid, "Kruise's webhook completed it before the fence saw it");
    t.equal(completed.spec.containers[0]?.statusContext?.containerID, pod.status?.containerStatuses?.find((s) => s.name === 'proxy')?.containerID, 'with the container ID');
  });

  // With auto, the chart's default, only nodes with a ready kruise-daemon pod get requests. The
  // daemon killed while a Job runs (an OOM kill, a crash): its pod turns unready, the watcher reads
  // that within --kill-mechanism-check-interval, and the Job's sidecar is signalled instead.
  t.test('auto: a ContainerRecreateRequest while the node\'s kruise-daemon is ready; the daemon killed mid-run, the next sidecar is signalled at once', async (t) => {
    await serve.stop();
    const auto = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, ...registeringWebhooks(port, 'Fail'), '--kill-mechanism', 'auto', '--kill-mechanism-check-interval', '1s']);
    t.teardown(() => auto.stop());
    const said = (msg: RegExp) => auto.logs().filter((line) => typeof line.msg === 'string' && msg.test(line.msg));
    // The configurations point at the serve stopped above until this one registers them: pods wait on it.
    await waitFor('the webhook configurations registered by this serve', () => said(/^webhook configurations registered$/)[0]);
    t.match(said(/^nodes a kruise-daemon serves/)[0], { daemonNodes: 1, nodes: [node.name] }, 'the watcher names the node whose daemon is ready');
    const namespace = await cp.createNamespace();
    await waitForWebhooksInEffect(cp, namespace, `webhooks at ${auto.url}`);
    const failed = (err: unknown) => {
      t.comment(kruise.logTails());
      t.comment(auto.output().split('\n').slice(-40).join('\n'));
      throw err;
    };

    await apply(cp, namespace, jobYaml('daemon-ready', { containers: mainAndProxy('2s') }));
    await waitForJob(cluster, namespace, 'daemon-ready', 'Complete', 120_000).catch(failed);
    await expectJobStoppedBy(t, cluster, namespace, 'daemon-ready', { proxy: 'crr' });

    // The main container outlives the wait below: the daemon is seen gone before it exits.
    await apply(cp, namespace, jobYaml('daemon-killed', { containers: mainAndProxy('25s') }));
    const name = (await podOfJob(cluster, namespace, 'daemon-killed')).metadata!.name!;
    await containerStatus(cluster, namespace, name, 'main', (s) => s.state?.running !== undefined);
    kruise.killDaemon(node.name);
    const warned = await waitFor('the watcher to read that no daemon is ready', async () => said(/^no ready kruise-daemon pod/)[0], { timeoutMs: 15_000 });
    t.match(warned, { level: 40, kruiseNamespace: 'kruise-system' }, 'it warns that no node acts on requests now');
    await waitForJob(cluster, namespace, 'daemon-killed', 'Complete', 120_000).catch(failed);
    const [ending] = await expectJobStoppedBy(t, cluster, namespace, 'daemon-killed', { proxy: 'signal' });
    t.equal(ending?.sidecars.find((s) => s.container === 'proxy')?.crr, undefined, 'no ContainerRecreateRequest was made for the pod');
    const main = await containerStatus(cluster, namespace, name, 'main', (s) => s.state?.terminated !== undefined);
    const proxy = await containerStatus(cluster, namespace, name, 'proxy', (s) => s.state?.terminated !== undefined);
    const waited = (Date.parse(String(proxy.state?.terminated?.finishedAt)) - Date.parse(String(main.state?.terminated?.finishedAt))) / 1000;
    t.ok(Number(warned.time) < Date.parse(String(main.state?.terminated?.finishedAt)), 'the watcher knew the daemon was gone before the main container exited');
    t.ok(waited < 30, `the sidecar exited ${waited} s after the main container, not after the minute an unanswered request waits`);
    t.comment(`seconds from the main container's exit to the sidecar's: ${waited}`);
  });
}
