// The local demo: a real control plane, two real nodes (kubelet, containerd, runc: a normal one and
// one registered as a virtual kubelet), and `sidecar-terminator serve` registered with the API
// server. Where the machine cannot run a real node (not root, no cgroups), the kubelet simulator
// plays both nodes instead, and says so. `make dev` runs it (scripts/dev.ts -> runDev) and
// test/e2e/examples.test.ts follows "Try it" of docs/getting-started.md against the same
// startDemo(), so what the page promises is what a user gets.
import { copyFileSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startControlPlane, type ControlPlane } from './control-plane.ts';
import { KubeletSimulator } from './kubelet-simulator.ts';
import { ComponentStartError } from './managed-process.ts';
import { waitFor } from './wait.ts';
import { realNodeUnavailable, startRealNode } from './real-node.ts';
import { registeringWebhooks, startServe, type ServeProcess } from './serve-process.ts';
import { repoRoot } from './repo.ts';


/** Simulated main containers (those without a sidecar marker) exit 0 this long after they start. */
export const DEMO_MAIN_EXIT_AFTER_MS = 5000;

/** The demo's nodes: a normal one, and one registered as a virtual kubelet (label and taint). */
export const DEMO_NODES = { normal: 'node-1', virtual: 'virtual-node-1' } as const;

export interface DemoOptions {
  /** Where serve keeps its CA and serving certificate (--cert-dir). */
  certDir: string;
  /** Where the kubelet simulator's complaints go. Default: stderr. */
  simulatorLog?: (message: string) => void;
  /** Progress messages during startup (a second try on new ports among them). */
  progress?: (message: string) => void;
}

/** Who runs the pods: real kubelets, or the simulator (with the reason a real node cannot run here). */
export type DemoNodes = { kind: 'real' } | { kind: 'simulated'; reason: string };

export interface Demo {
  cp: ControlPlane;
  nodes: DemoNodes;
  serve: ServeProcess;
  /** The kubectl built with the control plane (same version as the API server). */
  kubectlPath: string;
  /** The kill mechanism the watcher chose (signal: there is no OpenKruise in the demo). */
  killMechanism: string;
  /** Stops serve, the simulator and the control plane (which removes its directory). Idempotent. */
  stop(): Promise<void>;
}

/** The serve flags of the demo, given serve's port. */
export const demoServeArgs = (kubeconfigPath: string, certDir: string) => (port: number) => [
  '--kubeconfig', kubeconfigPath,
  '--cert-dir', certDir,
  // Fail rather than Ignore: a misconfigured Job is never admitted just because serve is slow.
  ...registeringWebhooks(port, 'Fail'),
];

export async function startDemo(options: DemoOptions): Promise<Demo> {
  const progress = options.progress ?? (() => {});
  const stops: Array<() => Promise<unknown>> = [];
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      for (const each of stops.reverse()) await each().catch(() => {});
    })());
  try {
    const unavailable = realNodeUnavailable();
    const nodes: DemoNodes = unavailable === undefined ? { kind: 'real' } : { kind: 'simulated', reason: unavailable };
    progress(`starting etcd, kube-apiserver, kube-controller-manager${nodes.kind === 'real' ? ' and kube-scheduler' : ''}`);
    const cp = await startControlPlane({ scheduler: nodes.kind === 'real', log: progress });
    stops.push(() => cp.stop());
    if (nodes.kind === 'real') {
      progress(`starting the nodes ${DEMO_NODES.normal} and ${DEMO_NODES.virtual}: kubelet, containerd, runc (built once from the Go module proxy)`);
      const started = await Promise.all([
        // Each node also holds the images the watcher runs in pods (startRealNode's podImages).
        startRealNode(cp, { name: DEMO_NODES.normal, images: ['busybox'], log: progress }),
        startRealNode(cp, {
          name: DEMO_NODES.virtual,
          labels: { type: 'virtual-kubelet' },
          taints: ['virtual-kubelet.io/provider=demo:NoSchedule'],
          images: ['busybox'],
          log: progress,
        }),
      ]);
      for (const node of started) stops.push(() => node.stop());
    } else {
      progress(`no real node here (${nodes.reason}): the kubelet simulator plays the nodes sim-node and sim-virtual-node`);
      const sim = new KubeletSimulator(cp.kubeConfig, {
        defaultMainExitAfterMs: DEMO_MAIN_EXIT_AFTER_MS,
        ...(options.simulatorLog ? { log: options.simulatorLog } : {}),
      });
      await sim.start();
      stops.push(() => sim.stop());
    }
    progress('starting sidecar-terminator serve');
    const serve = await startServe(demoServeArgs(cp.kubeconfigPath, options.certDir), { log: progress });
    stops.push(() => serve.stop());
    const started = await waitFor('the watcher to start', () => serve.logs().find((line) => line.msg === 'watcher starting'));
    return { cp, nodes, serve, kubectlPath: join(cp.binDir, 'kubectl'), killMechanism: String(started.killMechanism), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Where `make dev` publishes the kubeconfig and a kubectl link: stable paths across runs. */
export function devDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SIDECAR_TERMINATOR_DEV_DIR) return resolve(env.SIDECAR_TERMINATOR_DEV_DIR);
  return join(env.SIDECAR_TERMINATOR_CACHE ?? join(homedir(), '.cache/sidecar-terminator'), 'dev');
}

