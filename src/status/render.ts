// How status prints: a table of pods (text, wide), one pod's story as prose, or either as JSON
// or YAML for scripts.
import { stringify } from 'yaml';
import { MANAGED_LABEL, POD_ANNOTATIONS } from '../policy/index.ts';
import type { StatusOutput } from './flags.ts';
import type { PodStory, StopMeans } from './story-types.ts';

export interface PodList {
  items: PodStory[];
  /** What could not be read, as missing permissions, once each. */
  limits: string[];
}

const LAST_EVENT_WIDTH = 80;

export function renderList(list: PodList, output: StatusOutput, now: Date, showNamespace: boolean): string {
  if (output === 'json') return `${JSON.stringify(list, null, 2)}\n`;
  if (output === 'yaml') return stringify(list);
  const wide = output === 'wide';
  const header = [
    ...(showNamespace ? ['NAMESPACE'] : []),
    'POD', 'JOB', 'NODE', 'MECHANISM', 'STATE', 'SINCE', 'LAST EVENT',
    ...(wide ? ['NODE NAME', 'SIDECARS', 'WAITING FOR'] : []),
  ];
  const rows = list.items.map((story) => [
    ...(showNamespace ? [story.namespace] : []),
    story.pod,
    story.job ?? '-',
    story.nodeKind,
    story.mechanism,
    story.state,
    story.since ? age(story.since, now) : '-',
    story.lastEvent ? clip(story.lastEvent.message, wide ? Infinity : LAST_EVENT_WIDTH) : '-',
    ...(wide ? [story.node ?? '-', story.containers.filter((c) => c.role === 'sidecar').map((c) => c.name).join(',') || '-', story.waitingFor ?? '-'] : []),
  ]);
  return table([header, ...rows]);
}

export function renderStory(story: PodStory, output: StatusOutput, now: Date): string {
  if (output === 'json') return `${JSON.stringify(story, null, 2)}\n`;
  if (output === 'yaml') return stringify(story);
  const lines: string[] = [];
  const field = (name: string, value: string) => lines.push(`${`${name}:`.padEnd(13)}${value}`);
  field('Pod', `${story.namespace}/${story.pod}`);
  if (story.job) field('Job', story.job);
  field('Node', story.node ? `${story.node} (${story.nodeKind})` : 'not scheduled yet');
  field('Managed', story.managed ? `yes (label ${MANAGED_LABEL}=${story.managed})` : `no (no ${MANAGED_LABEL} label)`);
  field('State', `${story.state}${story.since ? ` since ${story.since} (${age(story.since, now)} ago)` : ''}`);
  field('Trigger', story.trigger);
  if (story.injectedSidecarPolicy) field('Policy', policyText(story.injectedSidecarPolicy));
  lines.push('', 'Containers:');
  const width = Math.max(...story.containers.map((c) => c.name.length));
  for (const container of story.containers) {
    lines.push(`  ${container.name.padEnd(width)}  ${container.role.padEnd(7)}  ${container.status}`);
    const indent = ' '.repeat(width + 4);
    for (const marker of container.markers) lines.push(`${indent}${marker}`);
    if (container.mechanism) lines.push(`${indent}stopped by: ${mechanismText(container.mechanism)}`);
  }
  if (story.notManaged.length > 0) {
    lines.push('', 'Why the add-on does not manage it:');
    for (const reason of story.notManaged) lines.push(`  - ${reason}`);
  }
  if (story.actions.length > 0) {
    lines.push('', 'What happened:');
    for (const action of story.actions) lines.push(`  ${(action.time ?? '').padEnd(20)}  ${action.what}`);
  }
  if (story.waitingFor) lines.push('', `Waiting for: ${story.waitingFor}`);
  if (story.advice.length > 0) {
    lines.push('', 'What you can do:');
    for (const advice of story.advice) lines.push(`  - ${advice}`);
  }
  if (story.limits.length > 0) lines.push('', limitsNote(story.limits));
  return `${lines.join('\n')}\n`;
}

/** Sidecars named by the cluster's policy rather than by the Job's author, and by which entries. */
function policyText(entries: readonly string[]): string {
  return `${entries.length === 1 ? 'entry' : 'entries'} ${entries.join(', ')} of the cluster's injected-sidecar policy named sidecars of this pod at admission, in its ${POD_ANNOTATIONS.sidecars} annotation`;
}

export function limitsNote(limits: readonly string[]): string {
  return `Not shown, for lack of permission to: ${limits.join('; ')}.`;
}

function mechanismText(mechanism: StopMeans): string {
  switch (mechanism) {
    case 'crr': return 'crr (an OpenKruise ContainerRecreateRequest; kruise-daemon stops it)';
    case 'signal': return 'signal (an ephemeral container sends it SIGTERM, or its HTTP shutdown request)';
    case 'kill': return "kill (crr or signal: the watcher's --kill-mechanism decides)";
    case 'image': return 'image (its image is replaced in place by its quick-exit image)';
    default: return 'nothing: it cannot be stopped on this node';
  }
}

/** An age as kubectl prints it: 45s, 3m20s, 12m, 2h5m, 9h, 3d. */
export function age(since: string, now: Date): string {
  const seconds = Math.max(0, Math.floor((now.getTime() - new Date(since).getTime()) / 1000));
  const minutes = Math.floor(seconds / 60);
  const hours = Math.floor(minutes / 60);
  if (seconds < 120) return `${seconds}s`;
  if (minutes < 10) return `${minutes}m${seconds % 60 ? `${seconds % 60}s` : ''}`;
  if (hours < 3) return minutes < 60 ? `${minutes}m` : `${hours}h${minutes % 60 ? `${minutes % 60}m` : ''}`;
  if (hours < 48) return `${hours}h`;
  return `${Math.floor(hours / 24)}d`;
}

function clip(text: string, width: number): string {
  const line = text.replace(/\s+/g, ' ');
  return line.length <= width ? line : `${line.slice(0, width - 3)}...`;
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]! + 3))).join('').trimEnd()).join('\n') + '\n';
}
