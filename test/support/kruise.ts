// OpenKruise as its users run it, next to a test control plane: its CRDs, kruise-manager (whose
// ContainerRecreateRequest webhook fills in each request's node, pod UID and container IDs, and
// whose SidecarTerminator controller can be switched on), and kruise-daemon on each real node (it
// stops containers for ContainerRecreateRequests through the node's containerd). Built from the Go
// module proxy by scripts/build-kruise.sh.
//
// Only the webhooks for ContainerRecreateRequests are registered (the manager fills in their
// address and CA): the tests are about stopping sidecars, and Kruise's pod webhooks would put the
// manager in the path of every pod.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, ApiextensionsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { isApiError } from '../../src/kube/api-errors.ts';
import { KRUISE_DAEMON_SELECTOR, readKruiseDaemonNodes } from '../../src/kube/kruise-daemons.ts';
import type { ControlPlane } from './control-plane.ts';
import { ManagedProcess, buildScriptOutput, keepOnlyLogs, logTails, retryOnPortTaken, startFailure, waitWhileRunning } from './managed-process.ts';
import { PortLease } from './net.ts';
import type { RealNode } from './real-node.ts';

export const KRUISE_NAMESPACE = 'kruise-system';
const MUTATING = 'kruise-mutating-webhook-configuration';
const VALIDATING = 'kruise-validating-webhook-configuration';
/** kruise-daemon looks for the container runtime's socket under this fixed path (a hostPath mount in its DaemonSet). */
const HOST_VAR_RUN = '/hostvarrun';

export interface KruiseOptions {
  /** kruise-manager's feature gates, e.g. `SidecarTerminator=true` to run Kruise's own controller. */
  featureGates?: string;
  /** Run kruise-daemon on these nodes. */
  nodes?: RealNode[];
  /** Where a second try on new ports is reported. Default: a line on stderr. */
  log?: (line: string) => void;
}

export interface Kruise {
  /** The manager's and daemons' logs, for a failed test. */
  logTails(lines?: number): string;
  /** SIGKILLs the kruise-daemon of this node (as an OOM kill or a crash does); its pod turns unready. */
  killDaemon(nodeName: string): void;
  /** Starts the killed kruise-daemon of this node again, as its DaemonSet would; resolves once its pod is ready. Throws when it still runs. */
  restartDaemon(nodeName: string): Promise<void>;
  /**
   * Stops the processes. Kruise's webhook configurations stay, naming the stopped manager (a
   * request the ContainerRecreateRequest webhooks match is refused), and so do the daemons' pods.
   */
  stop(): Promise<void>;
  /**
   * As `helm uninstall` does: stops the processes and deletes the webhook configurations and the
   * daemons' pods; the CRDs and the namespace stay. startKruise on the same control plane
   * installs it again.
   */
  uninstall(): Promise<void>;
}

/** Where scripts/build-kruise.sh put the binaries, CRDs and webhook manifests. */
export const buildKruise = () => buildScriptOutput('build-kruise.sh');

/**
 * Installs Kruise's CRDs and runs kruise-manager (and kruise-daemon on `options.nodes`) until
 * stop(). Their ports are leased host-wide (test/support/net.ts); a start that fails because some
 * other program took one is tried once more on new ones. Fails with a ComponentStartError naming
 * the component that did not start, whose log is kept.
 */
export async function startKruise(cp: ControlPlane, options: KruiseOptions = {}): Promise<Kruise> {
  const home = await buildKruise();
  return retryOnPortTaken('OpenKruise', () => startKruiseOnce(cp, home, options), options.log);
}

