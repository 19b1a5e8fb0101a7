// Real programs that users run as sidecars, stopped on a real node the way each asks to be
// stopped, and sidecars that do not stop when asked, ended all the same: kubelet, containerd and
// runc run the containers; OpenKruise's kruise-daemon stops them for the crr mechanism; the
// add-on's stop-sidecar image runs in the ephemeral containers. Every Job runs at once, in one
// cluster: one watcher per kill mechanism, each acting on its own namespaces.
//
// What the tests read is what the kubelet reports (exit codes, restart counts, the pod's phase),
// the Jobs' conditions, and what the signal containers wrote. The seconds from the main
// container's exit to the sidecar's are measured, never asserted: the table is printed as a
// comment (docs/sidecars.md keeps a copy).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Container, V1ContainerStatus, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import t from 'tap';
import { ENV_IGNORE_EXIT_CODE, ENV_STOP, ENV_WHEN_JOB_EXIT, POD_ANNOTATIONS, STOP_EXIT_CODES } from '../../src/policy/index.ts';
import { expectJobStoppedBy, type StopPath } from '../support/endings.ts';
import { startInjector } from '../support/injector.ts';
import { startKruise } from '../support/kruise.ts';
import { jobYaml } from '../support/pods.ts';
import { canRunRealNode, type ImageName } from '../support/real-node.ts';
import { containerStatus, startRealCluster, testContainer } from '../support/real-stack.ts';
import { registeringWebhooks, startServe, startWatcherProcess } from '../support/serve-process.ts';
import { apply, eventsOf, podOfJob, waitForJob } from '../support/stack.ts';
import { waitFor } from '../support/wait.ts';

const IMAGES: ImageName[] = ['test-container', 'busybox', 'tini', 'nginx', 'otelcol', 'cloud-sql-proxy'];
const image = (name: string) => `sidecar-terminator.local/${name}:1`;
const sidecarEnv = (extra: Array<{ name: string; value: string }> = []) => [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, ...extra];
const IGNORE_EXIT_CODE = { name: ENV_IGNORE_EXIT_CODE, value: 'true' };
/** The grace period of the sidecars that do not stop when asked: long enough that one grace period is told from two. */
const GRACE = 10;
const IGNORES_TERM = "trap '' TERM; while :; do sleep 1; done";
/** cloud-sql-proxy starts without a cloud with a token and a port given: it lists on 127.0.0.1:5432 and dials nothing until a client connects. */
const CLOUD_SQL_ARGS = ['--token', 'placeholder', '--port', '5432', 'example-project:europe-west1:db'];

type Watcher = 'signal' | 'crr' | 'injected';

interface Case {
  job: string;
  /** The table's columns. */
  program: string;
  /**
   * The sidecar's port on the pod's loopback: the main container waits for it before it starts
   * its work, so the sidecar has started (and installed its signal handlers) before it is told
   * to stop. A Go program told before that exits 2, which OnFailure restarts.
   */
  port?: number;
  mechanism: string;
  watcher: Watcher;
  restartPolicy: 'Never' | 'OnFailure';
  sidecar: V1Container;
  spec?: Partial<V1PodSpec>;
  annotations?: Record<string, string>;
  expect: {
    job: 'Complete' | 'Failed';
    /** The sidecar's exit code as the kubelet reports it at the end. */
    exitCode: number;
    restarts: number;
    /** What the sidecar's signal container reports (images/stop-sidecar), when one is sent. */
    signalExit?: number[];
    /** The code of the Warning event saying how the sidecar was ended from outside, or that its exit code failed the pod. */
    warning?: string;
    /** How the sidecar was stopped: told (signal, http, crr), then ended from outside (image, phase). */
    stoppedBy: StopPath | StopPath[];
  };
}

/** The warning of a Never pod its stopped sidecar's exit code failed, said once the pod has ended. */
const EXIT_FAILED_POD = 'sidecar-exit-failed-pod';

