// `sidecar-terminator serve`: starts each enabled component in turn, waits for SIGTERM or
// SIGINT, then stops them in reverse order. A component is a function that starts something
// and returns how to stop it, so the watcher joins as one more entry in the list.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { hostname } from 'node:os';
import type { TLSSocket } from 'node:tls';
import { AdmissionregistrationV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { FastifyBaseLogger } from 'fastify';
import { pino } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { UsageError } from './cli.ts';
import type { ServeConfig } from './config.ts';
import { loadKubeConfig, resolveNamespace } from './kube/client.ts';
import { registerFence } from './kube/fence.ts';
import { excludedNamespaces, registerWebhookConfigurations, syncCaBundles, type WebhookTarget } from './kube/webhook-configurations.ts';
import { isServingCertificateValid, servingHosts, type CertificateBundle } from './tls/certificates.ts';
import { createRotator, describeCertificate } from './tls/rotator.ts';
import { secretStore } from './tls/secret-store.ts';
import { secureContextOptions } from './tls/secure-context.ts';
import { directoryStore } from './tls/store.ts';
import { buildProbeApp, type Readiness } from './health.ts';
import { buildApp } from './webhook/app.ts';
import { OwnerEventRecorder } from './webhook/owner-events.ts';
import { SIGNAL_COMMAND } from './policy/index.ts';
import { WatcherMetrics } from './watcher/metrics.ts';
import { Watcher } from './watcher/watcher.ts';
import { LeaderElector } from './kube/leader-election.ts';

interface Context {
  config: ServeConfig;
  kubeConfig: KubeConfig;
  /** The add-on's own namespace. */
  namespace: string;
  logger: FastifyBaseLogger;
  /** One Prometheus registry for every component, served on /metrics. */
  metrics: Registry;
  /** Ready when every component says so; served on /readyz. */
  readiness: Readiness;
  /** Components add what their readiness depends on. */
  readinessChecks: Readiness[];
}

type Stop = () => Promise<void>;
type Component = (context: Context) => Promise<Stop>;

export async function runServe(config: ServeConfig): Promise<void> {
  const components: Component[] = [];
  if (!config.noWatcher) components.push(startWatcher);
  if (!config.noWebhook) components.push(startWebhook);
  if (config.probeAddress) components.push(startProbes);
  if (components.length === 0) throw new UsageError('nothing to run: both --no-webhook and --no-watcher are set; drop one of them');

  const logger = pino({ level: config.logLevel });
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const namespace = resolveNamespace(config.namespace);
  logger.info({ server: kubeConfig.getCurrentCluster()?.server, namespace }, 'Kubernetes client configured');
  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics });
  const readinessChecks: Readiness[] = [];
  const readiness: Readiness = () => readinessChecks.map((check) => check()).find((result) => !result.ready) ?? { ready: true };
  const context: Context = { config, kubeConfig, namespace, logger, metrics, readiness, readinessChecks };

  const stops: Stop[] = [];
  // Together: the watcher stops taking pods at once (finishing those it is on) while the webhook drains.
  const stopAll = async () => {
    await Promise.all(stops.map((stop) => stop()));
  };
  try {
    for (const start of components) stops.push(await start(context));
  } catch (err) {
    await stopAll();
    throw err;
  }
  logger.info('started');
  const signal = await nextSignal();
  logger.info({ signal }, 'shutting down');
  await stopAll();
  logger.info('stopped');
}

