// Events on the controller of an object admitted despite configuration errors (a Job for its
// pods, a CronJob for its Jobs): the owner is what a person looks at and what holds the template
// to fix. Best-effort and bounded: the write starts after the admission answer is decided, never
// delays or fails it, gives up after a timeout, and is dropped when too many are under way.
// One event per owner and problem: a deterministic name dedupes across replicas and restarts
// (the API server answers 409), a memory of recent ones saves even that call, so a CronJob that
// runs every minute, or a Job with a hundred pods, makes one event, not one per object.
//
// Anyone who reaches the webhook port can post an AdmissionReview, so what a review says about
// the owner is a claim: the event is written only about an owner read from the API server (a
// Job or CronJob of that name and uid in that namespace, which the webhook serves), with the
// owner as read, and with a message of the policy's words alone (docs/security.md).
import { createHash } from 'node:crypto';
import { Observable } from '@kubernetes/client-node';
import type { BatchV1Api, ConfigurationOptions, CoreV1Api, V1ObjectMeta } from '@kubernetes/client-node';
import { Counter, type Registry } from 'prom-client';
import { OWNER_EVENT_REASON, clip, type ControllerReference } from '../policy/index.ts';
import { isApiError } from '../kube/api-errors.ts';
import { eventBody } from '../kube/events.ts';
import type { OwnerNotice } from './admission.ts';

export const OWNER_EVENT_RESULTS = ['created', 'duplicate', 'dropped', 'unverified', 'error'] as const;
export type OwnerEventResult = (typeof OWNER_EVENT_RESULTS)[number];

/** core/v1 Events take long messages, but kubectl describe and dashboards show a screenful. */
const MAX_MESSAGE_CHARACTERS = 2048;

/** The owners whose events are written: the kinds whose objects the add-on validates, read by name and matched by uid. */
const isVerifiable = (owner: ControllerReference) => owner.apiVersion === 'batch/v1' && (owner.kind === 'Job' || owner.kind === 'CronJob');

export function ownerEventMessage(notice: OwnerNotice): string {
  const count = notice.errorCount === 1 ? '1 sidecar configuration error' : `${notice.errorCount} sidecar configuration errors`;
  const message =
    `A ${notice.kind} created by this ${notice.owner.kind} was admitted with ${count}, which would deny a pod template or a bare pod: ${notice.errors.join('; ')}. ` +
    `It was not denied because this ${notice.owner.kind} created it (a denial would only make it retry); its sidecars are handled as OpenKruise handles them. ` +
    'Fix the pod template it was created from.';
  return message.length <= MAX_MESSAGE_CHARACTERS ? message : `${message.slice(0, MAX_MESSAGE_CHARACTERS - 3)}...`;
}

export interface OwnerEventRecorderOptions {
  core: Pick<CoreV1Api, 'createNamespacedEvent'>;
  /** Reads the owner before its event is written. */
  batch: Pick<BatchV1Api, 'readNamespacedJob' | 'readNamespacedCronJob'>;
  /** Namespaces the webhooks never serve (kube-system, the add-on's own, ...): no review from there is the API server's. */
  excludedNamespaces?: readonly string[];
  logger: { warn(object: object, message: string): void };
  metrics?: Registry;
  /** A write not answered within this is abandoned. */
  timeoutMs?: number;
  /** Writes under way at once; more are dropped (counted), so a burst of pods cannot pile up requests. */
  maxInFlight?: number;
  /** How long an event written is remembered, so the same one is not even attempted again. */
  rememberMs?: number;
  maxRemembered?: number;
  /**
   * Writes per second over time, with bursts of `burst`; more are dropped (counted). Anyone who
   * reaches the webhook port can post an AdmissionReview, so this caps the reads and events such
   * a caller can make the webhook do; the API server's own requests stay far below it.
   */
  ratePerSecond?: number;
  burst?: number;
}

export class OwnerEventRecorder {
  private readonly options: Required<Omit<OwnerEventRecorderOptions, 'metrics'>>;
  private readonly results: Counter<'result'>;
  /** Event name -> when it may be written again; insertion order is age order. */
  private readonly remembered = new Map<string, number>();
  private readonly inFlight = new Set<Promise<void>>();
  private tokens: number;
  private tokensAt = Date.now();

  constructor(options: OwnerEventRecorderOptions) {
    this.options = { excludedNamespaces: [], timeoutMs: 5000, maxInFlight: 8, rememberMs: 60 * 60 * 1000, maxRemembered: 4096, ratePerSecond: 1, burst: 30, ...options };
    this.tokens = this.options.burst;
    this.results = new Counter({
      name: 'sidecar_terminator_admission_owner_events_total',
      help: 'Events about sidecar configuration errors on the controller of an object admitted anyway, by result (created, duplicate, dropped: too many at once or too fast, names the API server refuses, or a namespace the webhooks do not serve; unverified: an owner that is not a batch/v1 Job or CronJob, such as an operator or a workflow engine, or no Job or CronJob of that name and uid; error).',
      labelNames: ['result'] as const,
      registers: options.metrics ? [options.metrics] : [],
    });
    for (const result of OWNER_EVENT_RESULTS) this.results.inc({ result }, 0);
  }