async function startKruiseOnce(cp: ControlPlane, home: string, options: KruiseOptions): Promise<Kruise> {
  const dir = mkdtempSync(join(tmpdir(), 'st-kruise-'));
  const processes: ManagedProcess[] = [];
  const ports = new PortLease();
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  /** The nodes whose daemon's pod is ready, as the add-on reads them. */
  const servedNodes = async () => {
    const read = await readKruiseDaemonNodes(core, KRUISE_NAMESPACE);
    return 'nodes' in read ? read.nodes : new Set<string>();
  };
  /** Each daemon's node and address, by node name, to start it again. */
  const daemons = new Map<string, { node: RealNode; addr: number }>();
  const daemonProcess = (nodeName: string) => {
    const daemon = processes.find((p) => p.name === kruiseDaemonName(nodeName));
    if (!daemon) throw new Error(`no kruise-daemon runs on ${nodeName}`);
    return daemon;
  };
  // A daemon started again replaces its old process in `processes` (and appends to its log). Only
  // its own exit fails the wait: another daemon may lie killed meanwhile.
  const startDaemon = async (node: RealNode, addr: number) => {
    const daemon = launchDaemon(home, dir, cp, node, addr);
    const index = processes.findIndex((p) => p.name === daemon.name);
    if (index >= 0) processes[index] = daemon;
    else processes.push(daemon);
    daemons.set(node.name, { node, addr });
    await waitUntil(`kruise-daemon on ${node.name} to be healthy`, [daemon], daemon, () => httpOk(`http://127.0.0.1:${addr}/healthz`));
    return daemon;
  };
  const stop = async (keepLogs: boolean) => {
    await Promise.all(processes.map((p) => p.stop()));
    ports.release();
    if (keepLogs) keepOnlyLogs(dir);
    else rmSync(dir, { recursive: true, force: true });
  };
  /** What `helm uninstall` removes besides the processes: the webhook configurations (failurePolicy Fail, pointing at the manager) and the daemon pods. */
  const removeFromCluster = async () => {
    const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    await Promise.all([
      admission.deleteMutatingWebhookConfiguration({ name: MUTATING }).catch(unlessNotFound),
      admission.deleteValidatingWebhookConfiguration({ name: VALIDATING }).catch(unlessNotFound),
      // Their DaemonSet's, which the chart removes.
      ...[...daemons.keys()].map((nodeName) => core.deleteNamespacedPod({ namespace: KRUISE_NAMESPACE, name: kruiseDaemonName(nodeName), gracePeriodSeconds: 0 }).catch(unlessNotFound)),
    ]);
  };
  const kruise: Kruise = {
    logTails: (lines = 40) => logTails(processes, lines),
    killDaemon: (nodeName) => daemonProcess(nodeName).killNow(),
    restartDaemon: async (nodeName) => {
      // The exit of a daemon just killed reaches the event loop a moment later.
      if (!(await daemonProcess(nodeName).waitExit(5000))) throw new Error(`the kruise-daemon of ${nodeName} is running`);
      const { node, addr } = daemons.get(nodeName)!;
      const daemon = await startDaemon(node, addr);
      await waitUntil(`the pod of kruise-daemon on ${nodeName} to be ready`, [daemon], daemon, async () => (await servedNodes()).has(nodeName));
    },
    stop: () => stop(false),
    uninstall: async () => {
      await stop(false);
      await removeFromCluster();
    },
  };
  try {
    await installCrds(cp, join(home, 'crd'));
    // There already when Kruise was installed in this cluster before.
    const namespace = await cp.kubectl(['create', 'namespace', KRUISE_NAMESPACE]);
    if (namespace.code !== 0 && !/AlreadyExists/.test(namespace.stderr)) throw new Error(`creating namespace ${KRUISE_NAMESPACE} failed: ${namespace.stderr}`);
    await registerWebhooks(cp, join(home, 'webhook/manifests.yaml'));

    const webhookPort = await ports.take();
    const manager = new ManagedProcess('kruise-manager', [
      join(home, 'bin/kruise-manager'),
      '--enable-leader-election=false',
      // Nothing reads its metrics or probes: no listener ("0"), so no port to take.
      '--metrics-addr=0',
      '--health-probe-addr=0',
      '--enable-pprof=false',
      ...(options.featureGates ? [`--feature-gates=${options.featureGates}`] : []),
      '--v=2',
    ], join(dir, 'kruise-manager.log'), {
      env: {
        ...process.env,
        KUBECONFIG: cp.kubeconfigPath,
        POD_NAMESPACE: KRUISE_NAMESPACE,
        // The manager serves its webhooks here and writes this URL into the configurations.
        WEBHOOK_HOST: '127.0.0.1',
        WEBHOOK_PORT: String(webhookPort),
        WEBHOOK_CERT_DIR: join(dir, 'webhook-certs'),
      },
    });
    processes.push(manager);
    await waitUntil('kruise-manager to serve its webhook with a CA the API server trusts', processes, manager, async () => {
      const mutating = await cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: MUTATING });
      // Its own port in the URL: a configuration written by an earlier try names another.
      return (mutating.webhooks ?? []).length > 0 && mutating.webhooks!.every((w) => (w.clientConfig.caBundle ?? '').length > 0 && (w.clientConfig.url ?? '').includes(`127.0.0.1:${webhookPort}/`));
    });

    mkdirSync(HOST_VAR_RUN, { recursive: true });
    for (const node of options.nodes ?? []) {
      const addr = await ports.take();
      await startDaemon(node, addr);
      await daemonPod(cp, node, addr);
    }
    if ((options.nodes ?? []).length > 0) {
      await waitUntil("kruise-daemon's pods to be ready", processes, undefined, async () => (await servedNodes()).size === options.nodes!.length);
    }
  } catch (err) {
    const logs = kruise.logTails();
    await stop(true);
    // A start that failed leaves nothing behind that refuses every ContainerRecreateRequest.
    await removeFromCluster().catch(() => undefined);
    throw startFailure('OpenKruise', err, logs);
  }
  return kruise;
}

/** The name of the daemon's process and of its pod. */
export const kruiseDaemonName = (nodeName: string) => `kruise-daemon-${nodeName}`;

/**
 * kruise-daemon on `node`, serving its health on `addr`. As its DaemonSet mounts the host's
 * /var/run at /hostvarrun: here the node's directory, which holds its containerd.sock, bound
 * there in a mount namespace of its own. unshare and sh exec, so its pid is the daemon's.
 */
