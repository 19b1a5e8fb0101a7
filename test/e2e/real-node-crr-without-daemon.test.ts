// The crr mechanism where no kruise-daemon serves the node (a node pool the daemon does not
// tolerate, Kruise's KruiseDaemon gate off): OpenKruise's manager completes the watcher's
// ContainerRecreateRequest after a minute without the container having been touched. The Job
// must not run on: the watcher ends the sidecar from outside, with a crr-not-done warning, a grace
// period and a minute after the main container finished. Kruise's own controller leaves it running.
// With --kill-mechanism auto (the chart's default), no request is sent where no kruise-daemon pod
// is ready: the node's pods are signalled at once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ENV_WHEN_JOB_EXIT } from '../../src/policy/index.ts';
import { expectJobStoppedBy } from '../support/endings.ts';
import { startKruise } from '../support/kruise.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { containerStatus, startRealCluster, testContainer } from '../support/real-stack.ts';
import { registeringWebhooks, startServe } from '../support/serve-process.ts';
import { apply, podOfJob, waitForJob, waitForWebhooksInEffect } from '../support/stack.ts';
import { waitFor } from '../support/wait.ts';
import { jobYaml } from '../support/pods.ts';

if (canRunRealNode(t)) {
  const cluster = await startRealCluster(t, { node: { images: ['test-container'] } });
  const { cp, node } = cluster;
  // The manager alone: no daemon on any node.
  const kruise = await startKruise(cp, { nodes: [] });
  t.teardown(() => kruise.stop());
  const certDir = mkdtempSync(join(tmpdir(), 'st-e2e-certs-'));
  t.teardown(() => rmSync(certDir, { recursive: true, force: true }));
  const serve = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, ...registeringWebhooks(port, 'Fail'), '--kill-mechanism', 'crr']);
  t.teardown(() => serve.stop());
  const noDaemonJob = (name: string) =>
    jobYaml(name, {
      spec: '\n      terminationGracePeriodSeconds: 2',
      containers: [testContainer('main', ['main', '--sleep', '2s']), testContainer('proxy', ['sidecar'], [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }])],
    });

  t.test('no kruise-daemon on the node: the request completes without a kill, and the watcher ends the sidecar from outside; the Job completes', async (t) => {
    const namespace = await cp.createNamespace();
    await apply(cp, namespace, noDaemonJob('no-daemon'));
    try {
      // 2 s of work, 2 s of grace and a minute, then the quick-exit image and the kubelet.
      await waitForJob(cluster, namespace, 'no-daemon', 'Complete', 240_000);
    } catch (err) {
      t.comment(kruise.logTails());
      t.comment(serve.output().split('\n').slice(-40).join('\n'));
      throw err;
    }
    const pod = await podOfJob(cluster, namespace, 'no-daemon');
    const podName = pod.metadata!.name!;
    const main = await containerStatus(cluster, namespace, podName, 'main', (s) => s.state?.terminated !== undefined);
    const proxy = await containerStatus(cluster, namespace, podName, 'proxy', (s) => s.state?.terminated !== undefined);
    t.equal(proxy.state?.terminated?.exitCode, 0, "the sidecar's place taken by the quick-exit image, which exits 0");
    t.equal(proxy.restartCount, 1, 'the kubelet killed the sidecar and ran the quick-exit image in its place');
    t.equal(proxy.lastState?.terminated?.exitCode, 0, "the sidecar itself exited 0 on the kubelet's SIGTERM");
    const waited = (Date.parse(String(proxy.lastState?.terminated?.finishedAt)) - Date.parse(String(main.state?.terminated?.finishedAt))) / 1000;
    t.ok(waited >= 62, `the sidecar was left a grace period (2 s) and a minute for kruise-daemon, and ended ${waited} s after the main container`);
    t.comment(`seconds from the main container's exit to the sidecar's: ${waited}`);
    const [ending] = await expectJobStoppedBy(t, cluster, namespace, 'no-daemon', { proxy: ['crr', 'image'] }, { warnings: ['crr-not-done'] });
    t.match(ending?.warnings[0]?.message, new RegExp(`its ContainerRecreateRequest did not stop it \\(no kruise-daemon serves ${node.name}, the daemon failed, or the request was refused\\); ending it from outside: its image is replaced by the quick-exit image`));
  });

  t.test('auto: OpenKruise serves ContainerRecreateRequests but no kruise-daemon pod is ready, so no request is sent; the signal container stops the sidecar at once', async (t) => {
    await serve.stop();
    const auto = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, ...registeringWebhooks(port, 'Fail'), '--kill-mechanism', 'auto']);
    t.teardown(() => auto.stop());
    const said = (msg: RegExp) => auto.logs().find((line) => typeof line.msg === 'string' && msg.test(line.msg));
    // The configurations point at the serve stopped above until this one registers them: pods wait on it.
    await waitFor('the webhook configurations registered by this serve', () => said(/^webhook configurations registered$/));
    t.match(said(/^no ready kruise-daemon pod/), { level: 40, kruiseNamespace: 'kruise-system', msg: /in namespace kruise-system: no node acts on ContainerRecreateRequests, so sidecars are stopped by signal containers until one does/ }, 'the watcher warns at start that it will send no request');
    t.match(said(/^watcher starting$/), { killMechanism: 'crr' }, 'the mechanism is still crr: a node whose daemon becomes ready gets requests');
    const namespace = await cp.createNamespace();
    await waitForWebhooksInEffect(cp, namespace, `webhooks at ${auto.url}`);
    await apply(cp, namespace, noDaemonJob('auto-no-daemon'));
    try {
      await waitForJob(cluster, namespace, 'auto-no-daemon', 'Complete', 60_000);
    } catch (err) {
      t.comment(auto.output().split('\n').slice(-40).join('\n'));
      throw err;
    }
    const [ending] = await expectJobStoppedBy(t, cluster, namespace, 'auto-no-daemon', { proxy: 'signal' });
    t.equal(ending?.sidecars.find((s) => s.container === 'proxy')?.crr, undefined, 'no ContainerRecreateRequest was made for the pod');
    const pod = await podOfJob(cluster, namespace, 'auto-no-daemon');
    const main = await containerStatus(cluster, namespace, pod.metadata!.name!, 'main', (s) => s.state?.terminated !== undefined);
    const proxy = await containerStatus(cluster, namespace, pod.metadata!.name!, 'proxy', (s) => s.state?.terminated !== undefined);
    const waited = (Date.parse(String(proxy.state?.terminated?.finishedAt)) - Date.parse(String(main.state?.terminated?.finishedAt))) / 1000;
    t.ok(waited < 30, `the sidecar exited ${waited} s after the main container, not after the minute a request would have waited`);
    t.comment(`seconds from the main container's exit to the sidecar's: ${waited}`);
  });
}
