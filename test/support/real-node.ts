// A real Kubernetes node for end-to-end tests: containerd 2 with runc and the CNI bridge plugin,
// and a kubelet of the control plane's version registered with a test control plane; optionally
// kube-proxy (so pods reach Services and the API server) and OpenKruise's kruise-daemon. Built from
// the Go module proxy by scripts/build-control-plane.sh and scripts/build-node.sh; the images come
// from scripts/build-images.ts and are imported into containerd, so nothing is pulled, except from
// the registries given (test/support/registry.ts), as a cluster's nodes pull a release.
//
// Each node is self-contained, so test files can run several at once: its own directory (containerd
// root and state, kubelet root, pod logs), containerd socket, kubelet port (leased host-wide, see
// test/support/net.ts; a start that fails because some other program took it is tried once more
// on a new one), and a bridge with its own /24 of 10.244.0.0/16. Processes are started through `setpriv --pdeathsig KILL`; containers outlive
// their containerd, so stop() (or the exit handler, or the next node started after a crash) removes
// every pod sandbox through the CRI before containerd stops.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { CoreV1Api, type V1Node } from '@kubernetes/client-node';
import { POD_IMAGES } from '../../src/policy/names.ts';
import { hostAddress, kubernetesVersion, type ControlPlane } from './control-plane.ts';
import { ManagedProcess, buildScriptOutput, keepOnlyLogs, killOnExit, logTails, retryOnPortTaken, startFailure, waitWhileRunning } from './managed-process.ts';
import { httpStatus, PortLease } from './net.ts';
import { repoRoot } from './repo.ts';

const run = promisify(execFile);

/** The images scripts/build-images.ts builds, by the name it knows them by. */
export type ImageName =
  | 'pause'
  | 'quick-exit'
  | 'stop-sidecar'
  | 'test-container'
  | 'test-container-nonroot'
  | 'busybox'
  | 'tini'
  | 'nginx'
  | 'otelcol'
  | 'cloud-sql-proxy'
  | 'sidecar-terminator';

export interface RealNodeOptions {
  /** Node name; default `real-<random>`. */
  name?: string;
  /** Labels the kubelet registers the node with (for example `type: virtual-kubelet`). */
  labels?: Record<string, string>;
  /** Taints the kubelet registers the node with, as `key=value:Effect`. */
  taints?: string[];
  /** Images imported into containerd besides the pause image and the add-on's pod images. Default: the test images and busybox. */
  images?: ImageName[];
  /**
   * Import the images the watcher runs in pods (POD_IMAGES: the signal container's, the quick-exit
   * image), as serve's defaults name them. Default true; false for a node that pulls them from a
   * registry, as a cluster installing a release does.
   */
  podImages?: boolean;
  /** Run kube-proxy (nftables mode): pods reach ClusterIPs, the API server among them. Needs the control plane's `reachableFromPods`. */
  kubeProxy?: boolean;
  /** How long until the node is Ready. Default 240 s (a loaded machine imports the images slowly). */
  readyTimeoutMs?: number;
  /** Where a second try on new ports is reported. Default: a line on stderr. */
  log?: (line: string) => void;
  /** Registries containerd pulls from over HTTPS with a private CA (a hosts.toml each, as a cluster's nodes are configured). */
  registries?: { host: string; caFile: string }[];
}

export interface RealNode {
  name: string;
  /** The node's directory: containerd, kubelet and their logs (`*.log`). */
  dir: string;
  /** unix:// address of the node's containerd (its CRI endpoint). */
  criEndpoint: string;
  /** References of the imported images, by name. */
  images: Partial<Record<ImageName, string>>;
  /** Runs crictl against this node's containerd. */
  crictl(args: string[]): Promise<string>;
  /** Imports more images (scripts/build-images.ts builds them on demand). */
  importImages(names: ImageName[]): Promise<void>;
  /** The last lines of each process's log. */
  logTails(lines?: number): string;
  /**
   * Stops the kubelet with SIGTERM (as `systemctl restart kubelet` does; one already exited is
   * started alone) and starts it again with the same flags; resolves once it answers /healthz
   * and the Node reports Ready from the new kubelet. Containers run on under containerd meanwhile.
   */
  restartKubelet(): Promise<void>;
  /** Sends `sig` to the kubelet (a fault: SIGKILL, or SIGSTOP and then SIGCONT). Throws when it does not run. */
  signalKubelet(sig: NodeJS.Signals): void;
  /** Stops kubelet, removes every pod sandbox, stops containerd, removes the node's network and directory. Idempotent. */
  stop(): Promise<void>;
}

