// A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager
// on loopback, everything in a fresh temporary directory. etcd and kube-apiserver talk over Unix
// sockets in that directory; the API server's port is leased host-wide (test/support/net.ts), and
// a start that fails because some other program took it is tried once more on a new one. Faults
// are injected by signalling a component (SIGKILL, SIGSTOP then SIGCONT) and starting it again.
//
// No process can outlive the test process: each binary is started through
// `setpriv --pdeathsig KILL`, so the kernel kills it when Node dies, even on SIGKILL. On a
// normal exit or a SIGINT/SIGTERM/SIGHUP the temporary directories are removed as well.
import { execFile, execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type ClientRequest } from 'node:http';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { CONTAINER_USER_KEPT_SINCE, parseKubernetesVersion, type KubernetesVersion } from '../../src/policy/index.ts';
import { runCommand } from './command.ts';
import { ManagedProcess, buildScriptOutput, keepOnlyLogs, killOnExit, logTails, retryOnPortTaken, startFailure, waitWhileRunning } from './managed-process.ts';
import { PortLease } from './net.ts';

const run = promisify(execFile);

export interface ControlPlaneOptions {
  /** Directory holding etcd, kube-apiserver, kube-controller-manager and kubectl. Default: built (or found cached) by scripts/build-control-plane.sh. */
  binDir?: string;
  /** How long startup may take before it fails with the processes' log tails. Default 90 s. */
  startupTimeoutMs?: number;
  /**
   * Let pods on a real node reach the API server through the `kubernetes` Service, as in a real
   * cluster: kube-apiserver listens on every interface and advertises this host's first
   * non-loopback address (kube-proxy forwards the Service's ClusterIP there). Default: loopback only.
   */
  reachableFromPods?: boolean;
  /** Run kube-scheduler, for real nodes (the kubelet simulator binds its pods itself). Default false. */
  scheduler?: boolean;
  /** More kube-apiserver flags, e.g. a --runtime-config that turns an API off as an older release lacks it, or a feature gate turned off. */
  apiServerArgs?: string[];
  /** Where a second try on new ports is reported. Default: a line on stderr. */
  log?: (line: string) => void;
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface ControlPlane {
  serverUrl: string;
  /** Admin kubeconfig (a token of a system:masters user). */
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  binDir: string;
  /** The temporary directory holding data, credentials and the processes' logs (`*.log`). */
  dir: string;
  /** The cluster CA (it signs the API server's certificate and the client certificates the API server accepts). */
  caCertPath: string;
  /** The address the `kubernetes` Service forwards to (10.0.0.1 unless reachableFromPods). */
  advertiseAddress: string;
  /**
   * A kubeconfig for a client authenticated by a certificate the cluster CA signs, as kubelets and
   * kube-proxy are: `user` is the certificate's common name, `groups` its organizations.
   */
  clientKubeconfig(user: string, groups: string[]): Promise<string>;
  kubectl(args: string[], opts?: { input?: string; namespace?: string }): Promise<KubectlResult>;
  /** Creates a namespace (random name if none) and waits until its `default` ServiceAccount exists. */
  createNamespace(name?: string): Promise<string>;
  /** Stops every process and removes the temporary directory. Idempotent. */
  stop(): Promise<void>;
  /** Stops kube-apiserver and starts it again on the same port; etcd keeps the data. */
  restartApiServer(): Promise<void>;
  /** Stops kube-apiserver alone (an outage of the API); startApiServer brings it back on the same port. */
  stopApiServer(): Promise<void>;
  /** startComponent('kube-apiserver'). */
  startApiServer(): Promise<void>;
  /**
   * Sends `sig` to a component's process (a fault: SIGKILL, or SIGSTOP and then SIGCONT). Throws
   * when it does not run (kube-scheduler runs only with the `scheduler` option).
   */
  signal(component: ControlPlaneComponent, sig: NodeJS.Signals): void;
  /**
   * Starts a component that has exited (after a SIGKILL, or stopApiServer) again, with the same
   * flags, data and port; resolves once it serves: etcd once its /health answers on its socket
   * (and the API server's /readyz, when the API server runs), kube-apiserver at /readyz,
   * kube-controller-manager and kube-scheduler once the API server's /readyz answers (they serve
   * no port here). Throws when it still runs.
   */
  startComponent(component: ControlPlaneComponent): Promise<void>;
  /** Whether the component's process has not exited (one stopped by SIGSTOP still runs). */
  running(component: ControlPlaneComponent): boolean;
}

/** The processes of a control plane. */
export type ControlPlaneComponent = 'etcd' | 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler';

const serviceClusterIpRange = '10.0.0.0/24';
// The first address of the service range: non-loopback, as kube-apiserver requires, and never dialled.
const unreachableAdvertiseAddress = '10.0.0.1';
/** The `kubernetes` Service's ClusterIP: the first address of the service range. */
export const KUBERNETES_SERVICE_IP = '10.0.0.1';

/**
 * Starts a control plane; fails with a ComponentStartError naming the component that did not
 * start, whose log is kept (the rest of the directory is removed).
 */
export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const binDir = options.binDir ?? (await buildControlPlane());
  return retryOnPortTaken('control plane', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sidecar-terminator-cp-'));
    const cluster = new LocalCluster(binDir, dir, options.reachableFromPods ? hostAddress() : undefined, options.scheduler ?? false, options.apiServerArgs ?? []);
    try {
      await cluster.start(options.startupTimeoutMs ?? 90_000);
    } catch (err) {
      const logs = cluster.logTails();
      await cluster.stop({ keepLogs: true });
      throw startFailure('control plane', err, logs);
    }
    return cluster;
  }, options.log);
}

