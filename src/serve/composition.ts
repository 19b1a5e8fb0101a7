// What `serve` runs, built from its configuration: the watcher, the admission webhook and the
// probe listener, sharing one logger, one metrics registry and one readiness. How they are
// started, stopped and drained is lifecycle.ts's concern. Each component's modules are loaded
// when it starts, not here: a watcher-only process never loads the webhook, TLS or lint code,
// and a webhook-only process never loads the watcher (bench/README.md measures what that saves).
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { CoreV1Api } from '@kubernetes/client-node';
import type { Logger as PinoLogger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { ServeConfig } from '../config.ts';
import { buildProbeApp, type Readiness } from '../health.ts';
import { loadKubeConfig, resolveNamespace } from '../kube/client.ts';
import { SIGNAL_COMMAND } from '../policy/index.ts';
import { UsageError } from '../usage-error.ts';
import type { Watcher } from '../watcher/watcher.ts';
import { parseListenAddress, type Context } from './context.ts';
import { serveLogger } from './log.ts';
import { InjectedSidecarPolicySource, loadInjectedSidecarPolicy, ownPodOf } from './injected-sidecar-source.ts';
import { whileLeader, type Component, type Stop } from './lifecycle.ts';

/** The components `config` enables, in start order, and the logger they share. */
export function compose(config: ServeConfig): { logger: PinoLogger; components: Component[] } {
  const enabled: Array<(context: Context) => Promise<Stop>> = [];
  if (!config.noWatcher) enabled.push(startWatcher);
  if (!config.noWebhook) enabled.push(startWebhook);
  if (config.probeAddress) enabled.push(startProbes);
  if (enabled.length === 0) throw new UsageError('nothing to run: both --no-webhook and --no-watcher are set; drop one of them');
  // The policy is applied at admission: a watcher alone would read it for nothing.
  if (config.noWebhook && config.injectedSidecars) throw new UsageError('--injected-sidecars is read by the webhook, which --no-webhook turns off: give the policy to the webhook replicas, or drop --no-webhook');
  // Before anything else: a bad policy file is refused before a client or a certificate exists.
  const loadedPolicy = config.injectedSidecars ? loadInjectedSidecarPolicy(config.injectedSidecars) : undefined;

  const logger = serveLogger(config.logLevel);
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const namespace = resolveNamespace(config.namespace);
  logger.info({ server: kubeConfig.getCurrentCluster()?.server, namespace }, 'Kubernetes client configured');
  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics });
  const readinessChecks: Readiness[] = [];
  const readiness: Readiness = () => readinessChecks.map((check) => check()).find((result) => !result.ready) ?? { ready: true };
  const context: Context = { config, kubeConfig, namespace, logger, metrics, readiness, readinessChecks };
  if (loadedPolicy) {
    context.injectedSidecars = injectedSidecarSource(context, config.injectedSidecars, loadedPolicy);
    enabled.unshift(startInjectedSidecars);
  }
  return { logger, components: enabled.map((start) => () => start(context)) };
}

/** The policy source, telling a bad change in an event on this pod when the Deployment names it (POD_NAME, POD_NAMESPACE). */
function injectedSidecarSource({ config, kubeConfig, logger, metrics }: Context, path: string, loaded: ReturnType<typeof loadInjectedSidecarPolicy>): InjectedSidecarPolicySource {
  const ownPod = ownPodOf(process.env);
  return new InjectedSidecarPolicySource({
    path,
    loaded,
    checkIntervalMs: config.injectedSidecarsCheckInterval,
    logger: logger.child({ component: 'injected-sidecars' }),
    metrics,
    ...(ownPod ? { ownPod: { ...ownPod, core: kubeConfig.makeApiClient(CoreV1Api) } } : {}),
  });
}

/** The policy, read again on its interval while serve runs. */
function startInjectedSidecars({ injectedSidecars }: Context): Promise<Stop> {
  injectedSidecars?.start();
  return Promise.resolve(async () => injectedSidecars?.stop());
}

