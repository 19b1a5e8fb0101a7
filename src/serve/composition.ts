// What `serve` runs, built from its configuration: the watcher, the admission webhook and the
// probe listener, sharing one logger, one metrics registry and one readiness. How they are
// started, stopped and drained is lifecycle.ts's concern. Each component's modules are loaded
// when it starts, not here: a watcher-only process never loads the webhook, TLS or lint code,
// and a webhook-only process never loads the watcher (bench/README.md measures what that saves).
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { AdmissionregistrationV1Api, BatchV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { pino, type Logger as PinoLogger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { ServeConfig } from '../config.ts';
import { buildProbeApp, type Readiness } from '../health.ts';
import { loadKubeConfig, resolveNamespace } from '../kube/client.ts';
import type { WebhookTarget } from '../kube/webhook-configurations.ts';
import { SIGNAL_COMMAND } from '../policy/index.ts';
import type { CertificateBundle } from '../tls/certificates.ts';
import { UsageError } from '../usage-error.ts';
import type { Watcher } from '../watcher/watcher.ts';
import { Drain, whileLeader, type Component, type Stop } from './lifecycle.ts';

/** What every component shares. */
interface Context {
  config: ServeConfig;
  kubeConfig: KubeConfig;
  /** The add-on's own namespace. */
  namespace: string;
  logger: PinoLogger;
  /** One Prometheus registry for every component, served on /metrics. */
  metrics: Registry;
  /** Ready when every component says so; served on /readyz. */
  readiness: Readiness;
  /** Components add what their readiness depends on. */
  readinessChecks: Readiness[];
}

/** The components `config` enables, in start order, and the logger they share. */
export function compose(config: ServeConfig): { logger: PinoLogger; components: Component[] } {
  const enabled: Array<(context: Context) => Promise<Stop>> = [];
  if (!config.noWatcher) enabled.push(startWatcher);
  if (!config.noWebhook) enabled.push(startWebhook);
  if (config.probeAddress) enabled.push(startProbes);
  if (enabled.length === 0) throw new UsageError('nothing to run: both --no-webhook and --no-watcher are set; drop one of them');

  const logger = pino({ level: config.logLevel });
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const namespace = resolveNamespace(config.namespace);
  logger.info({ server: kubeConfig.getCurrentCluster()?.server, namespace }, 'Kubernetes client configured');
  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics });
  const readinessChecks: Readiness[] = [];
  const readiness: Readiness = () => readinessChecks.map((check) => check()).find((result) => !result.ready) ?? { ready: true };
  const context: Context = { config, kubeConfig, namespace, logger, metrics, readiness, readinessChecks };
  return { logger, components: enabled.map((start) => () => start(context)) };
}