export const DEFAULT_IMAGES: ImageName[] = ['test-container', 'test-container-nonroot', 'busybox'];

const CLUSTER_CIDR = '10.244.0.0/16';
const LEASES_DIR = '/run/sidecar-terminator-nodes';
/** Tells the tests that need a real node to fail, not skip, when the machine cannot run one (set by .ci/run). */
export const REQUIRE_REAL_NODE_ENV = 'SIDECAR_TERMINATOR_REQUIRE_REAL_NODE';

/** Why this machine cannot run a real node, or undefined when it can. */
export function realNodeUnavailable(): string | undefined {
  if (process.platform !== 'linux') return 'a real node needs Linux';
  if (process.getuid?.() !== 0) return 'a real node needs root (containerd, runc and kubelet manage namespaces, mounts and cgroups)';
  const cgroupV1 = existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes');
  const cgroupV2 = existsSync('/sys/fs/cgroup/cgroup.controllers');
  if (!cgroupV1 && !cgroupV2) return 'a real node needs cgroups mounted under /sys/fs/cgroup (neither a v1 memory hierarchy nor cgroup v2 was found)';
  if (!readFileSync('/proc/filesystems', 'utf8').includes('overlay')) return 'a real node needs the overlay filesystem (containerd\'s overlayfs snapshotter)';
  for (const command of ['ip', 'setpriv', 'openssl', 'go']) {
    try {
      execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    } catch {
      return `a real node needs the ${command} command`;
    }
  }
  return undefined;
}

interface Tap {
  plan(n: number, reason?: string): void;
  comment(...message: unknown[]): void;
}

/**
 * For a test file that needs a real node: true when it can run one. Otherwise it says why once and
 * plans no test (the file shows as skipped), unless SIDECAR_TERMINATOR_REQUIRE_REAL_NODE is set
 * (as .ci/run sets it), where a missing real node is an error.
 */
export function canRunRealNode(t: Tap): boolean {
  const reason = realNodeUnavailable();
  if (reason === undefined) return true;
  if (process.env[REQUIRE_REAL_NODE_ENV]) throw new Error(`${REQUIRE_REAL_NODE_ENV} is set but ${reason}`);
  t.plan(0, `skipped: ${reason}`);
  return false;
}

/** Builds (or finds cached) the archives of these images: reference and OCI archive path each. */
export async function buildImages(names: ImageName[]): Promise<Map<ImageName, { reference: string; archive: string }>> {
  const { stdout } = await run(join(repoRoot, 'node_modules/.bin/node'), [join(repoRoot, 'scripts/build-images.ts'), ...names], {
    cwd: repoRoot,
    maxBuffer: 16 * 1024 * 1024,
  });
  const lines = stdout.trim().split('\n');
  return new Map(
    names.map((name, index) => {
      const [reference, archive] = (lines[index] ?? '').split('\t');
      if (!reference || !archive) throw new Error(`scripts/build-images.ts printed no archive for ${name}`);
      return [name, { reference, archive }];
    }),
  );
}

/**
 * Starts a real node; fails with a ComponentStartError naming the component that did not start,
 * whose log is kept (the rest of the node's directory is removed).
 */
