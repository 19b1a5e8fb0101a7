// Which pod creations reach the webhook, and what the add-on costs the others: on one real
// control plane, in one run, the pods of Deployments (restartPolicy Always, no marker) that
// kube-controller-manager's ReplicaSet controller creates, as in any cluster, in three modes:
//   none:      no webhook configuration (the add-on not installed);
//   matched:   the configurations `serve --register-webhooks` writes (webhook only), matchConditions in force;
//   unmatched: the same without their matchConditions (the add-on before them);
// the modes in turn, round after round, so that a drift of the machine's load falls on all three;
// then, matched, Jobs without a marker, whose pods must still reach the mutating webhook.
// The pods need not run: there is no scheduler and no node. Webhook calls are counted by the
// webhook (sidecar_terminator_admission_requests_total) and by the API server
// (apiserver_admission_webhook_request_total); a pod's creation latency is the API server's own,
// from the audit log of the controller's requests (requestReceivedTimestamp to stageTimestamp,
// admission included).
//
//   node bench/reach/run.ts [--pods 5000] [--rounds 2] [--deployments 25] [--jobs 100] [--quick]
//
// --pods: Deployment pods per mode, over all rounds. Writes bench/results/reach.md and .json.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { auditFlags, readAuditLog } from '../../test/support/audit.ts';
import { startControlPlane, type ControlPlane } from '../../test/support/control-plane.ts';
import { apiServerMetrics, scrape, sumSamples } from '../../test/support/metrics.ts';
import { registeringWebhooks, startServe, type ServeProcess } from '../../test/support/serve-process.ts';
import { machineLoad } from '../lib/proc.ts';
import { fmt, parseArgs, quantile, table } from '../lib/stats.ts';

const repoRoot = resolve(import.meta.dirname, '../..');
const args = parseArgs(process.argv.slice(2));
const quick = args.has('quick');
const rounds = Number(args.get('rounds') ?? 2);
const podCount = Math.round(Number(args.get('pods') ?? (quick ? 300 : 5000)) / rounds);
const deployments = Number(args.get('deployments') ?? (quick ? 3 : 25));
const jobCount = Number(args.get('jobs') ?? (quick ? 10 : 100));
const log = (message: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);

/** kube-controller-manager's user (test/support/control-plane.ts), audited as a member of system:masters. */
const CONTROLLER = 'system:kube-controller-manager';
const WEBHOOKS = ['mutate.sidecar-terminator.io', 'validate.sidecar-terminator.io'];

interface Calls {
  /** By the webhook's own counter, per endpoint. */
  webhook: Record<string, number>;
  /** By the API server's, per webhook name. */
  apiServer: Record<string, number>;
}

interface Phase {
  label: string;
  pods: number;
  seconds: number;
  calls: Calls;
  /** Every pod creation's latency, in milliseconds. */
  latencies: number[];
}

async function calls(cp: ControlPlane, serve: ServeProcess | undefined): Promise<Calls> {
  const own = serve ? await scrape(`${serve.url}/metrics`) : '';
  const apiServer = await apiServerMetrics(cp);
  return {
    webhook: Object.fromEntries(['mutate', 'validate'].map((endpoint) => [endpoint, sumSamples(own, 'sidecar_terminator_admission_requests_total', { endpoint })])),
    apiServer: Object.fromEntries(WEBHOOKS.map((name) => [name, sumSamples(apiServer, 'apiserver_admission_webhook_request_total', { name })])),
  };
}

const difference = (after: Calls, before: Calls): Calls => ({
  webhook: Object.fromEntries(Object.entries(after.webhook).map(([key, value]) => [key, value - (before.webhook[key] ?? 0)])),
  apiServer: Object.fromEntries(Object.entries(after.apiServer).map(([key, value]) => [key, value - (before.apiServer[key] ?? 0)])),
});

/** Microseconds since the epoch of an audit timestamp (RFC 3339 with six fractional digits). */
const micros = (timestamp: string) => Date.parse(`${timestamp.slice(0, 23)}Z`) * 1000 + Number(timestamp.slice(23, 26).padEnd(3, '0'));

