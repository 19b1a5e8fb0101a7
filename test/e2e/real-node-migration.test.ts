// Moving over from OpenKruise, on a real node, as docs/migrating-from-openkruise.md says: its
// commands are read from that page and run here (the Helm ones as written; Kruise's
// `helm upgrade ... featureGates=...` as the kruise-manager flag that value becomes, Kruise running
// as processes here rather than from its chart). Kruise v1.9.0's kruise-manager runs with its
// SidecarTerminator controller on and kruise-daemon executes ContainerRecreateRequests through the
// node's containerd; the add-on is installed with helm next to it, in warn mode. While both
// controllers run, every Job completes and each sidecar is stopped once (one ContainerRecreateRequest
// per pod, the container killed once, no signal container); then Kruise's gate is turned off, a Job
// running across that completes, and finally the rules are enforced.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT } from '../../src/policy/index.ts';
import { chartDir, helm, helmEnv } from '../chart/helm.ts';
import { repoRoot } from '../support/repo.ts';
import { apiFeatures, kubernetesVersion } from '../support/control-plane.ts';
import { expectStoppedBy, podEnding } from '../support/endings.ts';
import { startKruise, type Kruise } from '../support/kruise.ts';
import { waitFor } from '../support/wait.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { assertAdmittedThroughService, startRealCluster } from '../support/real-stack.ts';
import { jobYaml } from '../support/pods.ts';
import { podsOfJob, waitForJob } from '../support/stack.ts';

const RELEASE = 'sidecar-terminator';
const NS = 'sidecar-terminator';
const MANAGED = 'sidecar-terminator.io/managed';
const CRR = { group: 'apps.kruise.io', version: 'v1alpha1', plural: 'containerrecreaterequests' };
const version = await kubernetesVersion();

