// The faults of a robustness run, one at a time: each is injected, then healed as the cluster or
// an operator would heal it (a killed process started again, a stopped one continued, a path
// restored), and resolves once what it broke is back. The run records each one's window, from
// injection to healed, for the ledger and the report. The schedule is random but seeded.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseYaml } from 'yaml';
import { SERVE_FLAGS } from '../../src/config.ts';
import { TLS_SECRET_KEYS } from '../../src/policy/index.ts';
import type { ControlPlane } from '../../test/support/control-plane.ts';
import { startKruise, type Kruise } from '../../test/support/kruise.ts';
import type { RealNode } from '../../test/support/real-node.ts';
import { servedCertificate } from '../../test/support/serve-process.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { AddOn } from './addon.ts';
import type { FaultWindow } from './ledger.ts';

export interface FaultTarget {
  cp: ControlPlane;
  node: RealNode;
  addon: AddOn;
  /** OpenKruise while installed. */
  kruise: Kruise | undefined;
  /** Whether kruise-daemon serves the real node (Kruise installed without one: a node pool its DaemonSet does not tolerate). */
  kruiseDaemon: boolean;
  log(line: string): void;
}

export interface Fault {
  kind: string;
  weight: number;
  /** Whether it can be injected now (a daemon to kill needs Kruise installed). */
  possible?(target: FaultTarget): boolean;
  /** Injects the fault and heals it; `draw` picks its length. Resolves once healed, saying what it did. */
  run(target: FaultTarget, draw: () => number): Promise<string>;
}

const between = (draw: () => number, minS: number, maxS: number) => Math.round((minS + (maxS - minS) * draw()) * 1000);

/** A process stopped (SIGSTOP) for a while, then continued: it misses its deadlines, then wakes as if nothing happened. */
async function pause(pid: number, ms: number): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  try {
    await sleep(ms);
  } finally {
    process.kill(pid, 'SIGCONT');
  }
}

/** Until some watcher replica leads again. */
const aLeader = (target: FaultTarget) => waitFor('a watcher replica to lead', async () => (await target.addon.leader(target.cp.kubeConfig).catch(() => undefined)) !== undefined, { timeoutMs: 120_000, intervalMs: 250 });

async function theLeader(target: FaultTarget) {
  return waitFor('the leading watcher replica', () => target.addon.leader(target.cp.kubeConfig).catch(() => undefined), { timeoutMs: 60_000, intervalMs: 250 });
}

const CONTROL_PLANE = ['etcd', 'kube-apiserver'] as const;

/** A running webhook replica, picked by `draw`. */
function aWebhook(target: FaultTarget, draw: () => number) {
  const running = target.addon.webhooks.filter((replica) => replica.process.running());
  if (running.length === 0) throw new Error('no webhook replica runs');
  return running[Math.floor(draw() * running.length)]!;
}

