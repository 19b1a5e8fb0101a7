// Jobs that complete with no manifest change: a sidecar another webhook injects (the tests' own
// injector, which adds a container with a JSON patch, as meshes and agents do) is named once, by the
// operator's policy (the webhook's --injected-sidecars, the chart's injectedSidecars values), for
// the namespaces its selector picks. The Jobs carry no marker and no annotation of the add-on's; the injected
// programs are real (the OpenTelemetry Collector, cloud-sql-proxy with --quitquitquit, nginx), on a
// real node, under both kill mechanisms. The same Job in a namespace the policy does not select is
// left alone, and a CronJob of a third-party chart installed with Helm, unmodified, completes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Container } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { INJECTED_POLICY_ANNOTATION, MANAGED_LABEL, POD_ANNOTATIONS } from '../../src/policy/index.ts';
import { helm, helmEnv } from '../chart/helm.ts';
import { expectJobStoppedBy, type StopPath } from '../support/endings.ts';
import { startInjector } from '../support/injector.ts';
import { startKruise } from '../support/kruise.ts';
import { jobYaml } from '../support/pods.ts';
import { canRunRealNode, type ImageName } from '../support/real-node.ts';
import { repoRoot } from '../support/repo.ts';
import { containerStatus, startRealCluster, testContainer } from '../support/real-stack.ts';
import { registeringWebhooks, startServe, startWatcherProcess } from '../support/serve-process.ts';
import { apply, podOfJob, waitForJob } from '../support/stack.ts';
import { waitFor } from '../support/wait.ts';

const IMAGES: ImageName[] = ['test-container', 'nginx', 'otelcol', 'cloud-sql-proxy'];
const image = (name: string) => `sidecar-terminator.local/${name}:1`;
/** The namespaces the policy selects carry this label, as a mesh's injection label. */
const SELECTED = { key: 'injection', value: 'enabled' };
/** cloud-sql-proxy starts without a cloud with a token and a port given: it listens on 127.0.0.1:5432 and dials nothing until a client connects. */
const CLOUD_SQL_ARGS = ['--quitquitquit', '--token', 'placeholder', '--port', '5432', 'example-project:europe-west1:db'];

interface Program {
  name: string;
  /** What the injector adds: no marker, no add-on env. */
  sidecar: V1Container;
  /** Its port on the pod's loopback: the main container waits for it, so the sidecar has started when it is told to stop. */
  port: number;
  /** The policy entry's stop method, when not SIGTERM. */
  stop?: string;
  /** How it is stopped, by kill mechanism. */
  path: Record<'signal' | 'crr', StopPath>;
}

const PROGRAMS: Program[] = [
  { name: 'otelcol', sidecar: { name: 'otel-collector', image: image('otelcol') }, port: 4317, path: { signal: 'signal', crr: 'crr' } },
  // Its HTTP shutdown is sent by a signal container under either watcher: crr is for what SIGTERM stops.
  { name: 'cloud-sql-proxy', sidecar: { name: 'cloud-sql-proxy', image: image('cloud-sql-proxy'), args: CLOUD_SQL_ARGS }, port: 5432, stop: 'cloud-sql-proxy', path: { signal: 'http', crr: 'http' } },
  { name: 'nginx', sidecar: { name: 'web', image: image('nginx') }, port: 8080, path: { signal: 'signal', crr: 'crr' } },
];

/** The operator's policy: one entry per injected program, for the namespaces carrying SELECTED. */
const policy = {
  entries: PROGRAMS.map((program) => ({
    name: program.name,
    container: program.sidecar.name,
    ...(program.stop ? { stop: program.stop } : {}),
    namespaceSelector: { matchLabels: { [SELECTED.key]: SELECTED.value } },
  })),
};

/** A Job as a chart ships it: one main container, nothing of the add-on's. */
const plainJob = (name: string, port: number) =>
  jobYaml(name, { spec: { terminationGracePeriodSeconds: 10 }, containers: [testContainer('main', ['main', '--wait-tcp', `127.0.0.1:${port}`, '--wait-timeout', '60s', '--sleep', '3s'])] });

