// The add-on as a robustness run deploys it: webhook replicas behind a round-robin TCP proxy (the
// Service), watcher replicas electing a leader, each replica with a client certificate of its own
// user (so the API server's audit log tells their requests apart), each watcher reaching the API
// server through a TCP proxy of its own (so that its traffic alone can be black-holed). Replicas
// run as the image runs them (bench/lib/addon.ts). A replica that is killed is replaced, as the
// Deployment's ReplicaSet would.
import type { KubeConfig } from '@kubernetes/client-node';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVE_FLAGS } from '../../src/config.ts';
import type { ControlPlane } from '../../test/support/control-plane.ts';
import { startServe, startWatcherProcess, type ServeProcess } from '../../test/support/serve-process.ts';
import { startTcpBalancer, type TcpBalancer } from '../../test/support/tcp-balancer.ts';
import { addOnArgs } from '../lib/addon.ts';

/** The group of the add-on's users: the audit policy logs their requests and no one else's. */
export const ADDON_GROUP = 'st:robustness-addon';
export const LEASE_SECONDS = 6;
export const WEBHOOK_CONFIG = 'sidecar-terminator';

export interface Replica {
  /** Its audit user, also its name in the report. */
  user: string;
  process: ServeProcess;
  /** Set before the run kills or stops it: any other exit is the add-on's own failure. */
  expectedExit?: boolean;
}

export interface WatcherReplica extends Replica {
  /** Its own path to the API server. */
  path: TcpBalancer;
}

export class AddOn {
  readonly webhooks: Replica[] = [];
  readonly watchers: WatcherReplica[] = [];
  /** Every user a replica ever ran as. */
  readonly users: string[] = [];
  /** Replicas that exited when nothing told them to (each replaced), with their last log lines. */
  readonly crashes: string[] = [];
  readonly namespace: string;
  readonly service: TcpBalancer;
  private readonly cp: ControlPlane;
  private readonly dir: string;
  private readonly sweepInterval: string;
  private serial = 0;
  private stopping = false;

  private constructor(cp: ControlPlane, namespace: string, service: TcpBalancer, dir: string, sweepInterval: string) {
    this.sweepInterval = sweepInterval;
    this.cp = cp;
    this.namespace = namespace;
    this.service = service;
    this.dir = dir;
  }

  static async start(cp: ControlPlane, namespace: string, dir: string, options: { sweepInterval: string; replicas?: number }): Promise<AddOn> {
    const addon = new AddOn(cp, namespace, await startTcpBalancer([]), dir, options.sweepInterval);
    const replicas = options.replicas ?? 2;
    for (let i = 0; i < replicas; i++) await addon.addWebhook();
    for (let i = 0; i < replicas; i++) await addon.addWatcher();
    return addon;
  }

  /** A kubeconfig for a new user of the add-on's group, reaching the API server at `server`. */
  private async kubeconfig(role: string, server = this.cp.serverUrl): Promise<{ user: string; path: string }> {
    const user = `${role}-${++this.serial}`;
    this.users.push(user);
    const path = await this.cp.clientKubeconfig(user, ['system:masters', ADDON_GROUP]);
    const config = JSON.parse(readFileSync(path, 'utf8')) as { clusters: Array<{ cluster: { server: string } }> };
    config.clusters[0]!.cluster.server = server;
    const rewritten = join(this.dir, `${user}.kubeconfig`);
    writeFileSync(rewritten, JSON.stringify(config));
    return { user, path: rewritten };
  }

  /** Starts a webhook replica and, once ready, puts it behind the Service. */
  async addWebhook(): Promise<Replica> {
    const { user, path } = await this.kubeconfig('webhook');
    const serviceUrl = `https://127.0.0.1:${this.service.port}`;
    const process = await startServe(
      [
        '--kubeconfig', path, '--namespace', this.namespace, '--no-watcher',
        '--register-webhooks', '--webhook-url', serviceUrl, '--webhook-config-name', WEBHOOK_CONFIG,
        // The chart's defaults: a webhook that cannot answer in time admits the pod unlabelled (the sweeper labels it later).
        '--failure-policy', 'Ignore', '--webhook-timeout-seconds', '3',
        // Certificates re-read often, so that a rotation is seen within seconds.
        '--cert-check-interval', '5s',
      ],
      { entry: addOnArgs() },
    );
    const replica: Replica = { user, process };
    this.webhooks.push(replica);
    this.service.add({ host: '127.0.0.1', port: process.port });
    this.replaceOnCrash(replica, async () => {
      this.removeWebhook(replica);
      await this.addWebhook();
    });
    return replica;
  }

  /** Takes a webhook replica out of the Service (its endpoint removed) and forgets it. */
  removeWebhook(replica: Replica): void {
    this.service.remove({ host: '127.0.0.1', port: replica.process.port });
    if (this.webhooks.includes(replica)) this.webhooks.splice(this.webhooks.indexOf(replica), 1);
  }

  async addWatcher(): Promise<WatcherReplica> {
    const apiServer = new URL(this.cp.serverUrl);
    const path = await startTcpBalancer([{ host: apiServer.hostname, port: Number(apiServer.port) }]);
    const { user, path: kubeconfig } = await this.kubeconfig('watcher', `https://127.0.0.1:${path.port}`);
    const process = await startWatcherProcess(
      [
        '--kubeconfig', kubeconfig, '--namespace', this.namespace,
        '--leader-elect', '--leader-election-duration', `${LEASE_SECONDS}s`,
        '--kill-mechanism', 'auto', '--kill-mechanism-check-interval', '5s', '--sweep-interval', this.sweepInterval,
      ],
      { entry: addOnArgs() },
    );
    const replica: WatcherReplica = { user, process, path };
    this.watchers.push(replica);
    this.replaceOnCrash(replica, async () => {
      await this.removeWatcher(replica);
      await this.addWatcher();
    });
    return replica;
  }

  /** Forgets a watcher replica that has exited (or is to be replaced), closing its path. */
  async removeWatcher(replica: WatcherReplica): Promise<void> {
    if (this.watchers.includes(replica)) this.watchers.splice(this.watchers.indexOf(replica), 1);
    await replica.path.stop();
  }

  /** A replica that exits when nothing told it to is recorded and replaced, as its ReplicaSet would. */
  private replaceOnCrash(replica: Replica, replace: () => Promise<void>): void {
    void replica.process.exited.then(async (exit) => {
      if (replica.expectedExit || this.stopping) return;
      this.crashes.push(`${replica.user} exited (${exit.signal ?? `code ${exit.code}`}): ${replica.process.output().trimEnd().split('\n').slice(-5).join(' | ')}`);
      await replace().catch((error: unknown) => this.crashes.push(`${replica.user} could not be replaced: ${(error as Error).message}`));
    });
  }

  /** The watcher replica that holds the Lease now, by the identity it logged when it became leader. */
  async leader(kubeConfig: KubeConfig): Promise<WatcherReplica | undefined> {
    const lease = await kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: this.namespace, name: SERVE_FLAGS.leaderElectionLease.default });
    const holder = lease.spec?.holderIdentity;
    if (!holder) return undefined;
    return this.watchers.find((replica) => replica.process.running() && replica.process.output().includes(`"identity":"${holder}"`));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.webhooks, ...this.watchers].map((replica) => replica.process.stop(5000)));
    await Promise.all(this.watchers.map((replica) => replica.path.stop()));
    await this.service.stop();
  }
}