export async function startRealNode(cp: ControlPlane, options: RealNodeOptions = {}): Promise<RealNode> {
  cleanStaleNodes();
  const [kubeBin, nodeBin] = await Promise.all([buildScriptOutput('build-control-plane.sh'), buildScriptOutput('build-node.sh')]);
  // One name for both tries: a kubelet that registered before it failed leaves no second Node behind.
  const name = options.name ?? `real-${Math.random().toString(16).slice(2, 8)}`;
  return retryOnPortTaken(`node ${name}`, async () => {
    const node = new LocalNode(cp, kubeBin, nodeBin, { ...options, name });
    try {
      await node.start(options.readyTimeoutMs ?? 240_000);
    } catch (err) {
      const logs = node.logTails();
      await node.stop({ keepLogs: true });
      throw startFailure(`node ${name}`, err, logs);
    }
    return node;
  }, options.log);
}

class LocalNode implements RealNode {
  /** Stops the exit handler from tearing this down once stop() has. */
  private forget: () => void = () => true;
  readonly name: string;
  readonly dir: string;
  readonly criEndpoint: string;
  readonly images: Partial<Record<ImageName, string>> = {};
  private readonly cp: ControlPlane;
  private readonly kubeBin: string;
  private readonly nodeBin: string;
  private readonly options: RealNodeOptions;
  private readonly processes = new Map<string, ManagedProcess>();
  /** The kubelet's port and kube-proxy's two. */
  private readonly ports = new PortLease();
  private subnet: number | undefined;
  private stopping: Promise<void> | undefined;
  /** Held while this node's kube-proxy may run: its nftables table is the host's, one at a time. */
  private kubeProxyLock: ChildProcess | undefined;
  /** The kubelet's flags and the URL of its /healthz, kept for a restart. */
  private kubelet: { args: string[]; healthz: string } | undefined;

  constructor(cp: ControlPlane, kubeBin: string, nodeBin: string, options: RealNodeOptions) {
    this.cp = cp;
    this.kubeBin = kubeBin;
    this.nodeBin = nodeBin;
    this.options = options;
    this.name = options.name!;
    this.dir = mkdtempSync(join(tmpdir(), 'st-node-'));
    this.criEndpoint = `unix://${join(this.dir, 'containerd.sock')}`;
    writeFileSync(join(this.dir, 'owner.pid'), String(process.pid));
  }

  private get bridge(): string {
    return `st-cni${this.subnet}`;
  }

  async start(timeoutMs: number): Promise<void> {
    this.forget = killOnExit(this);
    // Before the deadline starts: waiting for another test's kube-proxy is not this node's start.
    if (this.options.kubeProxy) this.kubeProxyLock = await holdHostLock(KUBE_PROXY_LOCK);
    const deadline = Date.now() + timeoutMs;
    this.subnet = leaseSubnet(this.dir);
    writeFileSync(join(this.dir, 'subnet'), String(this.subnet));
    const podImages = this.options.podImages === false ? [] : Object.values(POD_IMAGES);
    const imageNames: ImageName[] = ['pause', ...podImages, ...(this.options.images ?? DEFAULT_IMAGES)];
    const [images] = await Promise.all([buildImages([...new Set(imageNames)]), this.writeContainerdConfig()]);
    const pause = images.get('pause')!.reference;
    this.writeCniConfig();
    await this.rewritePauseImage(pause);

    this.launch('containerd', join(this.nodeBin, 'containerd'), ['--config', join(this.dir, 'containerd.toml')]);
    await this.waitUntil('containerd', deadline, async () => (await this.tryCrictl(['version'])) !== undefined, 'containerd');
    // The pause image first (the kubelet's first sandbox needs it); the others while the kubelet registers.
    const { pause: pauseArchive, ...others } = Object.fromEntries(images);
    await this.importArchives(new Map([['pause', pauseArchive!]]));
    await this.startKubelet();
    await Promise.all([
      this.importArchives(new Map(Object.entries(others) as [ImageName, { reference: string; archive: string }][])),
      this.waitUntil(`node ${this.name} Ready`, deadline, () => this.isReady(), 'kubelet'),
    ]);
    if (this.options.kubeProxy) await this.startKubeProxy(deadline);
  }

