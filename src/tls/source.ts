// The webhook's serving certificate behind one interface, wherever it comes from: files issued
// and renewed outside the add-on (mounted.ts, cert-manager's Secret), or certificates issued,
// stored and renewed here (rotator.ts). serve chooses the source from its flags, once.
import type { SecureContextOptions } from 'node:tls';
import type { Logger } from '../logger.ts';
import { UsageError } from '../usage-error.ts';
import { isServingCertificateValid, type CertificateBundle } from './certificates.ts';
import { mountedCertificate } from './mounted.ts';
import { createRotator, describeCertificate, type RotatorOptions } from './rotator.ts';
import { secureContextOptions } from './secure-context.ts';

/** What a renewed certificate is swapped into: the webhook's HTTPS server. */
export interface SecureServer {
  setSecureContext(options: SecureContextOptions): void;
}

/** Makes the API server trust the CAs of a bundle before it is served (the webhook configurations' caBundle). */
export type Trust = (bundle: CertificateBundle) => Promise<void>;

export interface CertificateSource {
  /** Where the certificate comes from, for logs. */
  readonly description: string;
  /** Whether this process keeps the webhook configurations' caBundle: it does for certificates issued here; cert-manager's cainjector does for mounted ones. */
  readonly keepsCaBundle: boolean;
  /** Reads the certificate to serve first, issuing it when due; throws when there is none to serve. */
  start(): Promise<CertificateBundle>;
  /** The certificate served now. */
  current(): CertificateBundle;
  /** Ready while the served certificate is valid. */
  ready(): { ready: boolean; reason?: string };
  /** The CAs stored now, read afresh (another replica may have renewed since): what a caBundle must keep trusting. */
  storedCaBundle(): Promise<string | undefined>;
  /**
   * From now on, every check interval: a source that keeps the caBundle has `trust` make the API
   * server trust what it checked (at every check, so a caBundle changed by hand is put right),
   * then a changed certificate is swapped into `server`.
   */
  serveRenewals(server: SecureServer, trust: Trust): void;
  /** Stops the checks, waiting for a running one to finish. */
  stop(): Promise<void>;
}

/** The certificate a source serves: set at start, swapped at each renewal. */
function servedCertificate(logger: Pick<Logger, 'info'>) {
  let served: CertificateBundle | undefined;
  const current = () => {
    if (!served) throw new Error('no certificate is served before the source has started');
    return served;
  };
  return {
    first: (bundle: CertificateBundle) => (served = bundle),
    current,
    ready: () => (isServingCertificateValid(current(), new Date()) ? { ready: true } : { ready: false, reason: 'the serving certificate is not valid now' }),
    /** Serves `bundle` on `server` unless it is already served. */
    swap(server: SecureServer, bundle: CertificateBundle) {
      if (bundle.cert === current().cert) return;
      server.setSecureContext(secureContextOptions(bundle));
      served = bundle;
      logger.info(describeCertificate(bundle), 'serving the renewed certificate');
    },
  };
}

/** Files in `dir` that someone else issues and renews; `caRequired` when the configurations are registered with the CA of ca.crt. */
export function mountedSource(dir: string, options: { checkIntervalMs: number; caRequired: boolean; logger: Pick<Logger, 'info' | 'warn'> }): CertificateSource {
  const mounted = mountedCertificate(dir, options);
  const served = servedCertificate(options.logger);
  return {
    description: mounted.description,
    keepsCaBundle: false,
    async start() {
      const bundle = await mounted.load();
      if (options.caRequired && !bundle.caBundle) throw new UsageError(`--tls-cert-dir ${dir}: --register-webhooks needs the CA to trust in ca.crt there`);
      return served.first(bundle);
    },
    current: served.current,
    ready: served.ready,
    storedCaBundle: () => Promise.resolve(served.current().caBundle),
    serveRenewals: (server) => mounted.watch((bundle) => served.swap(server, bundle)),
    stop() {
      mounted.stop();
      return Promise.resolve();
    },
  };
}

/** Certificates issued here, kept in `options.store` and renewed before they expire. */
export function issuedSource(options: RotatorOptions): CertificateSource {
  const rotator = createRotator(options);
  const served = servedCertificate(options.logger);
  return {
    description: options.store.description,
    keepsCaBundle: true,
    start: async () => served.first(await rotator.ensure()),
    current: served.current,
    ready: served.ready,
    storedCaBundle: async () => (await options.store.load())?.bundle.caBundle,
    serveRenewals(server, trust) {
      rotator.watch(async (bundle) => {
        // The API server must trust a new CA before any replica serves a certificate it signed.
        await trust(bundle);
        served.swap(server, bundle);
      });
    },
    stop: () => rotator.stop(),
  };
}