/** The bin directory the build script prints (at once when the binaries are cached). */
const buildControlPlane = () => buildScriptOutput('build-control-plane.sh');

/** The Kubernetes release the tests run (K8S_VERSION, else scripts/versions.sh's), as its kube-apiserver reports it. */
export async function kubernetesVersion(binDir?: string): Promise<KubernetesVersion> {
  const { stdout } = await run(join(binDir ?? (await buildControlPlane()), 'kube-apiserver'), ['--version']);
  const version = parseKubernetesVersion({ gitVersion: stdout.trim().split(' ').at(-1) });
  if (!version) throw new Error(`kube-apiserver --version printed no version: ${stdout}`);
  return version;
}

/** What a release's API server has, where the tests expect different things by version (docs/installation.md, "Kubernetes versions"). */
export const apiFeatures = (version: KubernetesVersion) => ({
  /** admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy, which the fence needs: 1.30+. */
  validatingAdmissionPolicy: version.minor >= 30,
  /** status.containerStatuses[].user kept (SupplementalGroupsPolicy beta, on by default): the add-on's own threshold. */
  containerUser: version.minor >= CONTAINER_USER_KEPT_SINCE,
  /** A container's own restartPolicy and restartPolicyRules (ContainerRestartRules, beta and on by default): 1.35+. */
  containerRestartRules: version.minor >= 35,
});

/**
 * etcd's sockets, in the cluster's directory, its working directory: a unix:// URL's host is the
 * socket's path relative to it, and etcd wants every advertised URL in host:port form.
 */
const ETCD_SOCKET = 'etcd.sock:0';
const ETCD_PEER_SOCKET = 'etcd-peer.sock:0';

