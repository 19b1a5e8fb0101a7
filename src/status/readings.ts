// Small readings of the objects status is told from: times as it shows them, an event's code,
// a container's finish.
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { isCode, type Code } from '../policy/index.ts';

/** The code of an event the watcher wrote; undefined for one without (an earlier version's). */
export function eventCode(event: CoreV1Event | undefined): Code | undefined {
  return isCode(event?.action) ? event.action : undefined;
}

export function eventTime(event: CoreV1Event | undefined): string | undefined {
  const time = event?.lastTimestamp ?? event?.eventTime ?? event?.firstTimestamp ?? event?.metadata?.creationTimestamp;
  return time ? iso(time) : undefined;
}

export function sortByTime(events: CoreV1Event[]): CoreV1Event[] {
  return [...events].sort((a, b) => (eventTime(a) ?? '').localeCompare(eventTime(b) ?? ''));
}

/** A time as status shows it; client-node gives Dates, a parsed JSON gives strings. */
export function iso(time: Date | string | undefined): string {
  // Kubernetes times have whole seconds.
  return time === undefined ? '?' : new Date(time).toISOString().replace('.000Z', 'Z');
}

export function finishedAt(pod: V1Pod, container: string): string | undefined {
  const time = pod.status?.containerStatuses?.find((s) => s.name === container)?.state?.terminated?.finishedAt;
  return time ? iso(time) : undefined;
}

export function latest(times: Array<string | undefined>): string | undefined {
  return times.filter((t): t is string => t !== undefined).sort().at(-1);
}

/** A field of the story only when it has a value: an empty string counts as none. */
export function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined || value === '' ? {} : { [key]: value }) as { [P in K]?: V };
}