const cases: Case[] = [];
const NGINX_PORT = 8080;
const programs: Array<{ program: string; port: number; sidecar: (method: string) => V1Container; http?: true }> = [
  { program: 'OpenTelemetry Collector', port: 4317, sidecar: () => ({ name: 'otelcol', image: image('otelcol'), env: sidecarEnv() }) },
  { program: 'nginx', port: NGINX_PORT, sidecar: () => ({ name: 'nginx', image: image('nginx'), env: sidecarEnv() }) },
  {
    program: 'cloud-sql-proxy',
    port: 5432,
    http: true,
    sidecar: (method) =>
      method === 'http'
        ? { name: 'cloud-sql-proxy', image: image('cloud-sql-proxy'), args: ['--quitquitquit', ...CLOUD_SQL_ARGS], env: sidecarEnv([{ name: ENV_STOP, value: 'cloud-sql-proxy' }]) }
        : { name: 'cloud-sql-proxy', image: image('cloud-sql-proxy'), args: ['--exit-zero-on-sigterm', ...CLOUD_SQL_ARGS], env: sidecarEnv() },
  },
];
for (const { program, port, sidecar, http } of programs) {
  for (const restartPolicy of ['Never', 'OnFailure'] as const) {
    const methods: Array<[string, Watcher]> = [['signal', 'signal'], ['crr', 'crr'], ...(http ? ([['http', 'signal'], ['http', 'crr']] as Array<[string, Watcher]>) : [])];
    for (const [method, watcher] of methods) {
      const short = program.split(/[\s-]/)[0]!.toLowerCase();
      cases.push({
        job: `${short}-${method}-${watcher}-${restartPolicy.toLowerCase()}`,
        program,
        port,
        mechanism: method === 'http' ? `HTTP (POST :9091/quitquitquit), ${watcher} watcher` : method,
        watcher,
        restartPolicy,
        sidecar: sidecar(method),
        // An HTTP stop is sent by a signal container under either watcher: crr is for what SIGTERM stops.
        expect: { job: 'Complete', exitCode: 0, restarts: 0, ...(method === 'crr' ? {} : { signalExit: [0, 137] }), stoppedBy: method === 'http' ? 'http' : method === 'crr' ? 'crr' : 'signal' },
      });
    }
  }
}

// Injected by the tests' own mutating webhook, after the add-on's; named only by the annotation.
cases.push({
  job: 'injected-nginx',
  program: 'nginx, injected by another webhook',
  port: NGINX_PORT,
  mechanism: 'signal (sidecar named by annotation)',
  watcher: 'injected',
  restartPolicy: 'Never',
  sidecar: { name: 'web', image: image('nginx') },
  annotations: { [POD_ANNOTATIONS.sidecars]: 'web' },
  expect: { job: 'Complete', exitCode: 0, restarts: 0, signalExit: [0, 137], stoppedBy: 'signal' },
});

// Sidecars that ignore SIGTERM, with each mechanism; a well-behaved one in a shared PID namespace.
const ignoring: Array<{ program: string; sidecar: (env: Array<{ name: string; value: string }>) => V1Container; spec?: Partial<V1PodSpec>; signal: Case['expect']; signalIgnoreExitCode?: Case['expect']; crr: Case['expect'] | 'ignore-exit-code' }> = [
  {
    program: "PID 1 a shell with trap '' TERM (sets command)",
    sidecar: (env) => ({ name: 'shell', image: 'busybox:1.35', command: ['sh', '-c', IGNORES_TERM], env }),
    // No quick-exit image can run its command: the phase is set from the main container, the kubelet kills it. The
    // quick-exit image is written too, only to make the kubelet act at once: it never runs in a pod in a terminal phase.
    signal: { job: 'Complete', exitCode: 137, restarts: 0, signalExit: [STOP_EXIT_CODES.noHandler], warning: 'sigterm-unhandled', stoppedBy: ['signal', 'phase'] },
    crr: 'ignore-exit-code',
  },
  {
    program: 'PID 1 sleep infinity (args only)',
    sidecar: (env) => ({ name: 'sleeper', image: 'busybox:1.35', args: ['sleep', 'infinity'], env }),
    // The quick-exit image in its place: the kubelet kills it and runs that image, which exits 0.
    signal: { job: 'Complete', exitCode: 0, restarts: 1, signalExit: [STOP_EXIT_CODES.noHandler], warning: 'sigterm-unhandled', stoppedBy: ['signal', 'image'] },
    crr: 'ignore-exit-code',
  },
  {
    program: 'a child ignoring SIGTERM under tini',
    sidecar: (env) => ({ name: 'tini', image: image('tini'), args: ['sh', '-c', IGNORES_TERM], env }),
    // The signal container kills the child at the end of the grace period; tini exits 128+9.
    signal: { job: 'Failed', exitCode: 137, restarts: 0, signalExit: [0, 137], warning: EXIT_FAILED_POD, stoppedBy: 'signal' },
    signalIgnoreExitCode: { job: 'Complete', exitCode: 137, restarts: 0, stoppedBy: 'phase' },
    crr: 'ignore-exit-code',
  },
  {
    program: 'a well-behaved sidecar with shareProcessNamespace',
    sidecar: (env) => testContainer('shared', ['sidecar'], env),
    spec: { shareProcessNamespace: true },
    signal: { job: 'Complete', exitCode: 0, restarts: 0, signalExit: [0], stoppedBy: 'signal' },
    crr: { job: 'Complete', exitCode: 0, restarts: 0, stoppedBy: 'crr' },
  },
];
for (const [index, entry] of ignoring.entries()) {
  const spec = { terminationGracePeriodSeconds: GRACE, ...entry.spec };
  const add = (watcher: Watcher, suffix: string, expect: Case['expect'], ignoreExitCode: boolean) =>
    cases.push({
      job: `ignores-${index}-${watcher}${suffix}`,
      program: entry.program,
      mechanism: `${watcher}${ignoreExitCode ? `, ${ENV_IGNORE_EXIT_CODE}` : ''}`,
      watcher,
      restartPolicy: 'Never',
      sidecar: entry.sidecar(sidecarEnv(ignoreExitCode ? [IGNORE_EXIT_CODE] : [])),
      spec,
      expect,
    });
  add('signal', '', entry.signal, false);
  if (entry.signalIgnoreExitCode) add('signal', '-ignore', entry.signalIgnoreExitCode, true);
  if (entry.crr === 'ignore-exit-code') {
    // kruise-daemon kills it with SIGKILL after the grace period: 137 fails a Never pod, unless the exit code is ignored.
    add('crr', '', { job: 'Failed', exitCode: 137, restarts: 0, warning: EXIT_FAILED_POD, stoppedBy: 'crr' }, false);
    add('crr', '-ignore', { job: 'Complete', exitCode: 137, restarts: 0, stoppedBy: ['crr', 'phase'] }, true);
  } else {
    add('crr', '', entry.crr, false);
  }
}