class LocalCluster implements ControlPlane {
  /** Stops the exit handler from tearing this down once stop() has. */
  private forget: () => void = () => true;
  readonly binDir: string;
  readonly dir: string;
  readonly kubeconfigPath: string;
  readonly kubeConfig = new KubeConfig();
  readonly caCertPath: string;
  readonly advertiseAddress: string;
  serverUrl = '';
  /** The address kube-apiserver listens on: loopback, or every interface when pods must reach it. */
  private readonly bindAddress: string;
  private readonly adminToken = randomBytes(24).toString('hex');
  private readonly controllerManagerToken = randomBytes(24).toString('hex');
  /** The API server's port; kube-controller-manager and kube-scheduler serve none (--secure-port=0), etcd serves Unix sockets. */
  private readonly ports = new PortLease();
  private apiServerPort: number | undefined;
  private readonly processes = new Map<string, ManagedProcess>();
  private stopping: Promise<void> | undefined;

  private readonly withScheduler: boolean;
  private readonly extraApiServerArgs: string[];

  constructor(binDir: string, dir: string, podReachableAddress: string | undefined, withScheduler: boolean, extraApiServerArgs: string[]) {
    this.withScheduler = withScheduler;
    this.extraApiServerArgs = extraApiServerArgs;
    this.binDir = binDir;
    this.dir = dir;
    this.kubeconfigPath = join(dir, 'admin.kubeconfig');
    this.caCertPath = join(dir, 'ca.crt');
    this.advertiseAddress = podReachableAddress ?? unreachableAdvertiseAddress;
    this.bindAddress = podReachableAddress ? '0.0.0.0' : '127.0.0.1';
  }

  async start(timeoutMs: number): Promise<void> {
    this.forget = killOnExit(this);
    const deadline = Date.now() + timeoutMs;
    this.apiServerPort = await this.ports.take();
    this.serverUrl = `https://127.0.0.1:${this.apiServerPort}`;
    await this.writeCredentials();
    this.kubeConfig.loadFromFile(this.kubeconfigPath);

    // kube-apiserver retries etcd until it answers, so both start at once.
    this.launch('etcd');
    this.launch('kube-apiserver');
    await this.waitForApiServerReady(deadline);
    // Started only now: kube-controller-manager gives up when the API server stays unhealthy too long.
    this.launch('kube-controller-manager');
    if (this.withScheduler) this.launch('kube-scheduler');
    await this.waitForServiceAccount('default', deadline);
  }

  async kubectl(args: string[], opts: { input?: string; namespace?: string } = {}): Promise<KubectlResult> {
    const fullArgs = ['--kubeconfig', this.kubeconfigPath, ...(opts.namespace ? ['--namespace', opts.namespace] : []), ...args];
    const { code, stdout, stderr } = await runCommand(join(this.binDir, 'kubectl'), fullArgs, { input: opts.input });
    return { code, stdout, stderr: withoutVersionSkewWarning(stderr) };
  }

  async createNamespace(name = `test-${randomBytes(4).toString('hex')}`): Promise<string> {
    await this.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
    await this.waitForServiceAccount(name, Date.now() + 60_000);
    return name;
  }

