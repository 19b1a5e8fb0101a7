// The certificates in a kubernetes.io/tls Secret, shared by every replica. Replicas race
// safely: creation handles AlreadyExists and updates carry the resourceVersion that was read,
// so the loser of a race adopts the winner's certificates instead of overwriting them.
import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import { MANAGED_BY_LABELS } from '../policy/index.ts';
import type { CertificateBundle } from './certificates.ts';
import { BUNDLE_KEYS, bundleFrom, type CertificateStore, type StoredBundle } from './store.ts';

export function secretStore(core: CoreV1Api, namespace: string, name: string): CertificateStore {
  const load = async (): Promise<StoredBundle | undefined> => {
    let secret: V1Secret;
    try {
      secret = await core.readNamespacedSecret({ name, namespace });
    } catch (err) {
      if (isApiError(err, 404)) return undefined;
      throw err;
    }
    const data = secret.data ?? {};
    const bundle = bundleFrom((key) => (data[key] === undefined ? undefined : Buffer.from(data[key], 'base64').toString('utf8')));
    // An existing Secret without our keys (e.g. created empty by a chart) is replaced, not created.
    return { bundle: bundle ?? { caBundle: '', caKey: '', cert: '', key: '' }, revision: secret.metadata?.resourceVersion ?? '' };
  };

  const toSecret = (bundle: CertificateBundle, resourceVersion?: string): V1Secret => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace, resourceVersion, labels: { ...MANAGED_BY_LABELS } },
    type: 'kubernetes.io/tls',
    data: Object.fromEntries(BUNDLE_KEYS.map(({ key, field }) => [key, Buffer.from(bundle[field]).toString('base64')])),
  });

  const stored = (bundle: CertificateBundle, secret: V1Secret): StoredBundle => ({ bundle, revision: secret.metadata?.resourceVersion ?? '' });

  return {
    description: `Secret ${namespace}/${name}`,
    load,
    async save(bundle, replacing) {
      try {
        if (replacing === undefined) return stored(bundle, await core.createNamespacedSecret({ namespace, body: toSecret(bundle) }));
        return stored(bundle, await core.replaceNamespacedSecret({ name, namespace, body: toSecret(bundle, replacing.revision) }));
      } catch (err) {
        // 409: AlreadyExists on create, Conflict on replace. Another replica wrote first.
        if (!isApiError(err, 409)) throw err;
        const theirs = await load();
        if (!theirs) throw new Error(`${name} changed while it was being written and is now gone; retrying at the next check`, { cause: err });
        return theirs;
      }
    },
  };
}