interface Published {
  kubeconfig: string;
  binDir: string;
  envFile: string;
  remove(): void;
}

/** Copies the demo's kubeconfig to `dir`, links the control plane's kubectl into dir/bin, writes dir/env.sh. */
function publish(demo: Demo, dir: string): Published {
  const binDir = join(dir, 'bin');
  mkdirSync(binDir, { recursive: true });
  const kubeconfig = join(dir, 'kubeconfig');
  copyFileSync(demo.cp.kubeconfigPath, kubeconfig);
  const kubectl = join(binDir, 'kubectl');
  rmSync(kubectl, { force: true });
  symlinkSync(demo.kubectlPath, kubectl);
  const envFile = join(dir, 'env.sh');
  writeFileSync(envFile, `# sidecar-terminator demo (make dev)\nexport KUBECONFIG=${kubeconfig}\nexport PATH=${binDir}:$PATH\n`);
  return {
    kubeconfig,
    binDir,
    envFile,
    // The kubectl link stays (it points into the cache); the credentials of a gone cluster do not.
    remove: () => {
      rmSync(kubeconfig, { force: true });
      rmSync(envFile, { force: true });
    },
  };
}

/** `make dev`: starts the demo, prints how to use it, shows serve's logs, stops on Ctrl-C. */
export async function runDev(args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let certDir = join(repoRoot, 'certs');
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    if (arg === '--cert-dir' && args[index + 1] !== undefined) certDir = resolve(args[++index]!);
    else if (arg.startsWith('--cert-dir=')) certDir = resolve(arg.slice('--cert-dir='.length));
    else {
      process.stderr.write(`usage: node scripts/dev.ts [--cert-dir DIR]\n(unknown argument ${JSON.stringify(arg)})\n`);
      return 2;
    }
  }
  const started = Date.now();
  const say = (text: string) => process.stdout.write(`${text}\n`);
  // Once stopping, the simulator's complaints about the vanishing API server are noise.
  let stopping = false;
  let demo: Demo;
  try {
    demo = await startDemo({
      certDir,
      progress: (message) => say(`[dev] ${message}`),
      simulatorLog: (message) => {
        if (!stopping) say(`[kubelet-simulator] ${message}`);
      },
    });
  } catch (error) {
    // startDemo has stopped what it started; the failed component's log is kept where this says.
    if (!(error instanceof ComponentStartError)) say(String((error as Error)?.stack ?? error));
    say(`[dev] ${startFailureLine(error)}`);
    return 1;
  }
  const published = publish(demo, devDir(env));
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  const examples = readdirSync(join(repoRoot, 'examples')).filter((file) => file.endsWith('.yaml')).sort();
  say(`
sidecar-terminator demo is up (${seconds} s)
  API server   ${demo.cp.serverUrl}  (etcd, kube-apiserver, kube-controller-manager; logs: ${demo.cp.dir}/*.log)
  nodes        ${describeNodes(demo.nodes)}
  webhook      ${demo.serve.url}  (registered with the API server; CA and certificate in ${displayPath(certDir)})
  watcher      kill mechanism: ${demo.killMechanism}
  kubeconfig   ${published.kubeconfig}
  kubectl      ${demo.kubectlPath}

In another terminal, from ${repoRoot}:
  export KUBECONFIG=${published.kubeconfig} PATH=${published.binDir}:$PATH
  kubectl get nodes
${examples.map((file) => `  kubectl apply -f examples/${file}`).join('\n')}
  kubectl get jobs,pods
(docs/getting-started.md says what each example does and what to expect.)

Ctrl-C stops everything and deletes the cluster. serve's logs follow.
`);

  const stopRequested = new Promise<NodeJS.Signals>((resolveSignal) => {
    const onSignal = (signal: NodeJS.Signals) => {
      stopping = true;
      resolveSignal(signal);
    };
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, onSignal);
  });
  let shown = 0;
  const showLogs = () => {
    const output = demo.serve.output();
    const end = output.lastIndexOf('\n') + 1;
    for (const line of output.slice(shown, end).split('\n')) if (line !== '') say(formatLogLine(line));
    shown = Math.max(shown, end);
  };
  let done = false;
  const serveExited = demo.serve.exited.then((exit) => exit);
  const signal = await Promise.race([
    stopRequested,
    serveExited.then((exit) => `serve exited (${JSON.stringify(exit)})`),
    (async () => {
      while (!done) {
        showLogs();
        await sleep(250);
      }
      return 'never';
    })(),
  ]);
  done = true;
  stopping = true;
  showLogs();
  say(`\n[dev] ${signal}: stopping serve, the nodes and the control plane`);
  await demo.stop();
  published.remove();
  say('[dev] stopped; the cluster is gone');
  return signal === 'SIGINT' || signal === 'SIGTERM' || signal === 'SIGHUP' ? 0 : 1;
}