  async clientKubeconfig(user: string, groups: string[]): Promise<string> {
    const name = `client-${randomBytes(4).toString('hex')}`;
    const subject = `/CN=${user}${groups.map((group) => `/O=${group}`).join('')}`;
    await run('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-sha256',
      '-CA', this.path('ca.crt'), '-CAkey', this.path('ca.key'),
      '-keyout', this.path(`${name}.key`), '-out', this.path(`${name}.crt`), '-subj', subject,
      '-addext', 'basicConstraints=critical,CA:FALSE', '-addext', 'extendedKeyUsage=clientAuth',
    ]);
    const path = this.path(`${name}.kubeconfig`);
    writeFileSync(path, this.kubeconfig(user, { 'client-certificate': this.path(`${name}.crt`), 'client-key': this.path(`${name}.key`) }));
    return path;
  }

  async restartApiServer(): Promise<void> {
    await this.stopApiServer();
    await this.startApiServer();
  }

  async stopApiServer(): Promise<void> {
    const apiServer = this.processes.get('kube-apiserver');
    if (!apiServer || apiServer.exitStatus !== undefined) throw new Error('kube-apiserver is not running');
    await apiServer.stop();
  }

  startApiServer(): Promise<void> {
    return this.startComponent('kube-apiserver');
  }

  signal(component: ControlPlaneComponent, sig: NodeJS.Signals): void {
    const managed = this.processes.get(component);
    if (!managed?.running()) throw new Error(`${component} is not running`);
    managed.signal(sig);
  }

  running(component: ControlPlaneComponent): boolean {
    return this.processes.get(component)?.running() ?? false;
  }

  async startComponent(component: ControlPlaneComponent): Promise<void> {
    if (component === 'kube-scheduler' && !this.withScheduler) throw new Error('this control plane runs no kube-scheduler (startControlPlane\'s scheduler option)');
    // The exit of a process just SIGKILLed reaches the event loop a moment later.
    const previous = this.processes.get(component);
    if (previous && !(await previous.waitExit(5000))) throw new Error(`${component} is running`);
    this.launch(component);
    const deadline = Date.now() + 60_000;
    if (component === 'etcd') {
      await this.waitUntil('etcd /health', deadline, () => unixGetOk(this.path(ETCD_SOCKET), '/health'), 'etcd', ['etcd']);
      // Without an API server to reconnect, etcd's own health is all there is to wait for.
      if (!this.running('kube-apiserver')) return;
    }
    // kube-controller-manager and kube-scheduler serve nothing to probe; they need the API server.
    await this.waitForApiServerReady(deadline, [component]);
  }

  /** `keepLogs`: the directory keeps the processes' logs (after a failed start, for the error to point at). */
  stop(options: { keepLogs?: boolean } = {}): Promise<void> {
    this.stopping ??= this.stopAndClean(options.keepLogs ?? false);
    return this.stopping;
  }

  /** The last lines of every process's log, to explain a failed startup. */
  logTails(lines = 30): string {
    return logTails(this.processes.values(), lines);
  }

  /** Synchronous last resort for process exit handlers. */
  killNow(): void {
    for (const managed of this.processes.values()) managed.killNow();
    rmSync(this.dir, { recursive: true, force: true, maxRetries: 3 });
    this.ports.release();
  }

  private async stopAndClean(keepLogs: boolean): Promise<void> {
    const byName = (name: string) => this.processes.get(name)?.stop();
    await Promise.all([byName('kube-scheduler'), byName('kube-controller-manager'), byName('kube-apiserver')]);
    await byName('etcd');
    this.ports.release();
    if (keepLogs) keepOnlyLogs(this.dir);
    else rmSync(this.dir, { recursive: true, force: true, maxRetries: 3 });
    this.forget();
  }

  /** Starts a component's process, with its flags; a process of the same name that ran before is forgotten, its log appended to. */
  private launch(component: ControlPlaneComponent): void {
    // etcd's socket addresses are relative to its working directory.
    const options = component === 'etcd' ? { cwd: this.dir } : {};
    this.processes.set(component, new ManagedProcess(component, [join(this.binDir, component), ...this.argsOf(component)], join(this.dir, `${component}.log`), options));
  }

  private argsOf(component: ControlPlaneComponent): string[] {
    switch (component) {
      case 'etcd': return this.etcdArgs();
      case 'kube-apiserver': return this.apiServerArgs();
      case 'kube-controller-manager': return this.controllerManagerArgs();
      case 'kube-scheduler': return this.schedulerArgs();
    }
  }

  private path(file: string): string {
    return join(this.dir, file);
  }

  private async writeCredentials(): Promise<void> {
    // The service-account token signing key pair (ECDSA: fast to generate, accepted by both binaries).
    const serviceAccountKey = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    writeFileSync(this.path('sa.key'), serviceAccountKey.privateKey.export({ type: 'pkcs8', format: 'pem' }));
    writeFileSync(this.path('sa.pub'), serviceAccountKey.publicKey.export({ type: 'spki', format: 'pem' }));
    await this.writeServingCertificate();
    writeFileSync(
      this.path('tokens.csv'),
      `${this.adminToken},admin,admin,system:masters\n` +
        `${this.controllerManagerToken},system:kube-controller-manager,kcm,system:masters\n`,
    );
    writeFileSync(this.kubeconfigPath, this.kubeconfig('admin', { token: this.adminToken }));
    writeFileSync(this.path('controller-manager.kubeconfig'), this.kubeconfig('kube-controller-manager', { token: this.controllerManagerToken }));
  }

  /** A CA and the API server's certificate signed by it (Node's crypto cannot issue certificates). */
  private async writeServingCertificate(): Promise<void> {
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-sha256'];
    await run('openssl', [
      'req', '-x509', ...ec, '-keyout', this.path('ca.key'), '-out', this.path('ca.crt'),
      '-subj', '/CN=sidecar-terminator-test-ca',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    await run('openssl', [
      'req', '-x509', ...ec, '-CA', this.path('ca.crt'), '-CAkey', this.path('ca.key'),
      '-keyout', this.path('apiserver.key'), '-out', this.path('apiserver.crt'), '-subj', '/CN=kube-apiserver',
      '-addext', `subjectAltName=${[...new Set(['127.0.0.1', KUBERNETES_SERVICE_IP, this.advertiseAddress])].map((ip) => `IP:${ip}`).join(',')},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc`,
      '-addext', 'basicConstraints=critical,CA:FALSE', '-addext', 'extendedKeyUsage=serverAuth',
    ]);
  }

  /** kubeconfig files are YAML, and JSON is YAML. */
  private kubeconfig(user: string, credentials: Record<string, string>): string {
    return JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'local', cluster: { server: this.serverUrl, 'certificate-authority': this.path('ca.crt') } }],
      users: [{ name: user, user: credentials }],
      contexts: [{ name: 'local', context: { cluster: 'local', user } }],
      'current-context': 'local',
    }, null, 2);
  }

  private etcdArgs(): string[] {
    const client = `unix://${ETCD_SOCKET}`;
    const peer = `unix://${ETCD_PEER_SOCKET}`;
    return [
      '--name', 'default', '--data-dir', this.path('etcd'),
      '--listen-client-urls', client, '--advertise-client-urls', client,
      '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer, '--initial-cluster', `default=${peer}`,
      // Test data need not survive a power cut; skipping fsync makes every write much faster.
      '--unsafe-no-fsync',
      '--log-level', 'warn',
    ];
  }

  private apiServerArgs(): string[] {
    return [
      '--etcd-servers', `unix://${this.path(ETCD_SOCKET)}`,
      '--bind-address', this.bindAddress, '--secure-port', String(this.requireApiServerPort()), '--advertise-address', this.advertiseAddress,
      '--service-cluster-ip-range', serviceClusterIpRange,
      '--tls-cert-file', this.path('apiserver.crt'), '--tls-private-key-file', this.path('apiserver.key'),
      '--cert-dir', this.path('apiserver-certs'),
      // Kubelets authenticate with certificates the cluster CA signs and are authorized as nodes.
      '--client-ca-file', this.path('ca.crt'),
      '--authorization-mode', 'Node,RBAC', '--token-auth-file', this.path('tokens.csv'),
      // A real node registers by a name no DNS resolves: logs and exec reach its kubelet by its IP.
      '--kubelet-preferred-address-types', 'InternalIP,Hostname',
      '--service-account-issuer', 'https://kubernetes.default.svc.cluster.local',
      '--service-account-key-file', this.path('sa.pub'), '--service-account-signing-key-file', this.path('sa.key'),
      '--profiling=false',
      ...this.extraApiServerArgs,
    ];
  }

  // Neither serves HTTPS (--secure-port=0): nothing here reads their health or metrics, and a port not opened cannot be taken.
  private controllerManagerArgs(): string[] {
    return [
      '--kubeconfig', this.path('controller-manager.kubeconfig'),
      '--controllers=*', '--leader-elect=false',
      '--service-account-private-key-file', this.path('sa.key'), '--root-ca-file', this.path('ca.crt'),
      '--secure-port=0',
      '--profiling=false',
    ];
  }

  private schedulerArgs(): string[] {
    return [
      '--kubeconfig', this.path('controller-manager.kubeconfig'),
      '--leader-elect=false',
      '--secure-port=0',
      '--profiling=false',
    ];
  }

  private requireApiServerPort(): number {
    if (this.apiServerPort === undefined) throw new Error('the API server port is leased in start()');
    return this.apiServerPort;
  }

  /** `alsoWatched`: components besides etcd and kube-apiserver whose exit fails the wait at once (default: every process). */
  private async waitForApiServerReady(deadline: number, alsoWatched?: ControlPlaneComponent[]): Promise<void> {
    const ca = readFileSync(this.path('ca.crt'));
    const watched = alsoWatched && [...new Set<ControlPlaneComponent>(['etcd', 'kube-apiserver', ...alsoWatched])];
    await this.waitUntil('kube-apiserver /readyz', deadline, () => httpsGetOk(this.serverUrl + '/readyz', ca, this.adminToken), 'kube-apiserver', watched);
  }

  /** The `default` ServiceAccount is created by the controller-manager: its arrival shows it works. */
  private async waitForServiceAccount(namespace: string, deadline: number): Promise<void> {
    const core = this.kubeConfig.makeApiClient(CoreV1Api);
    await this.waitUntil(`ServiceAccount ${namespace}/default`, deadline, async () => {
      try {
        await core.readNamespacedServiceAccount({ name: 'default', namespace });
        return true;
      } catch {
        return false;
      }
    }, 'kube-controller-manager');
  }

  /** `watched`: the components whose exit fails the wait at once (default: every process). */
  private waitUntil(what: string, deadline: number, check: () => Promise<boolean>, waitingOn: string, watched?: ControlPlaneComponent[]): Promise<void> {
    const processes = watched ? watched.flatMap((name) => this.processes.get(name) ?? []) : this.processes.values();
    return waitWhileRunning(what, processes, deadline, check, { intervalMs: 100, waitingOn: this.processes.get(waitingOn) });
  }
}


