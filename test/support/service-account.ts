// A kubeconfig that holds a token of a ServiceAccount: what the chart grants that account and
// nothing else, as the add-on's pods run.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ControlPlane } from './control-plane.ts';

export async function serviceAccountKubeconfig(cp: ControlPlane, namespace: string, serviceAccount: string, t: { teardown(fn: () => void): void }): Promise<string> {
  const created = await cp.kubectl(['create', 'token', serviceAccount, '--namespace', namespace, '--duration', '1h']);
  if (created.code !== 0) throw new Error(`kubectl create token ${serviceAccount} failed: ${created.stderr}`);
  const cluster = cp.kubeConfig.getCurrentCluster()!;
  const dir = mkdtempSync(join(tmpdir(), 'st-sa-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'kubeconfig');
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'local', cluster: { server: cluster.server, 'certificate-authority': cluster.caFile } }],
      users: [{ name: serviceAccount, user: { token: created.stdout.trim() } }],
      contexts: [{ name: 'local', context: { cluster: 'local', user: serviceAccount } }],
      'current-context': 'local',
    }),
  );
  return path;
}
