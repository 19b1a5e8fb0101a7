// The admission webhook, as a component of `serve`: its certificate source, its HTTPS server and
// drain, what it reads of the cluster and the webhook configurations. composition.ts loads this
// module only when the webhook runs, so a watcher-only process loads none of it.
import { AdmissionregistrationV1Api, BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import type { Logger as PinoLogger } from 'pino';
import type { ServeConfig } from '../config.ts';
import type { Logger } from '../logger.ts';
import { excludedNamespaces, registerWebhookConfigurations, syncCaBundles, webhooksWithoutMatchConditions, type WebhookTarget } from '../kube/webhook-configurations.ts';
import { oldKubeletList, podMutatingWebhookList } from '../kube/pod-mutating-webhooks.ts';
import { nativeSidecarsOn } from '../kube/server-version.ts';
import { NamespaceLabels, namespaceListWatch, type NamespaceListWatch } from '../kube/namespace-labels.ts';
import { policyNeedsNamespaceLabels, type InjectedSidecarPolicy } from '../policy/index.ts';
import { servingHosts } from '../tls/certificates.ts';
import { describeCertificate } from '../tls/rotator.ts';
import { secretStore } from '../tls/secret-store.ts';
import { issuedSource, mountedSource, type CertificateSource, type Trust } from '../tls/source.ts';
import { directoryStore } from '../tls/store.ts';
import { UsageError } from '../usage-error.ts';
import { buildApp } from '../webhook/app.ts';
import { connectionsOf } from '../webhook/connections.ts';
import { registerCertificateExpiry } from '../webhook/admission-metrics.ts';
import { OwnerEventRecorder } from '../webhook/owner-events.ts';
import type { InjectedSidecarSettings } from '../webhook/admission.ts';
import { parseListenAddress, type Context } from './context.ts';
import { Drain, type Stop } from './lifecycle.ts';

/** The admission webhook: certificates, the HTTPS server, the webhook configurations. */
export async function startWebhook(context: Context): Promise<Stop> {
  const { config, logger, readinessChecks } = context;
  // Flags first: a bad one is refused before any certificate is read or issued.
  const listenAddress = parseListenAddress(config.listenAddress, 'listen-address');
  const drain = webhookDrain(config, logger);
  const certificates = await startCertificates(context);

  // Ready once the webhook configurations are in place: a replica ready earlier may be sent
  // requests by a Service while the API server does not call it yet (or with an old caBundle).
  let configured = false;
  readinessChecks.push(() => (configured ? { ready: true } : { ready: false, reason: 'the webhook configurations are not checked yet' }));
  readinessChecks.push(() => (drain.draining() ? { ready: false, reason: 'shutting down' } : { ready: true }));
  const ownerEvents = ownerEventRecorder(context);
  const reads = await startClusterReads(context);
  const injected = injectedSidecarReads(context, () => namespaceListWatch(context.kubeConfig));
  const app = buildApp({
    nativeSidecars: reads.nativeSidecars,
    ...(reads.cluster ? { cluster: reads.cluster } : {}),
    ...(injected.settings ? { injectedSidecarsNow: injected.settings, readNamespaceLabels: injected.readNamespaceLabels } : {}),
    ownerEvents,
    draining: drain.draining,
    enforcement: config.enforcement,
    quickExitImageAllowlist: config.quickExitImageAllowlist,
    bodyLimit: config.bodyLimit,
    timeoutSeconds: config.webhookTimeoutSeconds,
    logger,
    metrics: context.metrics,
    https: { key: certificates.current().key, cert: certificates.current().cert },
    readiness: context.readiness,
  });
  drain.track(connectionsOf(app.server));
  await app.listen(listenAddress);
  logger.info({ address: config.listenAddress, timeoutSeconds: config.webhookTimeoutSeconds, drainMs: config.shutdownDrain }, 'admission webhook listening');

  const configurations = webhookConfigurations(context, certificates);
  try {
    await configurations.configure();
  } catch (err) {
    reads.stop();
    await injected.stop();
    await app.close();
    throw err;
  }
  configured = true;
  certificates.serveRenewals(app.server, configurations.trust);

  return async () => {
    reads.stop();
    await injected.stop();
    await certificates.stop();
    await drain.stop(app);
    await ownerEvents.idle();
  };
}

/** The drain of --shutdown-drain, which is part of --shutdown-grace: what is left open when the grace is over is closed. */
export function webhookDrain(config: ServeConfig, logger: Logger): Drain {
  if (config.shutdownDrain >= config.shutdownGrace) throw new UsageError(`--shutdown-drain (${config.shutdownDrain} ms) must be shorter than --shutdown-grace (${config.shutdownGrace} ms), which it is part of`);
  return new Drain({ graceMs: config.shutdownGrace - config.shutdownDrain, drainMs: config.shutdownDrain, logger });
}

/** The certificate source, started: its certificate loaded (or issued), its expiry and validity reported. */
async function startCertificates({ config, kubeConfig, namespace, logger, metrics, readinessChecks }: Context): Promise<CertificateSource> {
  const certificates = certificateSource(config, kubeConfig.makeApiClient(CoreV1Api), namespace, logger);
  const served = await certificates.start();
  registerCertificateExpiry(metrics, () => new Date(describeCertificate(certificates.current()).notAfter));
  readinessChecks.push(() => certificates.ready());
  logger.info({ store: certificates.description, ...describeCertificate(served) }, 'certificates loaded');
  return certificates;
}

/** Issued outside and mounted (--tls-cert-dir, cert-manager), or issued and renewed here, in a directory (--cert-dir) or a Secret. */
function certificateSource(config: ServeConfig, core: CoreV1Api, namespace: string, logger: PinoLogger): CertificateSource {
  if (config.tlsCertDir) return mountedSource(config.tlsCertDir, { checkIntervalMs: config.certCheckInterval, caRequired: config.registerWebhooks, logger });
  return issuedSource({
    store: config.certDir ? directoryStore(config.certDir) : secretStore(core, namespace, config.tlsSecret),
    hosts: servingHosts(config.serviceName, namespace, config.certHosts),
    validityMs: config.certValidity,
    renewBeforeMs: config.certRenewBefore,
    checkIntervalMs: config.certCheckInterval,
    logger,
  });
}

function ownerEventRecorder({ config, kubeConfig, namespace, logger, metrics }: Context): OwnerEventRecorder {
  return new OwnerEventRecorder({
    core: kubeConfig.makeApiClient(CoreV1Api),
    batch: kubeConfig.makeApiClient(BatchV1Api),
    excludedNamespaces: excludedNamespaces(namespace, config.excludedNamespaces),
    logger,
    metrics,
  });
}

/**
 * Whether native sidecar migration is on and, when it is, what it needs of the cluster, read in
 * the background: the other mutating webhooks (a pod that lost its native sidecars is refused
 * naming them) and the kubelets (none is migrated while a node's kubelet runs no native sidecars).
 */
async function startClusterReads({ config, kubeConfig, logger }: Context) {
  const nativeSidecars = await nativeSidecarsOn(config.nativeSidecars, kubeConfig, logger);
  if (!nativeSidecars) return { nativeSidecars, stop: () => {} };
  const podMutatingWebhooks = podMutatingWebhookList(kubeConfig.makeApiClient(AdmissionregistrationV1Api), config.webhookConfigName, logger);
  const oldKubelets = oldKubeletList(kubeConfig.makeApiClient(CoreV1Api), logger);
  // Not awaited: a slow API server does not hold the webhook back; until the nodes are read, no pod is migrated.
  void podMutatingWebhooks.start();
  void oldKubelets.start();
  return {
    nativeSidecars,
    cluster: () => ({ podMutatingWebhooks: podMutatingWebhooks.current(), oldKubelets: oldKubelets.current() ?? ('unread' as const) }),
    stop() {
      podMutatingWebhooks.stop();
      oldKubelets.stop();
    },
  };
}

/**
 * What the mutating webhook applies the injected-sidecar policy with: the policy in force, and,
 * while one of its entries has a namespaceSelector, the namespaces' labels, listed and watched in
 * the background (started or stopped as a change of the policy needs them), and read one at a time
 * for a pod whose namespace they lack. A replica whose policy has a namespaceSelector at start is
 * ready once the namespaces are listed, so that its admissions do not each wait on a read; a
 * selector added later is matched by such reads until they are listed.
 */
export function injectedSidecarReads(
  { injectedSidecars, logger, readinessChecks }: Pick<Context, 'injectedSidecars' | 'readinessChecks'> & { logger: Logger },
  namespaces: () => NamespaceListWatch,
): { settings?: () => InjectedSidecarSettings; readNamespaceLabels?: (namespace: string, timeoutMs: number) => Promise<Readonly<Record<string, string>>>; stop(): Promise<void> } {
  if (!injectedSidecars) return { stop: async () => {} };
  let labels: NamespaceLabels | undefined;
  const follow = (policy: InjectedSidecarPolicy) => {
    if (policyNeedsNamespaceLabels(policy) === (labels !== undefined)) return;
    if (labels) {
      void labels.stop();
      labels = undefined;
      return;
    }
    labels = new NamespaceLabels({ listWatch: namespaces(), logger });
    void labels.start();
  };
  follow(injectedSidecars.current());
  const atStart = labels;
  readinessChecks.push(() =>
    atStart && labels === atStart && !atStart.synced() ? { ready: false, reason: "the namespaces are not listed yet (the injected-sidecar policy's namespaceSelectors match their labels)" } : { ready: true },
  );
  injectedSidecars.onChange(follow);
  return {
    settings: () => ({ policy: injectedSidecars.current(), namespaceLabels: labels?.current() }),
    // Asked only while an entry has a namespaceSelector; a change of the policy in between leaves nothing to read.
    readNamespaceLabels: async (namespace, timeoutMs) => {
      if (!labels) throw new Error('the injected-sidecar policy no longer selects namespaces');
      return labels.read(namespace, timeoutMs);
    },
    stop: async () => labels?.stop(),
  };
}

/**
 * The webhook configurations: registered (--register-webhooks), or their caBundle kept in step
 * with certificates issued here. A mounted certificate's webhook reads none unless it registers
 * them (cert-manager's cainjector keeps their caBundle).
 */
function webhookConfigurations({ config, kubeConfig, namespace, logger }: Context, certificates: CertificateSource): { configure(): Promise<void>; trust: Trust } {
  const api = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const target = webhookTarget(config, namespace);
  const stored = { read: () => certificates.storedCaBundle() };
  return {
    async configure() {
      const { caBundle } = certificates.current();
      if (config.registerWebhooks) {
        await registerWebhookConfigurations(api, target, caBundle);
        logger.info({ name: target.name, via: target.url || `service ${namespace}/${target.serviceName}` }, 'webhook configurations registered');
        await registerFenceFor(api, config, namespace, logger);
      } else if (certificates.keepsCaBundle) {
        const patched = await syncCaBundles(api, target.name, caBundle, stored);
        logger.info({ name: target.name, patched }, 'caBundle of existing webhook configurations checked');
      }
      if (config.registerWebhooks || certificates.keepsCaBundle) await warnOfWebhooksWithoutMatchConditions(api, target.name, logger);
    },
    async trust(bundle) {
      const patched = await syncCaBundles(api, target.name, bundle.caBundle, stored);
      if (patched.length > 0) logger.info({ name: target.name, patched }, 'caBundle of the webhook configurations updated');
    },
  };
}

function webhookTarget(config: ServeConfig, namespace: string): WebhookTarget {
  return {
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
}

async function warnOfWebhooksWithoutMatchConditions(api: AdmissionregistrationV1Api, name: string, logger: PinoLogger): Promise<void> {
  const unmatched = await webhooksWithoutMatchConditions(api, name);
  if (unmatched.length === 0) return;
  logger.warn(
    { name, webhooks: unmatched },
    'the API server keeps no matchConditions on these webhooks (Kubernetes before 1.30 with the AdmissionWebhookMatchConditions feature gate off): every pod creation, Job and CronJob write of the served namespaces is sent to the webhook, as without them',
  );
}

/** The admission policies that fence both ServiceAccounts; an API server before 1.30 has none to offer. */
async function registerFenceFor(api: AdmissionregistrationV1Api, config: ServeConfig, namespace: string, logger: PinoLogger): Promise<void> {
  // Loaded on demand: only a replica that registers the webhook configurations registers the fence.
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