/** When the sidecar's first process ended: its last state when the kubelet started it again, else its state. */
function sidecarEnd(status: V1ContainerStatus): Date | undefined {
  const terminated = status.restartCount > 0 ? status.lastState?.terminated : status.state?.terminated;
  return terminated?.finishedAt ? new Date(terminated.finishedAt) : undefined;
}

if (canRunRealNode(t)) {
  const cluster = await startRealCluster(t, { node: { images: IMAGES } });
  const { cp, node } = cluster;
  const kruise = await startKruise(cp, { nodes: [node] });
  t.teardown(() => kruise.stop());
  const namespaces: Record<Watcher, string> = { signal: await cp.createNamespace(), crr: await cp.createNamespace(), injected: await cp.createNamespace() };
  const certDir = mkdtempSync(join(tmpdir(), 'st-e2e-certs-'));
  t.teardown(() => rmSync(certDir, { recursive: true, force: true }));
  // The webhook, and the watcher of the signal mechanism; then the watcher of the crr mechanism.
  const serve = await startServe((port) => [
    '--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, ...registeringWebhooks(port, 'Fail'),
    '--kill-mechanism', 'signal', '--namespaces', `${namespaces.signal},${namespaces.injected}`,
  ]);
  t.teardown(() => serve.stop());
  const crrWatcher = await startWatcherProcess(['--kubeconfig', cp.kubeconfigPath, '--kill-mechanism', 'crr', '--namespaces', namespaces.crr]);
  t.teardown(() => crrWatcher.stop());
  await startInjector(t, cp, namespaces.injected, { name: 'web', image: image('nginx') });

  await Promise.all(
    cases.map((c) => {
      const main = testContainer('main', ['main', ...(c.port ? ['--wait-tcp', `127.0.0.1:${c.port}`] : []), '--sleep', '3s']);
      return apply(cp, namespaces[c.watcher], jobYaml(c.job, { restartPolicy: c.restartPolicy, containers: c.watcher === 'injected' ? [main] : [main, c.sidecar], ...(c.spec ? { spec: c.spec } : {}), ...(c.annotations ? { annotations: c.annotations } : {}) }));
    }),
  );

  const rows: string[] = [];
  t.test('every Job ends as documented, and its sidecar with the documented exit code', { jobs: cases.length }, async (t) => {
    for (const c of cases) {
      t.test(`${c.program}, ${c.restartPolicy}, ${c.mechanism}`, { buffered: true }, async (t) => {
        const namespace = namespaces[c.watcher];
        try {
          await waitForJob(cluster, namespace, c.job, c.expect.job, 300_000);
        } catch (error) {
          t.comment(kruise.logTails(10));
          throw error;
        }
        const pod: V1Pod = await podOfJob(cluster, namespace, c.job);
        const podName = pod.metadata!.name!;
        const sidecar = await containerStatus(cluster, namespace, podName, c.sidecar.name, (s) => s.state?.terminated !== undefined, 120_000);
        const mainStatus = await containerStatus(cluster, namespace, podName, 'main', (s) => s.state?.terminated !== undefined);
        const now = await cluster.core.readNamespacedPod({ name: podName, namespace });
        t.equal(sidecar.state?.terminated?.exitCode, c.expect.exitCode, `the sidecar exited ${c.expect.exitCode}`);
        t.equal(sidecar.restartCount, c.expect.restarts, `restarted ${c.expect.restarts} times`);
        t.equal(now.status?.phase, c.expect.job === 'Complete' ? 'Succeeded' : 'Failed', `the pod is ${c.expect.job === 'Complete' ? 'Succeeded' : 'Failed'}`);
        const signal = now.spec?.ephemeralContainers?.find((e) => e.targetContainerName === c.sidecar.name);
        if (c.expect.signalExit) {
          t.ok(signal, 'a signal container was sent');
          const status = signal && (await containerStatus(cluster, namespace, podName, signal.name, (s) => s.state?.terminated !== undefined));
          const code = status?.state?.terminated?.exitCode;
          t.ok(code !== undefined && c.expect.signalExit.includes(code), `the signal container exited ${code} (${c.expect.signalExit.join(' or ')}): ${status?.state?.terminated?.message?.trim() ?? ''}`);
        }
        // Said once the pod has left the watch, so a moment after it ended: waited for.
        if (c.expect.warning === EXIT_FAILED_POD) await waitFor(`the ${EXIT_FAILED_POD} warning`, async () => (await eventsOf(cluster, namespace, podName)).some((e) => e.action === EXIT_FAILED_POD), { timeoutMs: 60_000 });
        const warnings = (await eventsOf(cluster, namespace, podName)).filter((e) => e.type === 'Warning');
        if (c.expect.warning) t.ok(warnings.some((e) => e.action === c.expect.warning), `a ${c.expect.warning} warning: ${warnings.map((e) => e.message).join(' | ')}`);
        else t.same(warnings.map((e) => e.message), [], 'no warning');
        await expectJobStoppedBy(t, cluster, namespace, c.job, { [c.sidecar.name]: c.expect.stoppedBy }, { warnings: c.expect.warning ? [c.expect.warning] : [] });
        const from = mainStatus.state?.terminated?.finishedAt;
        const to = sidecarEnd(sidecar);
        const seconds = from && to ? Math.round((to.getTime() - new Date(from).getTime()) / 1000) : NaN;
        // Where the seconds went: the signal container's run, and when the sidecar was ended from outside (its Warning).
        const after = (time: Date | string | undefined) => (from && time ? Math.round((new Date(time).getTime() - new Date(from).getTime()) / 100) / 10 : undefined);
        const signalState = now.status?.ephemeralContainerStatuses?.find((s) => s.name === signal?.name)?.state?.terminated;
        const ended = c.expect.warning === EXIT_FAILED_POD ? undefined : warnings.find((e) => e.action === c.expect.warning);
        const steps = [
          ...(signalState ? [`signal container ${after(signalState.startedAt)}-${after(signalState.finishedAt)} s`] : []),
          ...(ended ? [`ended from outside at ${after(ended.eventTime ?? ended.firstTimestamp)} s`] : []),
        ];
        rows.push(`| ${c.program} | ${c.restartPolicy} | ${c.mechanism} | Job ${c.expect.job}, pod ${now.status?.phase} | ${sidecar.state?.terminated?.exitCode}${sidecar.restartCount ? ` (restarts: ${sidecar.restartCount})` : ''} | ${seconds} | ${steps.join('; ')} |`);
      });
    }
  });

  t.test('no Job is left running', async (t) => {
    for (const namespace of Object.values(namespaces)) {
      const jobs = (await cluster.batch.listNamespacedJob({ namespace })).items;
      const running = jobs.filter((job) => !job.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True'));
      t.same(running.map((job) => job.metadata?.name), [], `namespace ${namespace}`);
    }
    t.comment(['| program | restartPolicy | mechanism | outcome | sidecar exit code | s from main exit to sidecar exit | steps, s from main exit |', '|---|---|---|---|---|---|---|', ...rows.sort()].join('\n'));
  });
}
