// The API server's own record of requests: an audit log (kube-apiserver --audit-log-path) at the
// Metadata level, of the requests of the users in one group and nothing else. Each process under
// watch runs with a client certificate of its own user in that group (ControlPlane.clientKubeconfig),
// so its requests are told apart from everyone else's.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Writes the audit policy into `dir`; the kube-apiserver flags that log the requests of `group`'s users to `dir`/audit.log. */
export function auditFlags(dir: string, group: string): { apiServerArgs: string[]; logPath: string } {
  const policy = join(dir, 'audit-policy.json');
  const logPath = join(dir, 'audit.log');
  writeFileSync(
    policy,
    JSON.stringify({
      apiVersion: 'audit.k8s.io/v1',
      kind: 'Policy',
      // One line per request, when its response is complete (a watch: when it ends).
      omitStages: ['RequestReceived', 'ResponseStarted'],
      rules: [{ level: 'Metadata', userGroups: [group] }, { level: 'None' }],
    }),
  );
  // The default blocking mode writes each line before the response: the log is complete when the request is.
  return { apiServerArgs: ['--audit-policy-file', policy, '--audit-log-path', logPath, '--audit-log-format', 'json', '--audit-log-maxsize', '0'], logPath };
}

export interface AuditEvent {
  verb: string;
  user?: { username?: string };
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
  requestURI?: string;
  /** When the API server received the request, and when it logged this stage (its response complete): RFC 3339 with microseconds. */
  requestReceivedTimestamp?: string;
  stageTimestamp?: string;
  responseStatus?: { code?: number };
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
