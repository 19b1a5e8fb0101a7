// Keeps the stored certificates valid and hands them to the server. Every check re-reads the
// store (so a renewal by another replica is picked up), renews what the plan says, and passes
// the result to `apply`, which makes the world match it (idempotent, so a failed apply is
// simply retried at the next check).
import { X509Certificate } from 'node:crypto';
import type { Logger } from '../logger.ts';
import { issueServing, issueWithNewCa, planRenewal, type CertificateBundle } from './certificates.ts';
import type { CertificateStore } from './store.ts';

export interface RotatorOptions {
  store: CertificateStore;
  /** Names of the serving certificate. */
  hosts: string[];
  validityMs: number;
  renewBeforeMs: number;
  checkIntervalMs: number;
  logger: Pick<Logger, 'info' | 'warn'>;
  now?: () => Date;
}

export interface CertificateRotator {
  /** Loads the stored certificates, renews them when due, and returns what is now stored. */
  ensure(): Promise<CertificateBundle>;
  /** From now on, every check interval: ensure(), then apply(bundle). */
  watch(apply: (bundle: CertificateBundle) => Promise<void>): void;
  /** Stops the periodic checks, waiting for a running one to finish. */
  stop(): Promise<void>;
}

export function createRotator(options: RotatorOptions): CertificateRotator {
  const now = options.now ?? (() => new Date());
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;

  async function ensure(): Promise<CertificateBundle> {
    const stored = await options.store.load();
    const issue = { hosts: options.hosts, validityMs: options.validityMs, now: now() };
    const plan = planRenewal(stored?.bundle, { ...issue, renewBeforeMs: options.renewBeforeMs });
    if (plan.action === 'keep') return stored!.bundle;

    const fresh = plan.action === 'new-ca' ? await issueWithNewCa(issue, stored?.bundle) : await issueServing(stored!.bundle, issue);
    const saved = await options.store.save(fresh, stored);
    if (saved.bundle === fresh) {
      options.logger.info({ reason: plan.reason, ...describeCertificate(fresh), store: options.store.description }, plan.action === 'new-ca' ? 'issued a new CA and serving certificate' : 'renewed the serving certificate');
    } else {
      options.logger.info({ store: options.store.description }, 'another replica renewed the certificates first; using theirs');
    }
    return saved.bundle;
  }

  async function check(apply: (bundle: CertificateBundle) => Promise<void>): Promise<void> {
    try {
      await apply(await ensure());
    } catch (err) {
      options.logger.warn({ err, store: options.store.description }, 'certificate check failed; retrying at the next check');
    }
  }

  return {
    ensure,
    watch(apply) {
      const schedule = () => {
        timer = setTimeout(() => {
          running = check(apply).finally(() => {
            running = undefined;
            if (!stopped) schedule();
          });
        }, options.checkIntervalMs);
      };
      schedule();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

/** Loggable facts about a bundle's serving certificate (never key material). */
export function describeCertificate(bundle: CertificateBundle): { serial: string; notAfter: string } {
  const served = new X509Certificate(bundle.cert);
  return { serial: served.serialNumber, notAfter: served.validToDate.toISOString() };
}
