// The API server's own count of the requests each benchmarked process makes: an audit log
// (kube-apiserver --audit-log-path) that records, at the Metadata level, every request of the
// users in MEASURED_GROUP and nothing else. Each measured process runs with a client certificate
// of its own user in that group (and in system:masters), so its requests are told apart from the
// benchmark driver's and the kubelet simulator's.
import { closeSync, openSync, readSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const MEASURED_GROUP = 'bench:measured';

/** Writes the audit policy into `dir`; the kube-apiserver flags that log to `dir`/audit.log. */
export function auditFlags(dir: string): { apiServerArgs: string[]; logPath: string } {
  const policy = join(dir, 'audit-policy.json');
  const logPath = join(dir, 'audit.log');
  writeFileSync(
    policy,
    JSON.stringify({
      apiVersion: 'audit.k8s.io/v1',
      kind: 'Policy',
      // One line per request, when its response is complete (a watch: when it ends).
      omitStages: ['RequestReceived', 'ResponseStarted'],
      rules: [{ level: 'Metadata', userGroups: [MEASURED_GROUP] }, { level: 'None' }],
    }),
  );
  // The default blocking mode writes each line before the response: the log is complete when the request is.
  return { apiServerArgs: ['--audit-policy-file', policy, '--audit-log-path', logPath, '--audit-log-format', 'json', '--audit-log-maxsize', '0'], logPath };
}

interface AuditEvent {
  verb: string;
  user?: { username?: string };
  objectRef?: { resource?: string; subresource?: string };
  requestURI?: string;
}

export class AuditLog {
  private readonly path: string;

  constructor(path: string) {
    this.path = path;
  }

  /** Where the log ends now: count(user, mark) counts what comes after. */
  mark(): number {
    try {
      return statSync(this.path).size;
    } catch {
      return 0;
    }
  }

  /** The requests of `user` logged after `from`, by `verb resource[/subresource]` (or the path of a non-resource request). */
  count(user: string, from: number): Record<string, number> {
    const counts: Record<string, number> = {};
    const text = this.read(from);
    // The last line may still be being written.
    for (const line of text.slice(0, text.lastIndexOf('\n') + 1).split('\n')) {
      if (!line) continue;
      const event = JSON.parse(line) as AuditEvent;
      if (event.user?.username !== user) continue;
      const { resource, subresource } = event.objectRef ?? {};
      const key = resource ? `${event.verb} ${resource}${subresource ? `/${subresource}` : ''}` : `${event.verb} ${event.requestURI?.split('?')[0]}`;
      counts[key] = (counts[key] ?? 0) + 1;
    }
    return counts;
  }

  private read(from: number): string {
    const size = this.mark();
    if (size <= from) return '';
    const buffer = Buffer.alloc(size - from);
    const fd = openSync(this.path, 'r');
    try {
      readSync(fd, buffer, 0, buffer.length, from);
    } finally {
      closeSync(fd);
    }
    return buffer.toString('utf8');
  }
}

export const total = (counts: Record<string, number>): number => Object.values(counts).reduce((sum, n) => sum + n, 0);