/** The page's commands, one per step, found by how they begin. */
function migrationSteps(): { install: string[]; kruiseGates: string; enforce: string[] } {
  const page = readFileSync(join(repoRoot, 'docs/migrating-from-openkruise.md'), 'utf8');
  const commands = [...page.matchAll(/```sh\n([^`]+)```/g)].map(([, body = '']) => body.trim());
  const find = (start: string) => {
    const command = commands.find((line) => line.startsWith(start));
    if (!command) throw new Error(`docs/migrating-from-openkruise.md has no command starting with "${start}"`);
    return command;
  };
  // Words as a shell splits them here: no quotes but around featureGates' value.
  const words = (command: string) => command.split(/\s+/).slice(1);
  const gates = /--set featureGates="([^"]+)"/.exec(find('helm upgrade kruise '))?.[1];
  if (!gates) throw new Error("docs/migrating-from-openkruise.md: Kruise's helm upgrade sets no featureGates");
  return { install: words(find('helm install sidecar-terminator ')), kruiseGates: gates, enforce: words(find('helm upgrade sidecar-terminator ')) };
}

/** A Job: a main container that works `seconds`, and a sidecar marked for Kruise's terminator that exits 0 on SIGTERM; `extraEnv` on the sidecar. */
function job(name: string, seconds: number, extraEnv: Array<{ name: string; value: string }> = []): string {
  return jobYaml(name, {
    containers: [
      { name: 'main', image: 'busybox:1.35', command: ['sh', '-c', `sleep ${seconds}`] },
      { name: 'proxy', image: 'busybox:1.35', command: ['sh', '-c', "trap 'exit 0' TERM; sleep 2147483647 & wait"], env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, ...extraEnv] },
    ],
  });
}
/** Accepted and finished by Kruise ("yes" counts as unset), an error under the add-on's rules. */
const KRUISE_ACCEPTS = [{ name: ENV_IGNORE_EXIT_CODE, value: 'yes' }];

if (!apiFeatures(version).validatingAdmissionPolicy) t.plan(0, `Kubernetes ${version.gitVersion} is older than the chart's kubeVersion (>=1.30): helm refuses to install it`);
else if (canRunRealNode(t)) {
  const steps = migrationSteps();
  const cluster = await startRealCluster(t, { reachableFromPods: true, node: { images: ['sidecar-terminator', 'busybox'] } });
  const { cp, core, node } = cluster;
  const custom = cp.kubeConfig.makeApiClient(CustomObjectsApi);
  const env = helmEnv(cp.kubeconfigPath, t);
  const kubectl = (args: string[], namespace?: string, input?: string) => cp.kubectl(args, { ...(namespace ? { namespace } : {}), ...(input !== undefined ? { input } : {}) });
  let kruise: Kruise = await startKruise(cp, { featureGates: 'SidecarTerminator=true', nodes: [node] });
  t.teardown(() => kruise.stop());

  /** Runs a Helm command of the page, its chart path that of this checkout. */
  const runHelm = async (t: Test, args: string[]) => {
    const result = await helm(args.map((arg) => (arg === 'charts/sidecar-terminator' ? chartDir : arg)), { env });
    t.equal(result.code, 0, `helm ${args.join(' ')}: ${result.stderr}`);
  };

  /**
   * Every Job completes; each pod's sidecar was stopped once: one ContainerRecreateRequest, killed
   * once, no signal container; or, for a pod `signalled` says so, one signal container and no request.
   */
  async function completedOnce(t: Test, namespace: string, jobs: string[], signalled: (pod: V1Pod) => boolean = () => false): Promise<V1Pod[]> {
    for (const name of jobs) await waitForJob(cluster, namespace, name, 'Complete', 240_000).catch(async (error: unknown) => {
      t.comment(kruise.logTails(20));
      throw error;
    });
    const pods = (await Promise.all(jobs.map((name) => podsOfJob(cluster, namespace, name)))).flat();
    t.equal(pods.length, jobs.length, 'one pod per Job: none failed and was replaced');
    const crrs = ((await custom.listNamespacedCustomObject({ ...CRR, namespace })) as { items: Array<{ metadata: { name: string; managedFields?: Array<{ manager?: string; subresource?: string; fieldsV1?: Record<string, unknown> }> } }> }).items;
    for (const pod of pods) {
      const name = pod.metadata!.name!;
      const path = signalled(pod) ? 'signal' : 'crr';
      t.equal(pod.status?.phase, 'Succeeded', `${name}: Succeeded`);
      t.same(crrs.filter((crr) => crr.metadata.name === `sidecar-termination-${pod.metadata!.uid}`).length, path === 'crr' ? 1 : 0, `${name}: ${path === 'crr' ? 'one ContainerRecreateRequest' : 'no ContainerRecreateRequest'}`);
      t.same(pod.spec?.ephemeralContainers?.map((c) => c.targetContainerName) ?? [], path === 'crr' ? [] : ['proxy'], `${name}: ${path === 'crr' ? 'no signal container' : 'one signal container'}`);
      const proxy = pod.status?.containerStatuses?.find((status) => status.name === 'proxy');
      t.match(proxy, { restartCount: 0, state: { terminated: { exitCode: 0 } } }, `${name}: the sidecar was stopped once, and exited 0`);
      // By a ContainerRecreateRequest, whichever controller made it (expectStoppedBy, for the add-on's alone, below), and nothing else.
      const ending = await podEnding(cluster, pod);
      t.same(ending.sidecars.map((sidecar) => [sidecar.container, sidecar.steps]), [['proxy', [path]]], `${name}: how the sidecar was stopped`);
      t.same(ending.warnings, [], `${name}: no warning of the add-on`);
    }
    t.equal(crrs.length, pods.filter((pod) => !signalled(pod)).length, 'no other ContainerRecreateRequest');
    // Who wrote each request's spec: its creator.
    const managers = crrs.map((crr) => crr.metadata.managedFields?.find((fields) => !fields.subresource && fields.fieldsV1 && 'f:spec' in fields.fieldsV1)?.manager ?? '?');
    t.comment(`ContainerRecreateRequests created by: ${JSON.stringify(Object.fromEntries([...new Set(managers)].map((m) => [m, managers.filter((x) => x === m).length])))}`);
    return pods;
  }

  /** The chart's watcher's JSON log lines (one replica). */
  const watcherLog = async () =>
    (await kubectl(['logs', `deployment/${RELEASE}-watcher`], NS)).stdout.split('\n').flatMap((line): Array<Record<string, unknown>> => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  /** Whether the watcher stopped this pod's sidecar with a signal container, by its log. */
  const watcherSignalled = (log: Array<Record<string, unknown>>) => (pod: V1Pod) =>
    log.some((line) => line.msg === 'stopping sidecars' && line.pod === `${pod.metadata!.namespace}/${pod.metadata!.name}` && JSON.stringify(line.steps).includes('add-signal-containers'));

  const stopEvents = async (namespace: string, pod: V1Pod) =>
    (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${pod.metadata!.name}` })).items.filter((event) => event.reason === 'SidecarTerminator').map((event) => event.source?.component ?? event.reportingComponent);

  t.test('Kruise alone: its SidecarTerminator controller stops the sidecar', async (t) => {
    const namespace = await cp.createNamespace();
    t.equal((await kubectl(['apply', '-f', '-'], namespace, job('kruise-only', 2))).code, 0);
    const [pod] = await completedOnce(t, namespace, ['kruise-only']);
    t.same(await stopEvents(namespace, pod!), ['sidecarterminator-controller'], "Kruise's event");
  });

  let straddling = '';

  t.test('step 1, the add-on installed in warn mode next to Kruise: both run, every Job completes, nothing is stopped twice', async (t) => {
    await runHelm(t, steps.install);
    t.ok(steps.install.includes('admission.enforcement=warn'), 'the page starts in warn mode');
    for (const component of ['webhook', 'watcher']) {
      const rolled = await kubectl(['rollout', 'status', `deployment/${RELEASE}-${component}`, '--timeout=300s'], NS);
      t.equal(rolled.code, 0, `the ${component} runs: ${rolled.stderr}`);
    }
    await waitFor('the webhook to patch its CA in', async () => (await kubectl(['get', 'validatingwebhookconfiguration', RELEASE, '-o', 'jsonpath={.webhooks[0].clientConfig.caBundle}'])).stdout !== '');
    await waitFor('the watcher to start with the crr mechanism', async () => /"killMechanism":"crr"/.test((await kubectl(['logs', `deployment/${RELEASE}-watcher`], NS)).stdout));

    const namespace = await cp.createNamespace();
    // The warnings below come from the webhook: the API server must reach it through its Service first.
    await assertAdmittedThroughService(t, cp, namespace);
    const flagged = await kubectl(['apply', '-f', '-'], namespace, job('kruise-accepts', 2, KRUISE_ACCEPTS));
    t.equal(flagged.code, 0, 'warn mode: a Job Kruise accepts and the rules flag is admitted');
    t.match(flagged.stderr, /Warning: spec\.template\.spec\.containers\[1\]\.env\[KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE\]: Invalid value: "yes"/, 'with the finding as a warning');
    const jobs = ['both-1', 'both-2', 'both-3', 'both-4', 'both-5'];
    for (const [i, name] of jobs.entries()) t.equal((await kubectl(['apply', '-f', '-'], namespace, job(name, 2 + i))).code, 0);
    const pods = await completedOnce(t, namespace, [...jobs, 'kruise-accepts']);
    t.ok(pods.every((pod) => pod.metadata?.labels?.[MANAGED] === 'true'), 'the webhook labelled every pod');
    // Both controllers act; which one creates a pod's request is a race, and Kruise's controller
    // records its event only when it wins it. The add-on records its own when it plans the stop,
    // unless the sidecar had already stopped by then.
    const allEvents = () => Promise.all(pods.map((pod) => stopEvents(namespace, pod)));
    const sources = await waitFor('an event on every pod', async () => {
      const found = await allEvents();
      return found.every((events) => events.length > 0) && found;
    }).catch(allEvents);
    t.ok(sources.every((events) => events.length > 0), `every stop announced by a controller (events per pod: ${JSON.stringify(sources)})`);
    t.ok(sources.some((events) => events.includes('sidecar-terminator')), 'the add-on acted beside Kruise');
    t.comment(`Kruise's controller announced ${sources.filter((events) => events.includes('sidecarterminator-controller')).length} of the ${pods.length} stops`);

    // A Job whose main container still works when Kruise's controller goes.
    straddling = await cp.createNamespace();
    t.equal((await kubectl(['apply', '-f', '-'], straddling, job('straddling', 45))).code, 0);
    await waitFor('the straddling pod to run', async () => (await podsOfJob(cluster, straddling, 'straddling'))[0]?.status?.phase === 'Running', { timeoutMs: 120_000 });
  });

  t.test("step 2, Kruise's SidecarTerminator gate turned off: the add-on alone finishes the Job that straddled it, and the next ones", async (t) => {
    t.equal(steps.kruiseGates, 'SidecarTerminator=false', "the page turns Kruise's SidecarTerminator feature gate off");
    const restarting = Date.now();
    await kruise.stop();
    // The manager rewrote its webhook configurations (their address and CA): they are registered anew, as a restarted manager fills them in.
    await kubectl(['delete', 'mutatingwebhookconfiguration', 'kruise-mutating-webhook-configuration']);
    await kubectl(['delete', 'validatingwebhookconfiguration', 'kruise-validating-webhook-configuration']);
    kruise = await startKruise(cp, { featureGates: steps.kruiseGates, nodes: [node] });
    // kruise-daemon restarted with the manager. With auto the watcher reads the daemon's pod every
    // minute: one that read it gone meanwhile signals the node's pods until it reads it ready again.
    const daemonLines = async () =>
      (await watcherLog()).filter((line) => Number(line.time) >= restarting && /^(no ready kruise-daemon pod|nodes a kruise-daemon serves)/.test(String(line.msg)));
    await waitFor('the watcher to read the node served by kruise-daemon again, if it read it unserved', async () => {
      const last = (await daemonLines()).at(-1);
      return last === undefined || String(last.msg).startsWith('nodes a kruise-daemon serves');
    }, { timeoutMs: 150_000 });
    t.comment(`the watcher's reads of kruise-daemon's pods since the restart: ${JSON.stringify((await daemonLines()).map((line) => line.msg))}`);
    const namespace = await cp.createNamespace();
    for (const name of ['after-1', 'after-2']) t.equal((await kubectl(['apply', '-f', '-'], namespace, job(name, 2))).code, 0);
    const pods = await completedOnce(t, namespace, ['after-1', 'after-2']);
    for (const pod of pods) {
      t.same(await stopEvents(namespace, pod), ['sidecar-terminator'], `${pod.metadata!.name}: stopped by the add-on alone`);
      await expectStoppedBy(t, cluster, pod, { proxy: 'crr' });
    }
    // Its main container may have finished while the watcher read no ready daemon: then it was signalled, once.
    const log = await watcherLog();
    const [across] = await completedOnce(t, straddling, ['straddling'], watcherSignalled(log));
    t.same(await stopEvents(straddling, across!), ['sidecar-terminator'], 'the Job running across the restart: the add-on stopped its sidecar');
    const acrossSignalled = watcherSignalled(log)(across!);
    if (acrossSignalled) t.ok(log.some((line) => Number(line.time) >= restarting && String(line.msg).startsWith('no ready kruise-daemon pod')), 'signalled only because the watcher read no ready kruise-daemon pod');
    await expectStoppedBy(t, cluster, across!, { proxy: acrossSignalled ? 'signal' : 'crr' });
  });

  t.test('step 3, the rules enforced: a Job Kruise would accept with a mistake is denied at kubectl apply', async (t) => {
    await runHelm(t, steps.enforce);
    const namespace = await cp.createNamespace();
    const denied = await waitFor('the webhook replicas to deny', async () => {
      const result = await kubectl(['apply', '--dry-run=server', '-f', '-'], namespace, job('mistake', 2, KRUISE_ACCEPTS));
      return result.code !== 0 && result;
    }, { timeoutMs: 180_000 });
    t.match(denied.stderr, /admission webhook "validate\.sidecar-terminator\.io" denied the request: 1 sidecar configuration error: .*Invalid value: "yes"/);
  });
}
