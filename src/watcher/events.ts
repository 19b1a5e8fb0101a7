// Events on the pods the watcher acts on. One event per pod, reason and message: a reconcile
// that runs again does not repeat it.
import { createHash } from 'node:crypto';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import { eventBody, type EventType } from '../kube/events.ts';

export { COMPONENT, type EventType } from '../kube/events.ts';

export class EventRecorder {
  private readonly core: CoreV1Api;
  /** Event ids already recorded, by pod uid; the deterministic name also dedupes across restarts. */
  private readonly sent = new Map<string, Set<string>>();

  constructor(core: CoreV1Api) {
    this.core = core;
  }

  /** `oncePerPod`: at most one event of this reason per pod, whatever its message (the first one stays). */
  async record(pod: V1Pod, type: EventType, reason: string, message: string, options: { oncePerPod?: boolean } = {}): Promise<void> {
    const namespace = pod.metadata!.namespace!;
    const uid = pod.metadata?.uid ?? '';
    const id = createHash('sha256').update(options.oncePerPod ? `${uid}\n${reason}` : `${uid}\n${reason}\n${message}`).digest('hex').slice(0, 16);
    if (this.sent.get(uid)?.has(id)) return;
    try {
      const involvedObject = { kind: 'Pod', apiVersion: 'v1', namespace, name: pod.metadata!.name, uid: pod.metadata!.uid };
      await this.core.createNamespacedEvent({ namespace, body: eventBody(`${pod.metadata!.name}.${id}`, involvedObject, type, reason, message) });
    } catch (error) {
      if (!isApiError(error, 409)) throw error;
    }
    this.sent.set(uid, (this.sent.get(uid) ?? new Set()).add(id));
  }

  /** Forgets a pod once it leaves the watch, so memory follows the managed pods. */
  forget(uid: string): void {
    this.sent.delete(uid);
  }
}