  /** Starts writing the event in the background and returns at once; never throws. */
  record(notice: OwnerNotice): void {
    const name = eventName(notice);
    const now = Date.now();
    this.forgetExpired(now);
    if ((this.remembered.get(name) ?? 0) > now) return this.count('duplicate');
    // Names the API server would refuse, and namespaces it never sends: only a caller other than the API server sends them.
    if (!isNamespaceName(notice.namespace) || !isObjectName(notice.owner.name) || this.options.excludedNamespaces.includes(notice.namespace)) return this.count('dropped');
    if (!isVerifiable(notice.owner)) return this.count('unverified');
    if (this.inFlight.size >= this.options.maxInFlight || !this.takeToken(now)) return this.count('dropped');
    // Remembered whatever the owner turns out to be, so a repeated claim is not read again.
    this.remember(name, now);
    // After the current turn, so the admission answer goes out first.
    const write = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.write(notice, name))
      .finally(() => this.inFlight.delete(write));
    this.inFlight.add(write);
  }

  /** Settles once the writes under way are done. */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private async write(notice: OwnerNotice, name: string): Promise<void> {
    const { namespace, owner } = notice;
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    try {
      const read = await this.readOwner(notice, signal);
      if (read?.uid !== owner.uid) return this.count('unverified');
      // The owner as the API server has it, not as the review named it.
      const involvedObject = { apiVersion: owner.apiVersion, kind: owner.kind, name: read.name, uid: read.uid, namespace };
      const message = ownerEventMessage(notice);
      await this.options.core.createNamespacedEvent({ namespace, body: eventBody(name, involvedObject, 'Warning', OWNER_EVENT_REASON, message) }, abortingOn(signal));
      this.count('created');
    } catch (error) {
      if (isApiError(error, 409)) return this.count('duplicate');
      // Written again by the next object that has the problem.
      this.remembered.delete(name);
      this.count('error');
      this.options.logger.warn({ namespace, owner: clip(`${owner.kind}/${owner.name}`), event: name, error: this.describe(error, signal) }, 'could not record the configuration event on the owner');
    }
  }

  /** The owner's name and uid as stored, or undefined when there is no such object. */
  private async readOwner({ namespace, owner }: OwnerNotice, signal: AbortSignal): Promise<{ name: string; uid: string } | undefined> {
    const target = { namespace, name: owner.name };
    const { batch } = this.options;
    let metadata: V1ObjectMeta | undefined;
    try {
      metadata = (owner.kind === 'Job' ? await batch.readNamespacedJob(target, abortingOn(signal)) : await batch.readNamespacedCronJob(target, abortingOn(signal))).metadata;
    } catch (error) {
      if (isApiError(error, 404)) return undefined;
      throw error;
    }
    return metadata?.name && metadata.uid ? { name: metadata.name, uid: metadata.uid } : undefined;
  }

  /** The error in a few words: an API error's body can quote the whole event. */
  private describe(error: unknown, signal: AbortSignal): string {
    if (signal.aborted) return `no answer within ${this.options.timeoutMs} ms`;
    const code = (error as { code?: unknown } | null)?.code;
    return clip(typeof code === 'number' ? `the API server answered ${code}` : error instanceof Error ? error.message : String(error));
  }

  /** A token bucket: `burst` writes at once, refilled at `ratePerSecond`. */
  private takeToken(now: number): boolean {
    this.tokens = Math.min(this.options.burst, this.tokens + ((now - this.tokensAt) / 1000) * this.options.ratePerSecond);
    this.tokensAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  private remember(name: string, now: number): void {
    this.remembered.delete(name);
    this.remembered.set(name, now + this.options.rememberMs);
    if (this.remembered.size > this.options.maxRemembered) this.remembered.delete(this.remembered.keys().next().value!);
  }

  private forgetExpired(now: number): void {
    for (const [name, until] of this.remembered) {
      if (until > now) break;
      this.remembered.delete(name);
    }
  }

  private count(result: OwnerEventResult): void {
    this.results.inc({ result });
  }
}

function isNamespaceName(name: string): boolean {
  return name.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name);
}

/** A DNS subdomain, as the names of Jobs, CronJobs and Events are. */
function isObjectName(name: string): boolean {
  return name.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name);
}

/** Request options that abort the request on `signal` (the object API takes observable middleware). */
function abortingOn(signal: AbortSignal): ConfigurationOptions {
  return {
    middleware: [
      {
        pre: (context) => (context.setSignal(signal), new Observable(Promise.resolve(context))),
        post: (context) => new Observable(Promise.resolve(context)),
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}

/**
 * `<owner>.<hash of the owner and the errors>`: the same problem on the same owner is one event.
 * Every part of the claim is in it, so that a claim that fails verification is remembered apart
 * from the true one and cannot hold back its event.
 */
function eventName(notice: OwnerNotice): string {
  const { namespace, owner, errors } = notice;
  const id = createHash('sha256').update([namespace, owner.apiVersion, owner.kind, owner.uid, ...errors].join('\n')).digest('hex').slice(0, 16);
  return `${notice.owner.name.slice(0, 253 - id.length - 1)}.${id}`;
}