/** The closing line of a `make dev` that did not come up: the component, the cause, what to do, where its log is. */
export function startFailureLine(error: unknown): string {
  if (error instanceof ComponentStartError) return error.message;
  const message = String((error as Error)?.message ?? error).split('\n')[0];
  return `the demo did not start: ${message}. What to do: run make dev again; if it fails the same way, the error above names what failed`;
}

function describeNodes(nodes: DemoNodes): string {
  if (nodes.kind === 'real') {
    return `${DEMO_NODES.normal} (normal), ${DEMO_NODES.virtual} (labelled and tainted as a virtual kubelet):
               real kubelets with containerd and runc; the examples' containers really run`;
  }
  return `sim-node (normal), sim-virtual-node (virtual-kubelet), played by the kubelet simulator
               (${nodes.reason}): main containers exit 0 ${DEMO_MAIN_EXIT_AFTER_MS / 1000} s after they start`;
}

/** Relative to the working directory when inside it. */
function displayPath(path: string): string {
  const relativePath = relative(process.cwd(), path);
  return relativePath === '' ? '.' : relativePath.startsWith('..') ? path : relativePath;
}

const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'uid', 'reqId', 'v']);
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

const text = (value: unknown): string => (value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value));

/** One of serve's JSON log lines, made readable: `12:00:01 INFO admission decision kind=Job result=denied ...`. */
export function formatLogLine(line: string): string {
  let entry: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return line;
    entry = parsed as Record<string, unknown>;
  } catch {
    return line;
  }
  const time = typeof entry.time === 'number' ? new Date(entry.time).toISOString().slice(11, 19) : '';
  const level = LEVELS[Number(entry.level)] ?? text(entry.level);
  const fields = Object.entries(entry)
    .filter(([key, value]) => !HIDDEN.has(key) && value !== undefined)
    .map(([key, value]) => `${key}=${typeof value === 'string' && !/\s/.test(value) ? value : JSON.stringify(value)}`);
  return [time, level.padEnd(5), text(entry.msg), ...fields].filter((part) => part !== '').join(' ');
}