  async crictl(args: string[]): Promise<string> {
    const { stdout } = await run(join(this.nodeBin, 'crictl'), ['--runtime-endpoint', this.criEndpoint, '--image-endpoint', this.criEndpoint, '--timeout', '20s', ...args], {
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout;
  }

  async importImages(names: ImageName[]): Promise<void> {
    await this.importArchives(await buildImages(names));
  }

  logTails(lines = 30): string {
    return logTails(this.processes.values(), lines);
  }

  async restartKubelet(): Promise<void> {
    if (!this.kubelet) throw new Error(`the kubelet of ${this.name} has not been started`);
    await this.processes.get('kubelet')?.stop();
    // Heartbeats are written in whole seconds: started on the next one, a heartbeat of that second or later is the new kubelet's.
    await sleep(1000 - (Date.now() % 1000));
    const started = Date.now();
    this.launchKubelet();
    const deadline = started + 120_000;
    const { healthz } = this.kubelet;
    await this.waitUntil('the restarted kubelet to answer /healthz', deadline, async () => (await httpStatus(healthz)) === 200, 'kubelet');
    // The Node may have stayed Ready throughout (the controller-manager waits 40 s before it
    // marks a silent node): the new kubelet's own report is what says it is back.
    await this.waitUntil(`node ${this.name} Ready, as the restarted kubelet reports it`, deadline, () => this.isReady(started), 'kubelet');
  }

  signalKubelet(sig: NodeJS.Signals): void {
    const kubelet = this.processes.get('kubelet');
    if (!kubelet?.running()) throw new Error(`the kubelet of ${this.name} is not running`);
    kubelet.signal(sig);
  }

  /** `keepLogs`: the directory keeps the processes' logs (after a failed start, for the error to point at). */
  stop(options: { keepLogs?: boolean } = {}): Promise<void> {
    this.stopping ??= this.stopAndClean(options.keepLogs ?? false);
    return this.stopping;
  }

  /** Synchronous last resort for process exit handlers. */
  killNow(): void {
    for (const name of ['kube-proxy', 'kubelet']) this.processes.get(name)?.killNow();
    removeSandboxesSync(join(this.nodeBin, 'crictl'), this.criEndpoint);
    this.processes.get('containerd')?.killNow();
    if (this.processes.has('kube-proxy')) removeKubeProxyRules();
    this.kubeProxyLock?.kill('SIGKILL');
    cleanUpNodeDirectory(this.dir);
    this.ports.release();
  }

  private async stopAndClean(keepLogs: boolean): Promise<void> {
    const stop = (name: string) => this.processes.get(name)?.stop();
    await Promise.all([stop('kube-proxy'), stop('kubelet')]);
    if (this.processes.has('containerd')) {
      // Containers outlive containerd: remove them (and their network, through CNI) first.
      await this.tryCrictl(['rmp', '--force', '--all']);
    }
    await stop('containerd');
    this.ports.release();
    if (this.processes.has('kube-proxy')) removeKubeProxyRules();
    this.kubeProxyLock?.kill('SIGKILL');
    cleanUpNodeDirectory(this.dir, keepLogs);
    this.forget();
  }

  private async tryCrictl(args: string[]): Promise<string | undefined> {
    try {
      return await this.crictl(args);
    } catch {
      return undefined;
    }
  }

  private launch(name: string, binary: string, args: string[], env: NodeJS.ProcessEnv = process.env): void {
    const pathEnv = `${this.nodeBin}:${env.PATH ?? '/usr/bin:/bin'}`;
    this.processes.set(name, new ManagedProcess(name, [binary, ...args], join(this.dir, `${name}.log`), { env: { ...env, PATH: pathEnv } }));
  }

  private async writeContainerdConfig(): Promise<void> {
    const dir = this.dir;
    // A hosts.toml per registry given, under config_path (containerd reads none without it).
    const registries = this.options.registries?.length ? `    [plugins.'io.containerd.cri.v1.images'.registry]\n      config_path = "${join(dir, 'certs.d')}"\n` : '';
    // Every path the node writes lies in its own directory; NRI (a fixed socket path) is off.
    const config = `version = 3
root = "${join(dir, 'containerd/root')}"
state = "${join(dir, 'containerd/state')}"

[grpc]
  address = "${join(dir, 'containerd.sock')}"

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "${join(dir, 'containerd/opt')}"
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "PAUSE_IMAGE"
${registries}  [plugins.'io.containerd.cri.v1.runtime']
    # This machine's root cannot lower oom_score_adj (no CAP_SYS_RESOURCE); without this every
    # sandbox fails in runc ("can't get final child's PID from pipe").
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "${join(this.nodeBin, 'runc')}"
          Root = "${join(dir, 'runc')}"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["${join(this.nodeBin, 'cni')}"]
      conf_dir = "${join(dir, 'cni')}"
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`;
    writeFileSync(join(dir, 'containerd.toml'), config);
    for (const { host, caFile } of this.options.registries ?? []) {
      mkdirSync(join(dir, 'certs.d', host), { recursive: true });
      writeFileSync(join(dir, 'certs.d', host, 'hosts.toml'), `server = "https://${host}"\n\n[host."https://${host}"]\n  capabilities = ["pull", "resolve"]\n  ca = "${caFile}"\n`);
    }
  }

  private async rewritePauseImage(reference: string): Promise<void> {
    const path = join(this.dir, 'containerd.toml');
    writeFileSync(path, readFileSync(path, 'utf8').replace('PAUSE_IMAGE', reference));
  }

  private writeCniConfig(): void {
    mkdirSync(join(this.dir, 'cni'), { recursive: true });
    const config = {
      cniVersion: '1.0.0',
      name: `st-${this.subnet}`,
      plugins: [
        {
          type: 'bridge',
          bridge: this.bridge,
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: `10.244.${this.subnet}.0/24` }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: join(this.dir, 'cni-ipam'),
          },
        },
      ],
    };
    writeFileSync(join(this.dir, 'cni', '10-bridge.conflist'), JSON.stringify(config, null, 2));
  }