if (canRunRealNode(t)) {
  const cluster = await startRealCluster(t, { node: { images: IMAGES } });
  const { cp, node } = cluster;
  const kruise = await startKruise(cp, { nodes: [node] });
  t.teardown(() => kruise.stop());
  const dir = mkdtempSync(join(tmpdir(), 'st-injected-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const policyFile = join(dir, 'policy.yaml');
  writeFileSync(policyFile, JSON.stringify(policy, null, 2));

  // A namespace per program and kill mechanism, each with the program's injector; one more, not selected.
  const namespaceOf = new Map<string, string>();
  for (const program of PROGRAMS) {
    for (const mechanism of ['signal', 'crr'] as const) namespaceOf.set(`${program.name}/${mechanism}`, await cp.createNamespace());
  }
  const outside = await cp.createNamespace();
  const backups = await cp.createNamespace();
  const selected = [...namespaceOf.values(), backups];
  for (const namespace of selected) await cp.kubectl(['label', 'namespace', namespace, `${SELECTED.key}=${SELECTED.value}`]);
  const signalNamespaces = [...PROGRAMS.map((program) => namespaceOf.get(`${program.name}/signal`)!), outside, backups];
  const crrNamespaces = PROGRAMS.map((program) => namespaceOf.get(`${program.name}/crr`)!);

  const serve = await startServe((port) => [
    '--kubeconfig', cp.kubeconfigPath, '--cert-dir', join(dir, 'certs'), ...registeringWebhooks(port, 'Fail'),
    '--injected-sidecars', policyFile, '--kill-mechanism', 'signal', '--namespaces', signalNamespaces.join(','),
  ]);
  t.teardown(() => serve.stop());
  // The policy is the webhook's: a watcher reads the annotations it wrote, as a user's.
  const crrWatcher = await startWatcherProcess(['--kubeconfig', cp.kubeconfigPath, '--kill-mechanism', 'crr', '--namespaces', crrNamespaces.join(',')]);
  t.teardown(() => crrWatcher.stop());
  for (const program of PROGRAMS) {
    for (const mechanism of ['signal', 'crr'] as const) await startInjector(t, cp, namespaceOf.get(`${program.name}/${mechanism}`)!, program.sidecar, `${program.name}-${mechanism}`);
  }
  const nginx = PROGRAMS[2]!;
  await startInjector(t, cp, outside, nginx.sidecar, 'outside');
  await startInjector(t, cp, backups, nginx.sidecar, 'backups');

  const rows: string[] = [];
  t.test('a Job with no marker and no annotation, its sidecar injected: the policy names it, and the Job completes under both kill mechanisms', async (t) => {
    const cases = PROGRAMS.flatMap((program) => (['signal', 'crr'] as const).map((mechanism) => ({ program, mechanism, namespace: namespaceOf.get(`${program.name}/${mechanism}`)! })));
    await Promise.all(cases.map(({ program, namespace }) => apply(cp, namespace, plainJob('migrate', program.port))));
    for (const { program, mechanism, namespace } of cases) {
      t.test(`${program.name}, ${mechanism}`, async (t) => {
        await waitForJob(cluster, namespace, 'migrate', 'Complete', 240_000);
        const pod = await podOfJob(cluster, namespace, 'migrate');
        const podName = pod.metadata!.name!;
        t.equal(pod.metadata?.annotations?.[INJECTED_POLICY_ANNOTATION], program.name, 'the pod says which policy entry named its sidecar');
        t.equal(pod.metadata?.annotations?.[POD_ANNOTATIONS.sidecars], program.sidecar.name, 'the annotation a user would have written');
        t.equal(pod.metadata?.labels?.[MANAGED_LABEL], 'true', 'labelled at admission');
        const main = await containerStatus(cluster, namespace, podName, 'main', (s) => s.state?.terminated !== undefined);
        const sidecar = await containerStatus(cluster, namespace, podName, program.sidecar.name, (s) => s.state?.terminated !== undefined);
        t.equal(sidecar.state?.terminated?.exitCode, 0, 'the sidecar exited 0');
        t.equal(sidecar.restartCount, 0, 'it stopped when told, nothing ended it from outside');
        await expectJobStoppedBy(t, cluster, namespace, 'migrate', { [program.sidecar.name]: program.path[mechanism] });
        const seconds = (Date.parse(String(sidecar.state?.terminated?.finishedAt)) - Date.parse(String(main.state?.terminated?.finishedAt))) / 1000;
        rows.push(`| ${program.name} | ${mechanism} | ${program.path[mechanism]} | Complete | ${seconds} |`);
      });
    }
  });

  t.test('the same Job in a namespace the policy does not select is left alone', async (t) => {
    await apply(cp, outside, plainJob('migrate', nginx.port));
    const pod = await waitFor('the main container to finish', async () => {
      const found = await podOfJob(cluster, outside, 'migrate').catch(() => undefined);
      return found?.status?.containerStatuses?.some((s) => s.name === 'main' && s.state?.terminated) ? found : undefined;
    }, { timeoutMs: 120_000 });
    t.equal(pod.metadata?.annotations?.[INJECTED_POLICY_ANNOTATION], undefined, 'no policy entry applied');
    t.equal(pod.metadata?.labels?.[MANAGED_LABEL], undefined, 'not labelled');
    // Long enough for a stop the watcher would have made to show.
    await sleep(15_000);
    const now = await cluster.core.readNamespacedPod({ namespace: outside, name: pod.metadata!.name! });
    t.ok(now.status?.containerStatuses?.find((s) => s.name === nginx.sidecar.name)?.state?.running, 'its sidecar still runs');
    t.same(now.spec?.ephemeralContainers ?? [], [], 'no signal container was sent');
    await cp.kubectl(['delete', 'job', 'migrate', '--wait=false'], { namespace: outside });
  });

  t.test("a CronJob of a third-party chart, installed with helm and unmodified, completes", async (t) => {
    const env = helmEnv(cp.kubeconfigPath, t);
    const installed = await helm(['install', 'nightly', join(repoRoot, 'test/fixtures/charts/nightly-backup'), '--namespace', backups, '--set', 'schedule=*/1 * * * *'], { env });
    t.equal(installed.code, 0, `helm install: ${installed.stderr}`);
    const job = await waitFor('the CronJob to create a Job', async () => (await cluster.batch.listNamespacedJob({ namespace: backups })).items[0]?.metadata?.name, { timeoutMs: 120_000, intervalMs: 1000 });
    await waitForJob(cluster, backups, job, 'Complete', 180_000);
    await expectJobStoppedBy(t, cluster, backups, job, { [nginx.sidecar.name]: 'signal' });
    await helm(['uninstall', 'nightly', '--namespace', backups], { env });
  });

  t.teardown(() => {
    if (rows.length) t.comment(['| injected program | kill mechanism | stopped by | Job | seconds from the main container\'s exit to the sidecar\'s |', '|---|---|---|---|---|', ...rows].join('\n'));
  });
}