export const FAULTS: Fault[] = [
  {
    kind: 'watcher-leader-sigkill', weight: 3,
    async run(target, draw) {
      const leader = await theLeader(target);
      leader.expectedExit = true;
      process.kill(leader.process.pid, 'SIGKILL');
      await leader.process.exited;
      await target.addon.removeWatcher(leader);
      // The ReplicaSet's replacement, after the kubelet notices.
      await sleep(between(draw, 1, 5));
      const replacement = await target.addon.addWatcher();
      await aLeader(target);
      return `${leader.user} killed; ${replacement.user} started`;
    },
  },
  {
    kind: 'watcher-leader-sigstop', weight: 3,
    async run(target, draw) {
      const leader = await theLeader(target);
      // From under the renew deadline to four lease durations: the standby takes over in the longer ones.
      const ms = between(draw, 2, 24);
      await pause(leader.process.pid, ms);
      await aLeader(target);
      return `${leader.user} stopped for ${ms} ms`;
    },
  },
  {
    kind: 'leader-blackhole', weight: 3,
    async run(target, draw) {
      const leader = await theLeader(target);
      const ms = between(draw, 3, 30);
      leader.path.blackhole();
      try {
        await sleep(ms);
      } finally {
        leader.path.heal();
      }
      await aLeader(target);
      return `${leader.user}'s path to the API server black-holed for ${ms} ms`;
    },
  },
  {
    kind: 'webhook-replica-sigkill', weight: 2,
    async run(target, draw) {
      const victim = aWebhook(target, draw);
      victim.expectedExit = true;
      process.kill(victim.process.pid, 'SIGKILL');
      // The endpoint goes when its readiness probe has failed (the chart: every 5 s).
      await sleep(between(draw, 1, 10));
      target.addon.removeWebhook(victim);
      const replacement = await target.addon.addWebhook();
      return `${victim.user} killed; ${replacement.user} started`;
    },
  },
  {
    kind: 'webhook-replica-sigstop', weight: 2,
    async run(target, draw) {
      const victim = aWebhook(target, draw);
      const ms = between(draw, 2, 15);
      await pause(victim.process.pid, ms);
      return `${victim.user} stopped for ${ms} ms`;
    },
  },
  ...CONTROL_PLANE.flatMap((component): Fault[] => [
    {
      kind: `${component}-sigkill`, weight: 2,
      async run(target, draw) {
        target.cp.signal(component, 'SIGKILL');
        const ms = between(draw, 1, 10);
        await sleep(ms);
        await target.cp.startComponent(component);
        return `${component} killed, started again ${ms} ms later`;
      },
    },
    {
      kind: `${component}-sigstop`, weight: 2,
      async run(target, draw) {
        const ms = between(draw, 2, 20);
        target.cp.signal(component, 'SIGSTOP');
        try {
          await sleep(ms);
        } finally {
          target.cp.signal(component, 'SIGCONT');
        }
        await waitFor('the API server to answer', async () => (await target.cp.kubectl(['get', '--raw', '/readyz'])).code === 0, { timeoutMs: 120_000, intervalMs: 250 });
        return `${component} stopped for ${ms} ms`;
      },
    },
  ]),
  {
    kind: 'kubelet-restart', weight: 2,
    async run(target) {
      await target.node.restartKubelet();
      return `${target.node.name}'s kubelet restarted`;
    },
  },
  {
    kind: 'kruise-install', weight: 1,
    possible: (target) => target.kruise === undefined,
    async run(target) {
      target.kruise = await startKruise(target.cp, { nodes: [target.node] });
      target.kruiseDaemon = true;
      return `OpenKruise's manager, and kruise-daemon on ${target.node.name}`;
    },
  },
  {
    // The manager alone: its ContainerRecreateRequests for the real node complete without a kill.
    kind: 'kruise-install-without-daemon', weight: 1,
    possible: (target) => target.kruise === undefined,
    async run(target) {
      target.kruise = await startKruise(target.cp, { nodes: [] });
      target.kruiseDaemon = false;
      return `OpenKruise's manager, no kruise-daemon on ${target.node.name}`;
    },
  },
  {
    kind: 'kruise-uninstall', weight: 1,
    possible: (target) => target.kruise !== undefined,
    async run(target) {
      await target.kruise!.uninstall();
      target.kruise = undefined;
      return 'OpenKruise removed (its CRDs stay, as Helm leaves them)';
    },
  },
  {
    kind: 'kruise-daemon-kill', weight: 1,
    possible: (target) => target.kruise !== undefined && target.kruiseDaemon,
    async run(target, draw) {
      target.kruise!.killDaemon(target.node.name);
      const ms = between(draw, 5, 60);
      await sleep(ms);
      await target.kruise!.restartDaemon(target.node.name);
      return `kruise-daemon on ${target.node.name} killed, started again ${ms} ms later`;
    },
  },
  {
    kind: 'webhook-roll', weight: 2,
    async run(target) {
      // A Deployment's rolling update, maxSurge 1, maxUnavailable 0: a new replica, ready, in the
      // Service; then the old one's endpoint removed and, after the chart's preStop sleep, SIGTERM.
      const olds = [...target.addon.webhooks];
      for (const old of olds) {
        await target.addon.addWebhook();
        target.addon.removeWebhook(old);
        old.expectedExit = true;
        await sleep(PRE_STOP_MS);
        await old.process.stop(30_000);
      }
      return `${olds.map((old) => old.user).join(', ')} replaced`;
    },
  },
  {
    kind: 'cert-rotate', weight: 2,
    async run(target) {
      // The serving certificate in the Secret replaced by one that cannot be read (a kubernetes.io/tls
      // Secret must keep both keys), the CA kept: each replica's next check issues or picks up a
      // new one from the same CA, which the caBundle already trusts.
      const ports = target.addon.webhooks.map((replica) => replica.process.port);
      const before = await Promise.all(ports.map(async (port) => (await servedCertificate(port)).fingerprint256));
      const patch = JSON.stringify([{ op: 'replace', path: `/data/${TLS_SECRET_KEYS.cert}`, value: Buffer.from('rotated').toString('base64') }]);
      const patched = await target.cp.kubectl(['patch', 'secret', SERVE_FLAGS.tlsSecret.default, '--type', 'json', '-p', patch], { namespace: target.addon.namespace });
      if (patched.code !== 0) throw new Error(`the serving certificate in the Secret could not be replaced: ${patched.stderr}`);
      await waitFor('every webhook replica to serve the new certificate', async () => {
        const now = await Promise.all(ports.map(async (port) => (await servedCertificate(port).catch(() => undefined))?.fingerprint256));
        return now.every((fingerprint, i) => fingerprint !== undefined && fingerprint !== before[i]);
      }, { timeoutMs: 120_000, intervalMs: 500 });
      return 'serving certificate rotated';
    },
  },
];

/** The chart's preStop sleep: the webhook keeps serving this long after its endpoint is removed, before SIGTERM. */
const PRE_STOP_MS = (parseYaml(readFileSync(join(import.meta.dirname, '../../charts/sidecar-terminator/values.yaml'), 'utf8')) as { webhook: { shutdown: { preStopSleepSeconds: number } } }).webhook.shutdown.preStopSleepSeconds * 1000;

/** Picks the next fault by weight among those possible now. */
export function pickFault(target: FaultTarget, draw: () => number): Fault {
  const possible = FAULTS.filter((fault) => fault.possible?.(target) ?? true);
  const total = possible.reduce((sum, fault) => sum + fault.weight, 0);
  let at = draw() * total;
  for (const fault of possible) if ((at -= fault.weight) < 0) return fault;
  return possible.at(-1)!;
}

export interface InjectedFault extends FaultWindow {
  what: string;
  /** Why it did not heal, if it did not: its window then ends when the run gave up on it. */
  error?: string;
}

/** Runs one fault, recording its window whether or not it healed. */
export async function injectFault(fault: Fault, target: FaultTarget, draw: () => number): Promise<InjectedFault> {
  const startedAt = Date.now();
  try {
    const what = await fault.run(target, draw);
    return { kind: fault.kind, startedAt, healedAt: Date.now(), what };
  } catch (error) {
    return { kind: fault.kind, startedAt, healedAt: Date.now(), what: 'did not heal', error: (error as Error).message };
  }
}
