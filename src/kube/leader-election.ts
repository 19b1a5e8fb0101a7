// Leader election on a coordination.k8s.io Lease, in the manner of client-go's: only the
// holder of an unexpired lease acts; it renews the lease every retry period and steps down
// when it could not renew within the renew deadline; a replica that stops gracefully gives
// the lease up so another takes over at once instead of after the lease duration, and so does a
// leader that cannot do its work (release), which then stands back for a while so that another
// replica can win.
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { isApiError } from './api-errors.ts';

export interface LeaderElectionOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  logger: Logger;
}

/** The API server wants MicroTime with exactly six fractional digits. */
const microTime = (date: Date) => date.toISOString().replace(/Z$/, '000Z') as unknown as Date;

export class LeaderElector {
  private readonly options: LeaderElectionOptions;
  private readonly api: CoordinationV1Api;
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  /** The tick under way, which release() waits for. */
  private ticking: Promise<void> = Promise.resolve();
  /** Until when (epoch ms) this replica does not campaign, after release(). */
  private standingBackUntil = 0;
  private lastRenewal = 0;
  /** The lease as last seen, and when this replica saw it change (clock skew between replicas does not matter). */
  private observed: { holder: string; renewTime: string; seenAt: number } | undefined;

  constructor(options: LeaderElectionOptions) {
    this.options = options;
    this.api = options.kubeConfig.makeApiClient(CoordinationV1Api);
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** Campaigns until stopped; calls `onStarted` on becoming leader and `onStopped` on losing it. */
  run(onStarted: () => void, onStopped: () => void): void {
    const tick = async () => {
      if (this.stopped) return;
      const standingBack = () => Date.now() < this.standingBackUntil;
      const acquired =
        !standingBack() &&
        (await this.tryAcquireOrRenew().catch((error: unknown) => {
          this.options.logger.warn({ err: error, lease: this.options.name }, 'lease update failed');
          return false;
        }));
      if (this.stopped) return;
      if (standingBack()) {
        // released meanwhile: not leading, whatever the request said
      } else if (acquired) {
        this.lastRenewal = Date.now();
        if (!this.leading) {
          this.leading = true;
          this.options.logger.info({ lease: this.options.name, identity: this.options.identity }, 'became leader');
          onStarted();
        }
      } else if (this.leading && Date.now() - this.lastRenewal > this.options.renewDeadlineMs) {
        this.leading = false;
        this.options.logger.warn({ lease: this.options.name }, 'lost leadership: the lease could not be renewed in time');
        onStopped();
      }
      this.timer = setTimeout(() => {
        this.ticking = tick();
      }, this.options.retryPeriodMs);
    };
    this.ticking = tick();
  }

  /**
   * Gives the lease up for another replica and stands back for `standBackMs` before campaigning
   * again (onStopped is not called: the caller knows). For a leader that cannot do its work.
   */
  async release(standBackMs: number): Promise<void> {
    this.standingBackUntil = Date.now() + standBackMs;
    await this.ticking;
    if (!this.leading) return;
    this.leading = false;
    await this.releaseLease();
  }

  /** Stops campaigning and, when leading, releases the lease for the next replica. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (!this.leading) return;
    this.leading = false;
    await this.releaseLease();
  }

  /** Writes the lease as held by nobody and expiring at once, unless another replica holds it now. */
  private async releaseLease(): Promise<void> {
    try {
      const lease = await this.read();
      if (lease?.spec?.holderIdentity !== this.options.identity) return;
      lease.spec.holderIdentity = '';
      lease.spec.leaseDurationSeconds = 1;
      lease.spec.renewTime = microTime(new Date());
      await this.api.replaceNamespacedLease({ name: this.options.name, namespace: this.options.namespace, body: lease });
      this.options.logger.info({ lease: this.options.name }, 'lease released');
    } catch (error) {
      this.options.logger.warn({ err: error, lease: this.options.name }, 'could not release the lease; it expires by itself');
    }
  }

  private async read(): Promise<V1Lease | undefined> {
    try {
      return await this.api.readNamespacedLease({ name: this.options.name, namespace: this.options.namespace });
    } catch (error) {
      if (isApiError(error, 404)) return undefined;
      throw error;
    }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { name, namespace, identity, leaseDurationMs } = this.options;
    const now = new Date();
    const spec = {
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
      acquireTime: microTime(now),
      renewTime: microTime(now),
    };
    const lease = await this.read();
    if (!lease) {
      try {
        await this.api.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec: { ...spec, leaseTransitions: 0 } } });
        return true;
      } catch (error) {
        if (isApiError(error, 409)) return false;
        throw error;
      }
    }

    const holder = lease.spec?.holderIdentity ?? '';
    const renewTime = String(lease.spec?.renewTime ?? '');
    if (!this.observed || this.observed.holder !== holder || this.observed.renewTime !== renewTime) {
      this.observed = { holder, renewTime, seenAt: Date.now() };
    }
    const heldByOther = holder !== '' && holder !== identity;
    const expired = Date.now() > this.observed.seenAt + (lease.spec?.leaseDurationSeconds ?? 0) * 1000;
    if (heldByOther && !expired) return false;

    lease.spec = {
      ...spec,
      acquireTime: holder === identity && lease.spec?.acquireTime ? microTime(new Date(lease.spec.acquireTime)) : spec.acquireTime,
      leaseTransitions: (lease.spec?.leaseTransitions ?? 0) + (holder === identity ? 0 : 1),
    };
    try {
      await this.api.replaceNamespacedLease({ name, namespace, body: lease });
      return true;
    } catch (error) {
      if (isApiError(error, 409)) return false;
      throw error;
    }
  }
}