/** The watcher: acts on the pods the webhook labelled; with --leader-elect only while holding the Lease. */
async function startWatcher({ config, kubeConfig, namespace, logger, metrics, readinessChecks }: Context): Promise<Stop> {
  const [{ Watcher }, { WatcherMetrics }, { exponentialBackoff }, { LeaderElector }, { fencedKubeConfig }, { excludedNamespaces }] = await Promise.all([
    import('../watcher/watcher.ts'),
    import('../watcher/watcher-metrics.ts'),
    import('../watcher/retries.ts'),
    import('../kube/leader-election.ts'),
    import('../kube/fenced-client.ts'),
    import('../kube/webhook-configurations.ts'),
  ]);
  const watcherMetrics = new WatcherMetrics(metrics);
  // With leader election, the watcher's requests end with its term (src/kube/fenced-client.ts).
  const newWatcher = (term?: AbortSignal) =>
    new Watcher({
      kubeConfig: term ? fencedKubeConfig(kubeConfig, term) : kubeConfig,
      namespaces: config.namespaces,
      killMechanism: config.killMechanism,
      killMechanismCheckIntervalMs: config.killMechanismCheckInterval,
      kruiseNamespace: config.kruiseNamespace,
      ...(config.leaderElect ? { lease: { namespace, name: config.leaderElectionLease } } : {}),
      signal: { image: config.signalImage, command: [...SIGNAL_COMMAND] },
      concurrency: config.concurrency,
      resyncIntervalMs: config.resyncInterval,
      sweepIntervalMs: config.sweepInterval,
      excludedNamespaces: excludedNamespaces(namespace, config.excludedNamespaces),
      namespaceLabels: config.namespaceLabels,
      quickExitImageAllowlist: config.quickExitImageAllowlist,
      quickExitImage: config.quickExitImage,
      logger: logger.child({ component: 'watcher' }),
      metrics: watcherMetrics,
    });
  if (!config.leaderElect) {
    const watcher = newWatcher();
    readinessChecks.push(() => watcherReadiness(watcher));
    await watcher.start();
    return () => watcher.stop();
  }

  const elector = new LeaderElector({
    kubeConfig,
    namespace,
    name: config.leaderElectionLease,
    identity: `${hostname()}_${randomUUID().slice(0, 8)}`,
    leaseDurationMs: config.leaderElectionDuration,
    renewDeadlineMs: (config.leaderElectionDuration * 2) / 3,
    retryPeriodMs: Math.max(500, config.leaderElectionDuration / 7),
    logger,
  });
  const leading = whileLeader(elector, newWatcher, logger, {
    backoff: exponentialBackoff(1000, 30_000),
    giveUpAfterMs: config.leaderStartTimeout,
    standBackMs: config.leaderElectionDuration,
  });
  // A standby replica is ready: it serves probes and takes over when the leader goes (a standby
  // that were unready would hold up every rolling update). A leader is ready once its watcher
  // runs; sidecar_terminator_leader says which replica that is.
  readinessChecks.push(() => {
    if (!elector.isLeader()) return { ready: true };
    const watcher = leading.current();
    return watcher ? watcherReadiness(watcher) : { ready: false, reason: 'this replica leads but its watcher has not started (its logs say why); it releases the Lease if the watcher cannot start within --leader-start-timeout' };
  });
  return leading.stop;
}

function watcherReadiness(watcher: Watcher): { ready: boolean; reason?: string } {
  return watcher.ready() ? { ready: true } : { ready: false, reason: 'the watcher has not listed the managed pods yet' };
}

/** The admission webhook (webhook.ts), its modules loaded only when it runs. */
async function startWebhook(context: Context): Promise<Stop> {
  const { startWebhook } = await import('./webhook.ts');
  return startWebhook(context);
}

/** Plain-HTTP /healthz, /readyz and /metrics, for probes and scrapes of any component. */
async function startProbes({ config, metrics, readiness, logger }: Context): Promise<Stop> {
  const app = buildProbeApp(readiness, metrics);
  await app.listen(parseListenAddress(config.probeAddress, 'probe-address'));
  logger.info({ address: config.probeAddress }, 'probe listener started');
  return () => app.close();
}
