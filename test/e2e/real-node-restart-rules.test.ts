// Container restart rules (Kubernetes 1.35+, gate ContainerRestartRules, beta and on by default) on
// a real node: a main container the kubelet restarts by its own restartPolicy or restartPolicyRules
// inside a restartPolicy: Never pod is not done when it exits, so its sidecar must still serve the
// next run. Each main waits for its sidecar's port on every run and gives up (exit 2) after 20 s:
// a sidecar stopped between two runs fails the Job. Under both kill mechanisms (the signal
// container, and OpenKruise's ContainerRecreateRequest with kruise-daemon), and with
// KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE, whose terminal phase must wait for the last run. And
// with the gate off, as before 1.35: the API server drops the fields, and the main's first exit
// is its last, with or without the add-on.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Container } from '@kubernetes/client-node';
import t from 'tap';
import { CONDITION_REASONS, ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, TERMINATED_CONDITION } from '../../src/policy/index.ts';
import { apiFeatures, kubernetesVersion } from '../support/control-plane.ts';
import { expectJobStoppedBy, stopRecordOfJob, type StopPath } from '../support/endings.ts';
import { startKruise } from '../support/kruise.ts';
import { jobYaml } from '../support/pods.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { containerStatus, startRealCluster, testContainer } from '../support/real-stack.ts';
import { registeringWebhooks, startServe, startWatcherProcess } from '../support/serve-process.ts';
import { apply, podOfJob, waitForJob } from '../support/stack.ts';

const SIDECAR_PORT = 8080;
const version = await kubernetesVersion();

/** A main container that fails its first run (exit `failExit`), then succeeds; every run first waits for the sidecar's port. */
const restartingMain = (restart: Pick<V1Container, 'restartPolicy' | 'restartPolicyRules'>, failExit: number): V1Container =>
  testContainer('main', ['main', '--wait-tcp', `127.0.0.1:${SIDECAR_PORT}`, '--wait-timeout', '20s', '--sleep', '2s', '--fail-times', '1', '--fail-exit', String(failExit), '--state', '/state/runs'], [], {
    ...restart,
    volumeMounts: [{ name: 'state', mountPath: '/state' }],
  });

const sidecar = (extraEnv: Array<{ name: string; value: string }> = [], onTerm = 0): V1Container =>
  testContainer('proxy', ['sidecar', '--listen', `:${SIDECAR_PORT}`, '--on-term', String(onTerm)], [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, ...extraEnv]);

interface Case {
  job: string;
  what: string;
  main: V1Container;
  sidecar: V1Container;
}

const CASES: Case[] = [
  {
    job: 'rule',
    what: 'restartPolicyRules: Restart on exit code 42',
    main: restartingMain({ restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] }, 42),
    sidecar: sidecar(),
  },
  {
    job: 'container-on-failure',
    what: "the container's own restartPolicy: OnFailure",
    main: restartingMain({ restartPolicy: 'OnFailure' }, 1),
    sidecar: sidecar(),
  },
  {
    job: 'ignore-exit-code',
    what: 'restartPolicyRules on exit code 42, and a sidecar exiting 143 whose exit code is ignored',
    main: restartingMain({ restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] }, 42),
    sidecar: sidecar([{ name: ENV_IGNORE_EXIT_CODE, value: 'true' }], 143),
  },
];