/** The watcher: acts on the pods the webhook labelled; with --leader-elect only while holding the Lease. */
async function startWatcher({ config, kubeConfig, namespace, logger, metrics, readinessChecks }: Context): Promise<Stop> {
  const [{ Watcher }, { WatcherMetrics }, { exponentialBackoff }, { LeaderElector }, { fencedKubeConfig }, { excludedNamespaces }] = await Promise.all([
    import('../watcher/watcher.ts'),
    import('../watcher/metrics.ts'),
    import('../watcher/queue.ts'),
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

/** Plain-HTTP /healthz, /readyz and /metrics, for probes and scrapes of any component. */
async function startProbes({ config, metrics, readiness, logger }: Context): Promise<Stop> {
  const app = buildProbeApp(readiness, metrics);
  await app.listen(parseListenAddress(config.probeAddress, 'probe-address'));
  logger.info({ address: config.probeAddress }, 'probe listener started');
  return () => app.close();
}

/** The admission webhook: certificates, the HTTPS server, the webhook configurations. */
async function startWebhook({ config, kubeConfig, namespace, logger, metrics, readiness, readinessChecks }: Context): Promise<Stop> {
  const [
    { excludedNamespaces, registerWebhookConfigurations, syncCaBundles, webhooksWithoutMatchConditions },
    { nativeSidecarsOn },
    { isServingCertificateValid, servingHosts },
    { createRotator, describeCertificate },
    { mountedCertificate },
    { secretStore },
    { secureContextOptions },
    { directoryStore },
    { buildApp },
    { registerCertificateExpiry },
    { OwnerEventRecorder },
    { oldKubeletList, podMutatingWebhookList },
  ] = await Promise.all([
    import('../kube/webhook-configurations.ts'),
    import('../kube/server-version.ts'),
    import('../tls/certificates.ts'),
    import('../tls/rotator.ts'),
    import('../tls/mounted.ts'),
    import('../tls/secret-store.ts'),
    import('../tls/secure-context.ts'),
    import('../tls/store.ts'),
    import('../webhook/app.ts'),
    import('../webhook/metrics.ts'),
    import('../webhook/owner-events.ts'),
    import('../kube/pod-mutating-webhooks.ts'),
  ]);
  const listenAddress = parseListenAddress(config.listenAddress, 'listen-address');
  // The certificate: issued outside and mounted (cert-manager), or issued and renewed here.
  const mounted = config.tlsCertDir ? mountedCertificate(config.tlsCertDir, { checkIntervalMs: config.certCheckInterval, logger }) : undefined;
  const store = config.certDir ? directoryStore(config.certDir) : secretStore(kubeConfig.makeApiClient(CoreV1Api), namespace, config.tlsSecret);
  const rotator = mounted
    ? undefined
    : createRotator({
        store,
        hosts: servingHosts(config.serviceName, namespace, config.certHosts),
        validityMs: config.certValidity,
        renewBeforeMs: config.certRenewBefore,
        checkIntervalMs: config.certCheckInterval,
        logger,
      });
  let served: CertificateBundle = mounted ? await mounted.load() : await rotator!.ensure();
  if (mounted && config.registerWebhooks && !served.caBundle) throw new UsageError(`--tls-cert-dir ${config.tlsCertDir}: --register-webhooks needs the CA to trust in ca.crt there`);
  registerCertificateExpiry(metrics, () => new Date(describeCertificate(served).notAfter));
  readinessChecks.push(() => (isServingCertificateValid(served, new Date()) ? { ready: true } : { ready: false, reason: 'the serving certificate is not valid now' }));
  logger.info({ store: mounted?.description ?? store.description, ...describeCertificate(served) }, 'certificates loaded');

  // Ready once the webhook configurations are in place: a replica ready earlier may be sent
  // requests by a Service while the API server does not call it yet (or with an old caBundle).
  let configured = false;
  readinessChecks.push(() => (configured ? { ready: true } : { ready: false, reason: 'the webhook configurations are not checked yet' }));
  if (config.shutdownDrain >= config.shutdownGrace) throw new UsageError(`--shutdown-drain (${config.shutdownDrain} ms) must be shorter than --shutdown-grace (${config.shutdownGrace} ms), which it is part of`);
  const drain = new Drain({ graceMs: config.shutdownGrace - config.shutdownDrain, drainMs: config.shutdownDrain, logger });
  readinessChecks.push(() => (drain.draining() ? { ready: false, reason: 'shutting down' } : { ready: true }));
  const ownerEvents = new OwnerEventRecorder({
    core: kubeConfig.makeApiClient(CoreV1Api),
    batch: kubeConfig.makeApiClient(BatchV1Api),
    excludedNamespaces: excludedNamespaces(namespace, config.excludedNamespaces),
    logger,
    metrics,
  });
  const nativeSidecars = await nativeSidecarsOn(config.nativeSidecars, kubeConfig, logger);
  // With migration on, a pod that lost its native sidecars is refused naming the webhooks that may have stripped them.
  // With migration on, what it needs of the cluster, read in the background: the other mutating
  // webhooks (a pod that lost its native sidecars is refused naming them) and the kubelets (none
  // is migrated while a node's kubelet runs no native sidecars).
  const reads = nativeSidecars
    ? {
        podMutatingWebhooks: podMutatingWebhookList(kubeConfig.makeApiClient(AdmissionregistrationV1Api), config.webhookConfigName, logger),
        oldKubelets: oldKubeletList(kubeConfig.makeApiClient(CoreV1Api), logger),
      }
    : undefined;
  // Not awaited: a slow API server does not hold the webhook back; until the nodes are read, no pod is migrated.
  void reads?.podMutatingWebhooks.start();
  void reads?.oldKubelets.start();
  const stopReads = () => {
    reads?.podMutatingWebhooks.stop();
    reads?.oldKubelets.stop();
  };
  const app = buildApp({
    nativeSidecars,
    ...(reads ? { cluster: () => ({ podMutatingWebhooks: reads.podMutatingWebhooks.current(), oldKubelets: reads.oldKubelets.current() ?? 'unread' }) } : {}),
    ownerEvents,
    draining: drain.draining,
    enforcement: config.enforcement,
    quickExitImageAllowlist: config.quickExitImageAllowlist,
    bodyLimit: config.bodyLimit,
    timeoutSeconds: config.webhookTimeoutSeconds,
    logger,
    metrics,
    https: { key: served.key, cert: served.cert },
    readiness,
  });
  drain.track(app.server);
  await app.listen(listenAddress);
  logger.info({ address: config.listenAddress, timeoutSeconds: config.webhookTimeoutSeconds, drainMs: config.shutdownDrain }, 'admission webhook listening');

  const admissionApi = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  // Read afresh before a CA leaves a caBundle: another replica may have renewed since this one's last check.
  const storedCaBundle = { read: async () => (await store.load())?.bundle.caBundle };
  const target: WebhookTarget = {
    name: config.webhookConfigName,
    namespace,
    serviceName: config.serviceName,
    url: config.webhookUrl,
    failurePolicy: config.failurePolicy,
    excludedNamespaces: config.excludedNamespaces,
    namespaceLabels: Object.fromEntries(config.namespaceLabels.map((pair) => pair.split('=') as [string, string])),
    nativeSidecars: config.nativeSidecars,
    timeoutSeconds: config.webhookTimeoutSeconds,
    validateWorkloads: config.validateWorkloads,
  };
  try {
    if (config.registerWebhooks) {
      await registerWebhookConfigurations(admissionApi, target, served.caBundle);
      logger.info({ name: target.name, via: target.url || `service ${namespace}/${target.serviceName}` }, 'webhook configurations registered');
      await registerFenceFor(admissionApi, config, namespace, logger);
    } else if (!mounted) {
      const patched = await syncCaBundles(admissionApi, target.name, served.caBundle, storedCaBundle);
      logger.info({ name: target.name, patched }, 'caBundle of existing webhook configurations checked');
    }
    // A mounted certificate's webhook reads no configuration (cert-manager's cainjector keeps their caBundle).
    const unmatched = mounted && !config.registerWebhooks ? [] : await webhooksWithoutMatchConditions(admissionApi, target.name);
    if (unmatched.length > 0) {
      logger.warn(
        { name: target.name, webhooks: unmatched },
        'the API server keeps no matchConditions on these webhooks (Kubernetes before 1.30 with the AdmissionWebhookMatchConditions feature gate off): every pod creation, Job and CronJob write of the served namespaces is sent to the webhook, as without them',
      );
    }
  } catch (err) {
    stopReads();
    await app.close();
    throw err;
  }
  configured = true;

  const serve = (bundle: CertificateBundle) => {
    app.server.setSecureContext(secureContextOptions(bundle));
    served = bundle;
    logger.info(describeCertificate(bundle), 'serving the renewed certificate');
  };
  mounted?.watch(serve);
  rotator?.watch(async (bundle) => {
    // The API server must trust a new CA before any replica serves a certificate it signed.
    const patched = await syncCaBundles(admissionApi, target.name, bundle.caBundle, storedCaBundle);
    if (patched.length > 0) logger.info({ name: target.name, patched }, 'caBundle of the webhook configurations updated');
    if (bundle.cert !== served.cert) serve(bundle);
  });

  return async () => {
    mounted?.stop();
    stopReads();
    await rotator?.stop();
    await drain.stop(app);
    await ownerEvents.idle();
  };
}

/** The admission policies that fence both ServiceAccounts; an API server before 1.30 has none to offer. */
async function registerFenceFor(api: AdmissionregistrationV1Api, config: ServeConfig, namespace: string, logger: PinoLogger): Promise<void> {
  const { registerFence } = await import('../kube/fence.ts');
  const serviceAccounts = { watcher: config.watcherServiceAccount, webhook: config.webhookServiceAccount };
  const result = await registerFence(api, {
    namespace,
    serviceAccounts,
    leaseName: config.leaderElectionLease,
    signalImage: config.signalImage,
    quickExitImage: config.quickExitImage,
    tlsSecret: config.tlsSecret,
    configurationName: config.webhookConfigName,
  });
  if (result === 'registered') logger.info({ serviceAccounts }, 'admission policies fencing the service accounts registered');
  else logger.warn('the API server does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (Kubernetes 1.30+): the service accounts are not fenced');
}

/** `host:port`, `[ipv6]:port` or `:port` (all interfaces). */
function parseListenAddress(address: string, flag: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(address);
  if (!match) throw new UsageError(`--${flag}: expected host:port, got ${JSON.stringify(address)}`);
  return { host: match[1] ?? (match[2] || '0.0.0.0'), port: Number(match[3]) };
}
