// The API server's own count of the requests each benchmarked process makes: an audit log
// (kube-apiserver --audit-log-path) that records, at the Metadata level, every request of the
// users in MEASURED_GROUP and nothing else. Each measured process runs with a client certificate
// of its own user in that group (and in system:masters), so its requests are told apart from the
// benchmark driver's and the kubelet simulator's.
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { auditEvents, auditFlags as auditFlagsOf } from '../../test/support/audit.ts';

export const MEASURED_GROUP = 'bench:measured';

/** The kube-apiserver flags that log the requests of MEASURED_GROUP's users to `dir`/audit.log. */
export const auditFlags = (dir: string): { apiServerArgs: string[]; logPath: string } => auditFlagsOf(dir, MEASURED_GROUP);

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
    for (const event of auditEvents(this.read(from))) {
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