async function waitForPods(core: CoreV1Api, namespace: string, count: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const page = await core.listNamespacedPod({ namespace, limit: 1 });
    const seen = page.items.length + (page.metadata?.remainingItemCount ?? 0);
    if (seen >= count) return;
    if (Date.now() > deadline) throw new Error(`${seen} of ${count} pods in ${namespace} after ${timeoutMs / 1000} s`);
    await new Promise((resolveWait) => setTimeout(resolveWait, 2000));
  }
}

/** Creates `kind` objects whose pods total `count` in a fresh namespace, and measures the controller's pod creations. */
async function phase(cp: ControlPlane, core: CoreV1Api, auditLog: string, serve: ServeProcess | undefined, label: string, kind: 'deployments' | 'jobs', round = 0): Promise<Phase> {
  const namespace = await cp.createNamespace(`reach-${label}-${round}`);
  const before = await calls(cp, serve);
  const started = Date.now();
  const count = kind === 'deployments' ? podCount : jobCount;
  const objects = kind === 'deployments'
    ? Array.from({ length: deployments }, (_, i) => ({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: `web-${i}` },
        spec: {
          replicas: Math.floor(podCount / deployments) + (i < podCount % deployments ? 1 : 0),
          selector: { matchLabels: { app: `web-${i}` } },
          template: { metadata: { labels: { app: `web-${i}` } }, spec: { containers: [{ name: 'web', image: 'nginx:1.27' }, { name: 'proxy', image: 'envoyproxy/envoy:v1.31.0' }] } },
        },
      }))
    : Array.from({ length: jobCount }, (_, i) => ({
        apiVersion: 'batch/v1',
        kind: 'Job',
        metadata: { name: `job-${i}` },
        spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox:1.36' }, { name: 'proxy', image: 'envoyproxy/envoy:v1.31.0' }] } } },
      }));
  const applied = await cp.kubectl(['apply', '-f', '-'], { namespace, input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }) });
  if (applied.code !== 0) throw new Error(`kubectl apply: ${applied.stderr}`);
  await waitForPods(core, namespace, count, 30 * 60_000);
  const seconds = (Date.now() - started) / 1000;
  const after = await calls(cp, serve);
  const latencies = readAuditLog(auditLog)
    .filter((event) => event.user?.username === CONTROLLER && event.verb === 'create' && event.objectRef?.resource === 'pods' && event.objectRef.namespace === namespace && event.responseStatus?.code === 201)
    .map((event) => (micros(event.stageTimestamp!) - micros(event.requestReceivedTimestamp!)) / 1000);
  if (latencies.length !== count) throw new Error(`${label}: ${latencies.length} pod creations in the audit log, ${count} pods`);
  log(`${label}, round ${round + 1}: ${count} pods in ${fmt(seconds, 0)} s, p99 ${fmt(quantile(latencies, 0.99))} ms (load ${machineLoad()})`);
  return { label, pods: count, seconds, calls: difference(after, before), latencies };
}

