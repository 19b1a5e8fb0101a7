// Events on the pods the watcher acts on. One event per pod and key (by default its reason and
// message): a reconcile that runs again does not repeat it, nor does a restarted watcher (the
// event's name is derived from the key).
import { createHash } from 'node:crypto';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import { eventBody, type EventType } from '../kube/events.ts';

export { COMPONENT, type EventType } from '../kube/events.ts';

/** The object an event is about: a pod, or the watcher's Lease. */
export interface InvolvedObject {
  kind: string;
  apiVersion: string;
  namespace: string;
  name: string;
  uid?: string;
}

/** Normal, on the watcher's Lease: the kill mechanism followed the cluster (--kill-mechanism auto). */
export const KILL_MECHANISM_CHANGED = 'KillMechanismChanged';

export class EventRecorder {
  private readonly core: CoreV1Api;

  constructor(core: CoreV1Api) {
    this.core = core;
  }

  /**
   * Records the event unless one with the same key exists for this pod; `key` defaults to the
   * reason and message. `sent` holds the ids of the pod's events recorded already: the caller
   * keeps it for as long as it keeps the pod, so the recorder itself holds nothing per pod.
   * True when this call created it: callers count it in their metrics then.
   */
  async record(pod: V1Pod, type: EventType, reason: string, message: string, sent: Set<string>, key = `${reason}\n${message}`): Promise<boolean> {
    const involvedObject = { kind: 'Pod', apiVersion: 'v1', namespace: pod.metadata!.namespace!, name: pod.metadata!.name!, uid: pod.metadata?.uid ?? '' };
    return this.recordOn(involvedObject, type, reason, message, sent, key);
  }

  /** The same, about any object of a namespace (the watcher's Lease). */
  async recordOn(involvedObject: InvolvedObject, type: EventType, reason: string, message: string, sent: Set<string>, key = `${reason}\n${message}`): Promise<boolean> {
    const { namespace, name, uid = '' } = involvedObject;
    const id = createHash('sha256').update(`${uid}\n${key}`).digest('hex').slice(0, 16);
    if (sent.has(id)) return false;
    let created = true;
    try {
      await this.core.createNamespacedEvent({ namespace, body: eventBody(`${name}.${id}`, involvedObject, type, reason, message) });
    } catch (error) {
      if (!isApiError(error, 409)) throw error;
      created = false;
    }
    sent.add(id);
    return created;
  }
}
