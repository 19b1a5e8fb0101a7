// Events on the pods the watcher acts on, each with its code (src/policy/codes.ts) in the
// `action` field, where kubectl and `status` read it. One event per pod and key (by default its
// reason and message): a reconcile that runs again does not repeat it, nor does a restarted
// watcher (the event's name is derived from the key).
import { createHash, randomBytes } from 'node:crypto';
import type { CoreV1Api, V1ObjectReference, V1Pod } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import { eventBody, type EventType } from '../kube/events.ts';
import type { Code } from '../policy/index.ts';

export interface EventOnPod {
  type: EventType;
  reason: string;
  code: Code;
  message: string;
  /** What makes two events the same one; the reason and message when unset. */
  key?: string;
  /** The object the event is also about (the ContainerRecreateRequest a stop creates). */
  related?: V1ObjectReference;
}

export class EventRecorder {
  private readonly core: CoreV1Api;

  constructor(core: CoreV1Api) {
    this.core = core;
  }

  /**
   * Records the event unless one with the same key exists for this pod. `sent` holds the ids of
   * the pod's events recorded already: the caller keeps it for as long as it keeps the pod, so the
   * recorder itself holds nothing per pod. True when this call created it: callers count it in
   * their metrics then.
   */
  async record(pod: V1Pod, event: EventOnPod, sent: Set<string>): Promise<boolean> {
    const { type, reason, code, message, key = `${reason}\n${message}`, related } = event;
    const namespace = pod.metadata!.namespace!;
    const uid = pod.metadata?.uid ?? '';
    const id = createHash('sha256').update(`${uid}\n${key}`).digest('hex').slice(0, 16);
    if (sent.has(id)) return false;
    let created = true;
    try {
      const involvedObject = { kind: 'Pod', apiVersion: 'v1', namespace, name: pod.metadata!.name, uid: pod.metadata!.uid };
      const body = eventBody(`${pod.metadata!.name}.${id}`, involvedObject, type, reason, message, { action: code, ...(related ? { related } : {}) });
      await this.core.createNamespacedEvent({ namespace, body });
    } catch (error) {
      if (!isApiError(error, 409)) throw error;
      created = false;
    }
    sent.add(id);
    return created;
  }

  /**
   * A Normal event on the watcher's own Lease (the kill mechanism followed the cluster): each one
   * is news, so none is kept back, and each has a name of its own (two in one millisecond too).
   */
  async recordOnLease(lease: { namespace: string; name: string }, reason: string, message: string): Promise<void> {
    const involvedObject = { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', ...lease };
    const name = `${lease.name}.${Date.now().toString(16)}${randomBytes(4).toString('hex')}`;
    await this.core.createNamespacedEvent({ namespace: lease.namespace, body: eventBody(name, involvedObject, 'Normal', reason, message) });
  }
}