  private async importArchives(images: Map<ImageName, { reference: string; archive: string }>): Promise<void> {
    const address = join(this.dir, 'containerd.sock');
    for (const [name, { reference, archive }] of images) {
      await run(join(this.nodeBin, 'ctr'), ['--address', address, '--namespace', 'k8s.io', 'images', 'import', archive], { maxBuffer: 16 * 1024 * 1024 });
      this.images[name] = reference;
    }
  }

  private async startKubelet(): Promise<void> {
    const kubeconfig = await this.cp.clientKubeconfig(`system:node:${this.name}`, ['system:nodes']);
    const port = await this.ports.take();
    const root = join(this.dir, 'kubelet');
    mkdirSync(root, { recursive: true });
    // JSON is YAML. What this host needs: cgroup v1 without systemd, no QoS cgroup tree, no
    // allocatable enforcement, eviction thresholds it cannot trip (it cannot read the root
    // filesystem's stats here). kubelet refuses a loopback node IP, so it serves `kubectl logs`
    // on this host's address, anonymously: the API server does not authenticate to it here.
    const nodeIp = hostAddress();
    const config = {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      failCgroupV1: false,
      cgroupDriver: 'cgroupfs',
      cgroupsPerQOS: false,
      enforceNodeAllocatable: [],
      localStorageCapacityIsolation: false,
      failSwapOn: false,
      containerRuntimeEndpoint: this.criEndpoint,
      address: nodeIp,
      port,
      // No healthz server of its own: its API port serves /healthz too, and a port not opened cannot be taken.
      healthzPort: 0,
      readOnlyPort: 0,
      authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
      authorization: { mode: 'AlwaysAllow' },
      evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '0%', 'imagefs.available': '0%', 'nodefs.inodesFree': '0%' },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      serializeImagePulls: false,
      podLogsDir: join(this.dir, 'pod-logs'),
      // Status changes reach the API server at once; the tests (and Jobs) wait on them.
      nodeStatusUpdateFrequency: '10s',
      syncFrequency: '10s',
      fileCheckFrequency: '10s',
      resolvConf: '/etc/resolv.conf',
    };
    writeFileSync(join(this.dir, 'kubelet.yaml'), JSON.stringify(config, null, 2));
    const labels = Object.entries(this.options.labels ?? {}).map(([key, value]) => `${key}=${value}`).join(',');
    const args = [
      '--config', join(this.dir, 'kubelet.yaml'),
      '--kubeconfig', kubeconfig,
      '--hostname-override', this.name,
      '--node-ip', nodeIp,
      '--root-dir', root,
      '--cert-dir', join(root, 'pki'),
      ...(labels ? ['--node-labels', labels] : []),
      ...(this.options.taints?.length ? ['--register-with-taints', this.options.taints.join(',')] : []),
      '--v', '1',
    ];
    this.kubelet = { args, healthz: `https://${nodeIp}:${port}/healthz` };
    this.launchKubelet();
  }

  private launchKubelet(): void {
    this.launch('kubelet', join(this.kubeBin, 'kubelet'), this.kubelet!.args);
  }

  private async startKubeProxy(deadline: number): Promise<void> {
    const kubeconfig = await this.cp.clientKubeconfig('system:kube-proxy', []);
    // The nftables mode is alpha before Kubernetes 1.31, behind a feature gate removed later.
    const { minor } = await kubernetesVersion(this.kubeBin);
    const metricsPort = await this.ports.take();
    this.launch('kube-proxy', join(this.kubeBin, 'kube-proxy'), [
      '--kubeconfig', kubeconfig,
      '--proxy-mode', 'nftables',
      ...(minor < 31 ? ['--feature-gates', 'NFTablesProxyMode=true'] : []),
      '--cluster-cidr', CLUSTER_CIDR,
      '--hostname-override', this.name,
      // Neither can be turned off from the command line.
      '--metrics-bind-address', `127.0.0.1:${metricsPort}`,
      '--healthz-bind-address', `127.0.0.1:${await this.ports.take()}`,
      // This host's conntrack table is the host's business.
      '--conntrack-max-per-core', '0',
      '--v', '1',
    ]);
    // Its metrics server answers /healthz at once: it has bound its ports (or it has exited, saying why).
    await this.waitUntil('kube-proxy to serve', deadline, async () => (await httpStatus(`http://127.0.0.1:${metricsPort}/healthz`)) === 200, 'kube-proxy');
  }

  /** `since`: a Date.now() value; the Ready condition must have been reported at that second or later. */
  private async isReady(since = 0): Promise<boolean> {
    const sinceSecond = Math.floor(since / 1000) * 1000;
    try {
      const node: V1Node = await this.cp.kubeConfig.makeApiClient(CoreV1Api).readNode({ name: this.name });
      return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True' && new Date(c.lastHeartbeatTime ?? 0).getTime() >= sinceSecond) ?? false;
    } catch {
      return false;
    }
  }

  private waitUntil(what: string, deadline: number, check: () => Promise<boolean>, waitingOn: string): Promise<void> {
    return waitWhileRunning(what, this.processes.values(), deadline, check, { waitingOn: this.processes.get(waitingOn) });
  }
}