if (!apiFeatures(version).containerRestartRules) {
  t.plan(0, `skipped: Kubernetes ${version.gitVersion} has no container restart rules (1.35+)`);
} else if (canRunRealNode(t)) {
  const cluster = await startRealCluster(t, { node: { images: ['test-container'] } });
  const { cp, node } = cluster;
  const kruise = await startKruise(cp, { nodes: [node] });
  t.teardown(() => kruise.stop());
  const namespaces = { signal: await cp.createNamespace(), crr: await cp.createNamespace() };
  const certDir = mkdtempSync(join(tmpdir(), 'st-e2e-certs-'));
  t.teardown(() => rmSync(certDir, { recursive: true, force: true }));
  // The webhook and the signal mechanism's watcher; then a watcher of the crr mechanism for the other namespace.
  const serve = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, ...registeringWebhooks(port, 'Fail'), '--kill-mechanism', 'signal', '--namespaces', namespaces.signal]);
  t.teardown(() => serve.stop());
  const crrWatcher = await startWatcherProcess(['--kubeconfig', cp.kubeconfigPath, '--kill-mechanism', 'crr', '--namespaces', namespaces.crr]);
  t.teardown(() => crrWatcher.stop());

  const mechanisms = ['signal', 'crr'] as const;
  await Promise.all(
    mechanisms.flatMap((mechanism) =>
      CASES.map((c) => apply(cp, namespaces[mechanism], jobYaml(c.job, { containers: [c.main, c.sidecar], spec: { volumes: [{ name: 'state', emptyDir: {} }] } }))),
    ),
  );

  const rows: string[] = [];
  t.test('the main container restarted by the kubelet keeps its sidecar for every run, and the Job completes', { jobs: CASES.length * mechanisms.length }, async (t) => {
    for (const mechanism of mechanisms) {
      for (const c of CASES) {
        t.test(`${c.what}, ${mechanism}`, { buffered: true }, async (t) => {
          const namespace = namespaces[mechanism];
          try {
            await waitForJob(cluster, namespace, c.job, 'Complete', 240_000);
          } catch (error) {
            t.comment(kruise.logTails(10));
            throw error;
          }
          const podName = (await podOfJob(cluster, namespace, c.job)).metadata!.name!;
          const main = await containerStatus(cluster, namespace, podName, 'main', (s) => s.state?.terminated !== undefined);
          t.match(main, { restartCount: 1, state: { terminated: { exitCode: 0 } } }, 'the main container ran twice: the kubelet restarted it, and its second run found the sidecar serving');
          const proxy = await containerStatus(cluster, namespace, podName, 'proxy', (s) => s.state?.terminated !== undefined);
          t.equal(proxy.restartCount, 0, 'the sidecar ran once, through both runs');
          const ignored = c.sidecar.env?.some((e) => e.name === ENV_IGNORE_EXIT_CODE) ?? false;
          const expected: StopPath | StopPath[] = ignored ? (mechanism === 'crr' ? ['crr', 'phase'] : 'phase') : mechanism;
          const [ending] = await expectJobStoppedBy(t, cluster, namespace, c.job, { proxy: expected });
          const pod = await cluster.core.readNamespacedPod({ namespace, name: podName });
          t.equal(pod.status?.phase, 'Succeeded');
          const mainEnd = new Date(main.state!.terminated!.finishedAt!).getTime();
          const record = await stopRecordOfJob(cluster, namespace, c.job);
          t.match(record, { phase: 'Succeeded', mains: [{ name: 'main', exitCode: 0 }], sidecars: [{ name: 'proxy', stoppedBy: typeof expected === 'string' ? [expected] : expected }] }, 'the stop record: the last run of the main container, and how the sidecar was stopped');
          if (ignored) {
            const condition = pod.status?.conditions?.find((each) => each.type === TERMINATED_CONDITION);
            t.match(condition, { status: 'True', reason: CONDITION_REASONS.stopping });
            t.ok(new Date(condition!.lastTransitionTime!).getTime() >= mainEnd, 'the phase was set after the last run, not while the kubelet was about to restart the main');
          } else {
            t.equal(proxy.state?.terminated?.exitCode, 0, 'the sidecar exited 0 on SIGTERM');
          }
          const seconds = (new Date(proxy.state!.terminated!.finishedAt!).getTime() - mainEnd) / 1000;
          rows.push(`| ${c.what} | ${mechanism} | ${ending!.sidecars[0]!.steps.join(', ')} | ${seconds.toFixed(0)} s |`);
        });
      }
    }
  });
  t.test('the seconds from the last main exit to the sidecar exit', async (t) => {
    t.equal(rows.length, CASES.length * mechanisms.length, 'one row per Job');
    t.comment(['| main restarted by | mechanism | stopped by | last main exit to sidecar exit |', '|---|---|---|---|', ...rows.sort()].join('\n'));
  });

  // RestartAllContainersOnContainerExits (on by default in 1.37) needs ContainerRestartRules: both off.
  t.test('with the ContainerRestartRules gate off: the API server drops the rules, the first exit is the last, the sidecar is stopped after it', async (t) => {
    const off = await startRealCluster(t, { node: { images: ['test-container'] }, apiServerArgs: ['--feature-gates=ContainerRestartRules=false,RestartAllContainersOnContainerExits=false'] });
    const offCerts = mkdtempSync(join(tmpdir(), 'st-e2e-certs-'));
    t.teardown(() => rmSync(offCerts, { recursive: true, force: true }));
    const offServe = await startServe((port) => ['--kubeconfig', off.cp.kubeconfigPath, '--cert-dir', offCerts, ...registeringWebhooks(port, 'Fail'), '--kill-mechanism', 'signal']);
    t.teardown(() => offServe.stop());
    const namespace = await off.cp.createNamespace();
    const [rule] = CASES;
    await apply(off.cp, namespace, jobYaml(rule!.job, { containers: [rule!.main, rule!.sidecar], spec: { volumes: [{ name: 'state', emptyDir: {} }] } }));
    await waitForJob(off, namespace, rule!.job, 'Failed', 240_000);
    const pod = await podOfJob(off, namespace, rule!.job);
    const main = pod.spec?.containers.find((container) => container.name === 'main');
    t.notOk(main?.restartPolicyRules ?? main?.restartPolicy, 'the API server dropped the container restartPolicy and rules');
    t.match(pod.status?.containerStatuses?.find((status) => status.name === 'main'), { restartCount: 0, state: { terminated: { exitCode: 42 } } }, "the main's first exit was its last");
    await expectJobStoppedBy(t, off, namespace, rule!.job, { proxy: 'signal' });
  });
}