/** This host's first non-loopback IPv4 address (the source address of its default route). */
export function hostAddress(): string {
  const routes = execFileSync('ip', ['-4', '-o', 'route', 'get', '1.1.1.1'], { encoding: 'utf8' });
  const address = /\bsrc (\d+\.\d+\.\d+\.\d+)/.exec(routes)?.[1];
  if (!address) throw new Error(`no non-loopback IPv4 address on this host to advertise to pods (ip route get: ${routes.trim()})`);
  return address;
}

function httpsGetOk(url: string, ca: Buffer, token: string): Promise<boolean> {
  return answersOk(request(url, { ca, headers: { authorization: `Bearer ${token}` }, timeout: 2000 }));
}

/** Whether a GET of `path` over the Unix socket at `socketPath` answers 200 (etcd serves HTTP on its client socket too). */
function unixGetOk(socketPath: string, path: string): Promise<boolean> {
  return answersOk(httpRequest({ socketPath, path, timeout: 2000 }));
}

/** Sends `req` (with a timeout set); whether it is answered 200. */
function answersOk(req: ClientRequest): Promise<boolean> {
  return new Promise((resolveOk) => {
    req.on('response', (res) => {
      res.resume();
      resolveOk(res.statusCode === 200);
    });
    req.on('error', () => resolveOk(false));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

function withoutVersionSkewWarning(stderr: string): string {
  return stderr
    .split('\n')
    .filter((line) => !/version difference between client .* and server/i.test(line))
    .join('\n');
}
