// Leader election on a coordination.k8s.io Lease, in the manner of client-go's: only the
// holder of an unexpired lease acts; it renews the lease every retry period (jittered) and steps
// down when it could not renew within the renew deadline; a replica that stops gracefully gives
// the lease up so another takes over at once instead of after the lease duration, and so does a
// leader that cannot do its work (release), which then stands back for a while so that another
// replica can win.
//
// It cannot split: every Lease call is bounded (callTimeoutMs, well inside the renew deadline),
// and the leader's term ends on a timer at the renew deadline counted from the moment its last
// successful renewal was sent, whatever a call in progress does. Another replica takes over only
// after it has seen the lease unchanged for the lease duration, which is longer: from the time
// the renewal was written, at the earliest. So a leader that cannot renew (its network gone, the
// API server slow) stops acting at least leaseDuration - renewDeadline before anyone else may
// start (onStopped; the serve lifecycle then ends the term's requests, src/kube/fenced-client.ts).
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { isApiError } from './api-errors.ts';
import { withRequestSignal } from './client.ts';

export interface LeaderElectionOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** How long one Lease call may take; default: the retry period or a quarter of the renew deadline, the shorter. */
  callTimeoutMs?: number;
  logger: Logger;
}

/** Each wait between two attempts is the retry period plus up to this fraction of it, at random, so replicas do not move in step. */
const JITTER = 0.2;

/** The API server wants MicroTime with exactly six fractional digits. */
const microTime = (date: Date) => date.toISOString().replace(/Z$/, '000Z') as unknown as Date;

export class LeaderElector {
  private readonly options: LeaderElectionOptions;
  private readonly api: CoordinationV1Api;
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  /** Ends the term at the renew deadline unless a renewal moves it on. */
  private deadlineTimer: NodeJS.Timeout | undefined;
  /** Until when (epoch ms) this replica may act: the renew deadline after its last successful renewal was sent. */
  private leadingUntil = 0;
  /** The tick under way, which release() waits for. */
  private ticking: Promise<void> = Promise.resolve();
  /** Until when (epoch ms) this replica does not campaign, after release(). */
  private standingBackUntil = 0;
  /** The lease as last seen, and when this replica saw it change (clock skew between replicas does not matter). */
  private observed: { holder: string; renewTime: string; seenAt: number } | undefined;

  constructor(options: LeaderElectionOptions) {
    this.options = options;
    const callTimeoutMs = Math.ceil(options.callTimeoutMs ?? Math.min(options.retryPeriodMs, options.renewDeadlineMs / 4));
    this.api = withRequestSignal(options.kubeConfig, () => AbortSignal.timeout(callTimeoutMs)).makeApiClient(CoordinationV1Api);
  }

  isLeader(): boolean {
    return this.leading && Date.now() < this.leadingUntil;
  }

  /** Campaigns until stopped; calls `onStarted` on becoming leader and `onStopped` on losing it. */
  run(onStarted: () => void, onStopped: () => void): void {
    const tick = async () => {
      if (this.stopped) return;
      const standingBack = () => Date.now() < this.standingBackUntil;
      // The lease is written after this moment, if at all: the term is counted from here.
      const sentAt = Date.now();
      const acquired =
        !standingBack() &&
        (await this.tryAcquireOrRenew().catch((error: unknown) => {
          this.options.logger.warn({ err: error, lease: this.options.name }, 'lease update failed');
          return false;
        }));
      if (this.stopped) return;
      if (standingBack()) {
        // released meanwhile: not leading, whatever the request said
      } else if (acquired && sentAt + this.options.renewDeadlineMs > Date.now()) {
        this.leadingUntil = Math.max(this.leadingUntil, sentAt + this.options.renewDeadlineMs);
        this.endTermAtDeadline(onStopped);
        if (!this.leading) {
          this.leading = true;
          this.options.logger.info({ lease: this.options.name, identity: this.options.identity, leadingUntil: new Date(this.leadingUntil).toISOString() }, 'became leader');
          onStarted();
        }
      }
      // A failed renewal changes nothing here: the deadline timer ends the term in time.
      this.timer = setTimeout(() => {
        this.ticking = tick();
      }, this.options.retryPeriodMs * (1 + JITTER * Math.random()));
    };
    this.ticking = tick();
  }

  /** (Re)arms the timer that ends the term at leadingUntil. */
  private endTermAtDeadline(onStopped: () => void): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(() => {
      if (!this.leading) return;
      // Timers run on the event loop's clock, which can be a millisecond behind Date.now(): a timer
      // that fires just before the deadline is armed again, or the term would never end.
      if (Date.now() < this.leadingUntil) return this.endTermAtDeadline(onStopped);
      this.leading = false;
      this.options.logger.warn(
        { lease: this.options.name, renewDeadlineMs: this.options.renewDeadlineMs },
        'lost leadership: the lease could not be renewed within the renew deadline; stopping before another replica may take over',
      );
      onStopped();
    }, this.leadingUntil - Date.now());
  }

  /**
   * Gives the lease up for another replica and stands back for `standBackMs` before campaigning
   * again (onStopped is not called: the caller knows). For a leader that cannot do its work.
   */
  async release(standBackMs: number): Promise<void> {
    this.standingBackUntil = Date.now() + standBackMs;
    await this.ticking;
    clearTimeout(this.deadlineTimer);
    if (!this.leading) return;
    this.leading = false;
    await this.releaseLease();
  }

  /** Stops campaigning and, when leading, releases the lease for the next replica. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.deadlineTimer);
    const leading = this.isLeader();
    this.leading = false;
    if (leading) await this.releaseLease();
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