/** The phases of one mode, as one. */
function merged(phases: Phase[]): Phase {
  const [first] = phases as [Phase];
  const sum = (pick: (calls: Calls) => Record<string, number>) => Object.fromEntries(Object.keys(pick(first.calls)).map((key) => [key, phases.reduce((total, p) => total + (pick(p.calls)[key] ?? 0), 0)]));
  return { label: first.label, pods: phases.reduce((n, p) => n + p.pods, 0), seconds: phases.reduce((n, p) => n + p.seconds, 0), calls: { webhook: sum((c) => c.webhook), apiServer: sum((c) => c.apiServer) }, latencies: phases.flatMap((p) => p.latencies) };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'st-reach-'));
  // Every request of system:masters members (the controller's among them) is audited; the pods' creations are read from it.
  const audit = auditFlags(dir, 'system:masters');
  log(`reach: ${podCount} Deployment pods per phase, ${jobCount} Job pods; load ${machineLoad()}; logs in ${dir}`);
  const cp = await startControlPlane({ apiServerArgs: audit.apiServerArgs });
  let serve: ServeProcess | undefined;
  try {
    const core = cp.kubeConfig.makeApiClient(CoreV1Api);
    const certDir = join(dir, 'certs');
    serve = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, '--no-watcher', ...registeringWebhooks(port, 'Ignore')]);
    // The configurations as registered, and without their matchConditions; none: deleted.
    const registered = JSON.parse((await cp.kubectl(['get', 'mutatingwebhookconfiguration,validatingwebhookconfiguration', 'sidecar-terminator', '-o', 'json'])).stdout) as { items: Array<{ metadata: Record<string, unknown>; webhooks: Array<Record<string, unknown>> }> };
    const configurations = (matchConditions: boolean) => ({
      apiVersion: 'v1',
      kind: 'List',
      items: registered.items.map((item) => ({
        ...item,
        metadata: { name: item.metadata.name, labels: item.metadata.labels },
        webhooks: item.webhooks.map(({ matchConditions: conditions, ...webhook }) => (matchConditions ? { ...webhook, matchConditions: conditions } : webhook)),
      })),
    });
    const bad = JSON.stringify({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'probe' }, spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'a', image: 'x', env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'yes' }] }] } } } });
    const inEffect = async (installed: boolean) => {
      // A marked bad Job is denied (a server-side dry run) exactly while the webhook is called.
      while ((await cp.kubectl(['create', '--dry-run=server', '-f', '-'], { namespace: 'default', input: bad })).stderr.includes('denied the request') !== installed) {
        await new Promise((resolveWait) => setTimeout(resolveWait, 250));
      }
    };
    const mode = async (label: string) => {
      const deleted = await cp.kubectl(['delete', '--ignore-not-found', 'mutatingwebhookconfiguration,validatingwebhookconfiguration', 'sidecar-terminator']);
      if (deleted.code !== 0) throw new Error(`deleting the configurations: ${deleted.stderr}`);
      if (label !== 'none') {
        const created = await cp.kubectl(['create', '-f', '-'], { input: JSON.stringify(configurations(label === 'matched')) });
        if (created.code !== 0) throw new Error(`creating the configurations: ${created.stderr}`);
      }
      await inEffect(label !== 'none');
    };

    const byMode: Record<string, Phase[]> = { none: [], matched: [], unmatched: [] };
    for (let round = 0; round < rounds; round++) {
      for (const label of Object.keys(byMode)) {
        await mode(label);
        byMode[label]!.push(await phase(cp, core, audit.logPath, serve, label, 'deployments', round));
      }
    }
    await mode('matched');
    const phases = [merged(byMode.none!), merged(byMode.matched!), await phase(cp, core, audit.logPath, serve, 'matched-jobs', 'jobs'), merged(byMode.unmatched!)];

    const [none, matched, jobs, unmatched] = phases as [Phase, Phase, Phase, Phase];
    const row = (p: Phase, what: string) => [
      what,
      String(p.pods),
      `${p.calls.webhook.mutate} / ${p.calls.apiServer['mutate.sidecar-terminator.io']}`,
      `${p.calls.webhook.validate} / ${p.calls.apiServer['validate.sidecar-terminator.io']}`,
      fmt(quantile(p.latencies, 0.5)),
      fmt(quantile(p.latencies, 0.99)),
      fmt(quantile(p.latencies, 0.99) / quantile(none.latencies, 0.99)),
    ];
    const text = `# Which pod creations reach the webhook

\`node bench/reach/run.ts${process.argv.slice(2).map((arg) => ` ${arg}`).join('')}\`, ${new Date().toISOString().slice(0, 10)}, ${rounds} rounds of the three modes in turn: one control plane (kube-apiserver and etcd of scripts/build-control-plane.sh) on this machine's cores; the pods created by kube-controller-manager, not run. Calls: the webhook's own count / the API server's. Latency: the API server's, per pod creation, from its audit log.

${table(['phase', 'pods', '/mutate calls', '/validate calls', 'creation p50 ms', 'creation p99 ms', 'p99 vs no add-on'], [
  row(none, 'Deployment pods, no add-on'),
  row(matched, 'Deployment pods, the add-on with matchConditions'),
  row(unmatched, 'Deployment pods, the add-on without matchConditions (as before them)'),
  row(jobs, 'Job pods without a marker, the add-on with matchConditions'),
])}
`;
    mkdirSync(join(repoRoot, 'bench/results'), { recursive: true });
    writeFileSync(join(repoRoot, 'bench/results/reach.md'), text);
    const summary = phases.map(({ latencies, ...rest }) => ({ ...rest, latencyMs: { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), max: Math.max(...latencies) } }));
    writeFileSync(join(repoRoot, 'bench/results/reach.json'), `${JSON.stringify({ rounds, phases: summary }, null, 2)}\n`);
    process.stdout.write(text);
  } finally {
    await serve?.stop();
    await cp.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