/** The watcher: acts on the pods the webhook labelled. */
async function startWatcher({ config, kubeConfig, namespace, logger, metrics, readinessChecks }: Context): Promise<Stop> {
  const watcherMetrics = new WatcherMetrics(metrics);
  const newWatcher = () =>
    new Watcher({
      kubeConfig,
      namespaces: config.namespaces,
      killMechanism: config.killMechanism,
      signal: { image: config.signalImage, command: [...SIGNAL_COMMAND] },
      concurrency: config.concurrency,
      resyncIntervalMs: config.resyncInterval,
      sweepIntervalMs: config.sweepInterval,
      excludedNamespaces: excludedNamespaces(namespace, config.excludedNamespaces),
      quickExitImageAllowlist: config.quickExitImageAllowlist,
      logger: logger.child({ component: 'watcher' }),
      metrics: watcherMetrics,
    });
  if (!config.leaderElect) {
    const watcher = newWatcher();
    readinessChecks.push(() => watcherReadiness(watcher));
    await watcher.start();
    return () => watcher.stop();
  }

  // A standby replica is ready: it serves probes and takes over when the leader goes.
  let watcher: Watcher | undefined;
  let running: Promise<void> = Promise.resolve();
  readinessChecks.push(() => (watcher ? watcherReadiness(watcher) : { ready: true }));
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
  elector.run(
    () => {
      const current = (watcher = newWatcher());
      running = running.then(() => current.start()).catch((error: unknown) => logger.error({ err: error }, 'watcher failed to start'));
    },
    () => {
      const current = watcher;
      watcher = undefined;
      running = running.then(() => current?.stop());
    },
  );
  return async () => {
    const current = watcher;
    watcher = undefined;
    await running;
    // Stop acting first, then hand the lease over.
    await current?.stop();
    await elector.stop();
  };
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
  const listenAddress = parseListenAddress(config.listenAddress, 'listen-address');
  const store = config.certDir ? directoryStore(config.certDir) : secretStore(kubeConfig.makeApiClient(CoreV1Api), namespace, config.tlsSecret);
  const rotator = createRotator({
    store,
    hosts: servingHosts(config.serviceName, namespace, config.certHosts),
    validityMs: config.certValidity,
    renewBeforeMs: config.certRenewBefore,
    checkIntervalMs: config.certCheckInterval,
    logger,
  });
  let served: CertificateBundle = await rotator.ensure();
  readinessChecks.push(() => (isServingCertificateValid(served, new Date()) ? { ready: true } : { ready: false, reason: 'the serving certificate is not valid now' }));
  logger.info({ store: store.description, ...describeCertificate(served) }, 'certificates loaded');

  let draining = false;
  readinessChecks.push(() => (draining ? { ready: false, reason: 'shutting down' } : { ready: true }));
  const ownerEvents = new OwnerEventRecorder({ core: kubeConfig.makeApiClient(CoreV1Api), logger, metrics });
  const app = buildApp({
    ownerEvents,
    draining: () => draining,
    enforcement: config.enforcement,
    quickExitImageAllowlist: config.quickExitImageAllowlist,
    bodyLimit: config.bodyLimit,
    logger,
    metrics,
    https: { key: served.key, cert: served.cert },
    readiness,
  });
  const closeUnusedConnections = trackUnusedConnections(app.server);
  await app.listen(listenAddress);

  const admissionApi = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const target: WebhookTarget = {
    name: config.webhookConfigName,
    namespace,
    serviceName: config.serviceName,
    url: config.webhookUrl,
    failurePolicy: config.failurePolicy,
    excludedNamespaces: config.excludedNamespaces,
  };
  try {
    if (config.registerWebhooks) {
      await registerWebhookConfigurations(admissionApi, target, served.caBundle);
      logger.info({ name: target.name, via: target.url || `service ${namespace}/${target.serviceName}` }, 'webhook configurations registered');
      await registerFenceFor(admissionApi, config, namespace, logger);
    } else {
      const patched = await syncCaBundles(admissionApi, target.name, served.caBundle);
      logger.info({ name: target.name, patched }, 'caBundle of existing webhook configurations checked');
    }
  } catch (err) {
    await app.close();
    throw err;
  }

  rotator.watch(async (bundle) => {
    // The API server must trust a new CA before any replica serves a certificate it signed.
    const patched = await syncCaBundles(admissionApi, target.name, bundle.caBundle);
    if (patched.length > 0) logger.info({ name: target.name, patched }, 'caBundle of the webhook configurations updated');
    if (bundle.cert === served.cert) return;
    app.server.setSecureContext(secureContextOptions(bundle));
    served = bundle;
    logger.info(describeCertificate(bundle), 'serving the renewed certificate');
  });

  return async () => {
    await rotator.stop();
    // Drain first: not ready (the Service drops this endpoint), still listening (for clients that
    // have not heard yet), every answer closing its connection; then close.
    draining = true;
    await new Promise((resolveDrain) => setTimeout(resolveDrain, Math.min(SHUTDOWN_DRAIN_MS, config.shutdownGrace / 4)));
    await closeWithin(app, config.shutdownGrace, logger, closeUnusedConnections);
    await ownerEvents.idle();
  };
}

/** The admission policies that fence both ServiceAccounts; an API server before 1.30 has none to offer. */
async function registerFenceFor(api: AdmissionregistrationV1Api, config: ServeConfig, namespace: string, logger: FastifyBaseLogger): Promise<void> {
  const serviceAccounts = { watcher: config.watcherServiceAccount, webhook: config.webhookServiceAccount };
  const result = await registerFence(api, {
    namespace,
    serviceAccounts,
    leaseName: config.leaderElectionLease,
    signalImage: config.signalImage,
    tlsSecret: config.tlsSecret,
    configurationName: config.webhookConfigName,
  });
  if (result === 'registered') logger.info({ serviceAccounts }, 'admission policies fencing the service accounts registered');
  else logger.warn('the API server does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (Kubernetes 1.30+): the service accounts are not fenced');
}

/** How long a stopping webhook keeps serving (unready, closing each connection after its answer) before it stops listening. */
const SHUTDOWN_DRAIN_MS = 3000;

/** Stops accepting connections and waits for in-flight requests, closing what is left after `graceMs`. */
async function closeWithin(app: ReturnType<typeof buildApp>, graceMs: number, logger: FastifyBaseLogger, closeUnused: () => void): Promise<void> {
  const timer = setTimeout(() => {
    logger.warn({ graceMs }, 'shutdown grace period over; closing the remaining connections');
    app.server.closeAllConnections();
  }, graceMs);
  const closed = app.close();
  closeUnused();
  await closed;
  clearTimeout(timer);
}

/**
 * Node's closeIdleConnections() (which app.close() calls) leaves alone a connection that has
 * not sent a request yet, as if it were busy, so shutdown would wait the whole grace period for
 * it. Go's HTTP client (the API server) keeps such connections in its pool. Returns a function
 * that closes every TLS connection with no request in progress.
 */
function trackUnusedConnections(server: HttpsServer): () => void {
  const inProgress = new Map<TLSSocket, number>();
  server.on('secureConnection', (socket: TLSSocket) => {
    inProgress.set(socket, 0);
    socket.once('close', () => inProgress.delete(socket));
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket as TLSSocket;
    inProgress.set(socket, (inProgress.get(socket) ?? 0) + 1);
    response.once('close', () => {
      if (inProgress.has(socket)) inProgress.set(socket, inProgress.get(socket)! - 1);
    });
  });
  return () => {
    for (const [socket, requests] of inProgress) if (requests === 0) socket.destroy();
  };
}

/** `host:port`, `[ipv6]:port` or `:port` (all interfaces). */
function parseListenAddress(address: string, flag: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(address);
  if (!match) throw new UsageError(`--${flag}: expected host:port, got ${JSON.stringify(address)}`);
  return { host: match[1] ?? (match[2] || '0.0.0.0'), port: Number(match[3]) };
}

function nextSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      resolve(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