function launchDaemon(home: string, dir: string, cp: ControlPlane, node: RealNode, addr: number): ManagedProcess {
  const daemonCommand = `exec setpriv --pdeathsig KILL -- "$0" "$@"`;
  return new ManagedProcess(kruiseDaemonName(node.name), [
    'unshare',
    '--mount', '--propagation', 'private', '--', 'sh', '-c', `mount --bind "$NODE_DIR" ${HOST_VAR_RUN} && ${daemonCommand}`,
    join(home, 'bin/kruise-daemon'),
    `--addr=127.0.0.1:${addr}`,
    '--enable-pprof=false',
    `--kubeconfig=${cp.kubeconfigPath}`,
    '--v=2',
  ], join(dir, `${kruiseDaemonName(node.name)}.log`), { env: { ...process.env, NODE_NAME: node.name, NODE_DIR: node.dir }, setsPdeathsig: true });
}

/**
 * kruise-daemon runs here as a process of the host, not from its DaemonSet (no image of it is
 * built). Its pod, as the DaemonSet would make it, is what the cluster shows of it and what the
 * add-on reads: hostNetwork, on the daemon's node, ready while the daemon's /healthz answers
 * (the kubelet probes it every second; three misses make it unready), running the pause image in its place.
 */
async function daemonPod(cp: ControlPlane, node: RealNode, port: number): Promise<void> {
  const [key, value] = KRUISE_DAEMON_SELECTOR.split('=') as [string, string];
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  const name = kruiseDaemonName(node.name);
  // One left by an earlier start (a retry on new ports, a second OpenKruise in the same cluster) probes the old port.
  await core.deleteNamespacedPod({ namespace: KRUISE_NAMESPACE, name, gracePeriodSeconds: 0 }).catch(() => undefined);
  await waitUntil(`the earlier pod ${name} to be gone`, [], undefined, async () => !(await core.readNamespacedPod({ namespace: KRUISE_NAMESPACE, name }).then(() => true, () => false)));
  await core.createNamespacedPod({
    namespace: KRUISE_NAMESPACE,
    body: {
      metadata: { name, labels: { [key]: value } },
      spec: {
        nodeName: node.name,
        hostNetwork: true,
        tolerations: [{ operator: 'Exists' }],
        terminationGracePeriodSeconds: 0,
        containers: [{
          name: 'daemon',
          image: node.images.pause!,
          imagePullPolicy: 'Never',
          // Three misses in a row: one slow answer on a loaded machine is not a dead daemon.
          readinessProbe: { httpGet: { host: '127.0.0.1', port, path: '/healthz' }, periodSeconds: 1, timeoutSeconds: 2, failureThreshold: 3 },
        }],
      },
    },
  });
}

/** Server-side apply: some of Kruise's CRDs are too large for the last-applied annotation. */
async function installCrds(cp: ControlPlane, crdDir: string): Promise<void> {
  const files = readdirSync(crdDir).filter((file) => file.endsWith('.yaml'));
  const applied = await cp.kubectl(['apply', '--server-side', ...files.flatMap((file) => ['-f', join(crdDir, file)])]);
  if (applied.code !== 0) throw new Error(`installing Kruise's CRDs failed: ${applied.stderr}`);
  const extensions = cp.kubeConfig.makeApiClient(ApiextensionsV1Api);
  await waitUntil("Kruise's CRDs to be established", [], undefined, async () => {
    const crds = (await extensions.listCustomResourceDefinition()).items.filter((crd) => crd.spec.group.endsWith('kruise.io'));
    return crds.length >= files.length && crds.every((crd) => crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True'));
  });
}

/** Kruise's webhook configurations from its manifests, named as its kustomization names them, CRR webhooks only. */
async function registerWebhooks(cp: ControlPlane, manifestsPath: string): Promise<void> {
  const documents = parseAllDocuments(readFileSync(manifestsPath, 'utf8')).map((doc) => doc.toJS() as { kind: string; metadata: { name: string }; webhooks: { clientConfig: { service?: { path?: string } } }[] });
  const configurations = documents
    .filter((doc) => doc?.kind === 'MutatingWebhookConfiguration' || doc?.kind === 'ValidatingWebhookConfiguration')
    .map((doc) => ({
      ...doc,
      metadata: { name: doc.kind === 'MutatingWebhookConfiguration' ? MUTATING : VALIDATING },
      webhooks: doc.webhooks.filter((webhook) => webhook.clientConfig.service?.path?.includes('containerrecreaterequest')),
    }));
  const applied = await cp.kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: configurations }) });
  if (applied.code !== 0) throw new Error(`registering Kruise's webhook configurations failed: ${applied.stderr}`);
}


function waitUntil(what: string, processes: ManagedProcess[], waitingOn: ManagedProcess | undefined, check: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  return waitWhileRunning(what, processes, Date.now() + timeoutMs, check, { intervalMs: 500, waitingOn });
}

/** A delete's error, unless it says the object is already gone. */
function unlessNotFound(err: unknown): void {
  if (!isApiError(err, 404)) throw err;
}

async function httpOk(url: string): Promise<boolean> {
  try {
    return (await fetch(url)).ok;
  } catch {
    return false;
  }
}
