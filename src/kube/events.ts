// The core/v1 Events the add-on writes, on pods (the watcher) and on the owners of admitted
// objects (the webhook): one shape, one source name, one reporting instance per process.
import type { CoreV1Event, V1ObjectReference } from '@kubernetes/client-node';
import { COMPONENT } from '../policy/index.ts';

export type EventType = 'Normal' | 'Warning';

/** What an event may carry besides its reason and message: a machine-readable `action` (the watcher's codes), a `related` object. */
export interface EventDetails {
  action?: string;
  related?: V1ObjectReference;
}

/** A new Event named `name` about `involvedObject`, in that object's namespace. */
export function eventBody(name: string, involvedObject: V1ObjectReference & { namespace: string }, type: EventType, reason: string, message: string, details: EventDetails = {}): CoreV1Event {
  const now = new Date();
  return {
    metadata: { name, namespace: involvedObject.namespace },
    involvedObject,
    type,
    reason,
    message,
    ...(details.action ? { action: details.action } : {}),
    ...(details.related ? { related: details.related } : {}),
    source: { component: COMPONENT },
    reportingComponent: COMPONENT,
    reportingInstance: process.env.HOSTNAME ?? COMPONENT,
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
}