/** A /24 of 10.244.0.0/16 for one node, leased by a directory naming the node's directory. */
function leaseSubnet(nodeDir: string): number {
  mkdirSync(LEASES_DIR, { recursive: true });
  for (let index = 1; index < 255; index++) {
    const lease = join(LEASES_DIR, `subnet-${index}`);
    try {
      mkdirSync(lease);
    } catch {
      continue;
    }
    writeFileSync(join(lease, 'node'), nodeDir);
    return index;
  }
  throw new Error(`no free pod subnet in ${CLUSTER_CIDR}: ${LEASES_DIR} holds 254 leases`);
}

function releaseSubnet(index: number): void {
  rmSync(join(LEASES_DIR, `subnet-${index}`), { recursive: true, force: true });
}

/** Removes every pod sandbox of a node's containerd (stopping containers and tearing down their network). */
function removeSandboxesSync(crictl: string, endpoint: string): void {
  try {
    execFileSync(crictl, ['--runtime-endpoint', endpoint, '--timeout', '20s', 'rmp', '--force', '--all'], { stdio: 'ignore', timeout: 60_000 });
  } catch {
    // containerd already gone: the directory clean-up below unmounts what is left.
  }
}

/** One kube-proxy at a time on this host, whichever test process or checkout runs it. */
const KUBE_PROXY_LOCK = '/run/lock/sidecar-terminator-kube-proxy.lock';

