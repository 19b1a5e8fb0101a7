// The API server's own record of requests: an audit log (kube-apiserver --audit-log-path), by
// default at the Metadata level, of the requests of the users in one group and nothing else (a
// policy of other rules for what needs more). Each process under watch runs with a client
// certificate of its own user in that group (ControlPlane.clientKubeconfig), so its requests are
// told apart from everyone else's.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Writes the audit policy into `dir`; the kube-apiserver flags that log the requests of `group`'s users to `dir`/audit.log. */
export const auditFlags = (dir: string, group: string): { apiServerArgs: string[]; logPath: string } => auditPolicyFlags(dir, [{ level: 'Metadata', userGroups: [group] }, { level: 'None' }]);

/** One rule of an audit policy (audit.k8s.io/v1 PolicyRule): the first that matches a request sets its level. */
export interface AuditRule {
  level: 'None' | 'Metadata' | 'Request' | 'RequestResponse';
  userGroups?: string[];
  verbs?: string[];
  resources?: Array<{ group: string; resources: string[] }>;
}

/** Writes an audit policy of these rules into `dir`; the kube-apiserver flags that log by it to `dir`/audit.log. */
export function auditPolicyFlags(dir: string, rules: AuditRule[]): { apiServerArgs: string[]; logPath: string } {
  const policy = join(dir, 'audit-policy.json');
  const logPath = join(dir, 'audit.log');
  writeFileSync(
    policy,
    JSON.stringify({
      apiVersion: 'audit.k8s.io/v1',
      kind: 'Policy',
      // One line per request, when its response is complete (a watch: when it ends).
      omitStages: ['RequestReceived', 'ResponseStarted'],
      rules,
    }),
  );
  // The default blocking mode writes each line before the response: the log is complete when the request is.
  return { apiServerArgs: ['--audit-policy-file', policy, '--audit-log-path', logPath, '--audit-log-format', 'json', '--audit-log-maxsize', '0'], logPath };
}

export interface AuditEvent {
  verb: string;
  user?: { username?: string };
  /** `name` is empty for a creation at Metadata level, and for one whose name the API server generates (metadata.generateName). */
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
  requestURI?: string;
  /** When the API server received the request, and when it logged this stage (its response complete): RFC 3339 with microseconds. */
  requestReceivedTimestamp?: string;
  stageTimestamp?: string;
  responseStatus?: { code?: number };
  /** At level Request and above: the body sent (an object; for a patch, the patch itself: a JSON patch's array of operations, or a merge patch's object). */
  requestObject?: unknown;
  /** What the API server's admission added, e.g. `failed-open.mutation.webhook.admission.k8s.io/round_0_index_0`: the webhook it could not call and admitted without. */
  annotations?: Record<string, string>;
}

/** The events logged in `text` (an audit log, or a part of it), without a last line still being written. */
export function auditEvents(text: string): AuditEvent[] {
  return text
    .slice(0, text.lastIndexOf('\n') + 1)
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as AuditEvent);
}

export const readAuditLog = (path: string): AuditEvent[] => auditEvents(readFileSync(path, 'utf8'));

/** An audit timestamp (RFC 3339 with microseconds) in microseconds since the epoch, so that two requests a microsecond apart are told apart; undefined when absent or unreadable. */
export function auditMicros(timestamp: string | undefined): number | undefined {
  const fraction = /\.(\d+)/.exec(timestamp ?? '')?.[1] ?? '';
  // Its whole second, in milliseconds, then the fraction of that second in microseconds.
  const second = Date.parse((timestamp ?? '').replace(/\.\d+/, ''));
  return Number.isFinite(second) ? second * 1000 + Number(fraction.padEnd(6, '0').slice(0, 6)) : undefined;
}