/**
 * An exclusive flock on `path`, held by a `flock` child process until it is killed or this
 * process dies (its stdin closes and `cat` ends), so a test killed mid-run never keeps the lock.
 */
function holdHostLock(path: string): Promise<ChildProcess> {
  const holder = spawn('flock', ['--exclusive', path, 'sh', '-c', 'echo locked; exec cat'], { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    holder.once('error', reject);
    holder.once('exit', (code) => reject(new Error(`flock ${path} ended with ${String(code)} before it held the lock`)));
    holder.stdout.once('data', () => resolve(holder));
  });
}

/** kube-proxy leaves its nftables tables behind when it stops; the host is shared with later nodes. */
function removeKubeProxyRules(): void {
  for (const family of ['ip', 'ip6']) {
    try {
      execFileSync('nft', ['delete', 'table', family, 'kube-proxy'], { stdio: 'ignore' });
    } catch {
      // not there
    }
  }
}

/** Unmounts what containerd and kubelet left under the directory, deletes the node's bridge, removes the directory (or all but its logs). */
function cleanUpNodeDirectory(dir: string, keepLogs = false): void {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((mountPoint): mountPoint is string => mountPoint !== undefined && (mountPoint === dir || mountPoint.startsWith(`${dir}/`)))
    .sort((a, b) => b.length - a.length);
  for (const mountPoint of mounts) {
    try {
      execFileSync('umount', ['-l', mountPoint], { stdio: 'ignore' });
    } catch {
      // already gone
    }
  }
  const subnetFile = join(dir, 'subnet');
  if (existsSync(subnetFile)) {
    const index = Number(readFileSync(subnetFile, 'utf8'));
    try {
      execFileSync('ip', ['link', 'delete', `st-cni${index}`], { stdio: 'ignore' });
    } catch {
      // no pod ever created the bridge
    }
    releaseSubnet(index);
  }
  if (keepLogs) keepOnlyLogs(dir);
  else rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}

/**
 * Nodes whose test process died without cleaning up (SIGKILL): their containers still run. Start
 * their containerd again just long enough to remove the sandboxes, then clean up as stop() would.
 */
function cleanStaleNodes(): void {
  for (const entry of readdirSync(tmpdir())) {
    if (!entry.startsWith('st-node-')) continue;
    const dir = join(tmpdir(), entry);
    let owner: number;
    try {
      owner = Number(readFileSync(join(dir, 'owner.pid'), 'utf8'));
    } catch {
      continue;
    }
    if (owner > 0 && processAlive(owner)) continue;
    const config = join(dir, 'containerd.toml');
    const socket = join(dir, 'containerd.sock');
    const binary = /BinaryName = "(.*)\/runc"/.exec(existsSync(config) ? readFileSync(config, 'utf8') : '')?.[1];
    if (binary && existsSync(join(binary, 'containerd'))) {
      const containerd = spawn(join(binary, 'containerd'), ['--config', config], { stdio: 'ignore', env: { ...process.env, PATH: `${binary}:${process.env.PATH}` } });
      for (let attempt = 0; attempt < 40 && !existsSync(socket); attempt++) execFileSync('sleep', ['0.25']);
      removeSandboxesSync(join(binary, 'crictl'), `unix://${socket}`);
      containerd.kill('SIGKILL');
    }
    cleanUpNodeDirectory(dir);
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
