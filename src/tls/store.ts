// Where the certificates live: a directory for local runs, or a Secret (secret-store.ts) that
// every replica shares. Both use the kubernetes.io/tls key names, plus the CA's key.
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { TLS_SECRET_KEYS } from '../policy/index.ts';
import type { CertificateBundle } from './certificates.ts';

export interface StoredBundle {
  bundle: CertificateBundle;
  /** The store's version of what it holds (a Secret's resourceVersion), to detect concurrent writers. */
  revision: string;
}

export interface CertificateStore {
  /** For logs, e.g. `Secret sidecar-terminator/sidecar-terminator-tls`. */
  readonly description: string;
  /** What is stored, or undefined when nothing is. A missing key reads as an empty string, which the renewal plan treats as unusable. */
  load(): Promise<StoredBundle | undefined>;
  /** Stores `bundle` in place of `replacing` (undefined when nothing was stored). When another
   * writer got there first, stores nothing and returns what that writer stored. */
  save(bundle: CertificateBundle, replacing: StoredBundle | undefined): Promise<StoredBundle>;
}

/** Key (file) name of each part of the bundle; `private` parts hold key material. */
export const BUNDLE_KEYS = [
  { key: TLS_SECRET_KEYS.caCert, field: 'caBundle', private: false },
  { key: TLS_SECRET_KEYS.caKey, field: 'caKey', private: true },
  { key: TLS_SECRET_KEYS.cert, field: 'cert', private: false },
  { key: TLS_SECRET_KEYS.key, field: 'key', private: true },
] as const satisfies readonly { key: string; field: keyof CertificateBundle; private: boolean }[];

/** The bundle from a key -> text lookup, or undefined when no key is present at all. */
export function bundleFrom(read: (key: string) => string | undefined): CertificateBundle | undefined {
  const values = BUNDLE_KEYS.map(({ key }) => read(key));
  if (values.every((value) => value === undefined)) return undefined;
  const [caBundle = '', caKey = '', cert = '', key = ''] = values;
  return { caBundle, caKey, cert, key };
}

/** A directory holding ca.crt, ca.key, tls.crt and tls.key; keys are readable by the owner only. */
export function directoryStore(dir: string): CertificateStore {
  return {
    description: `directory ${dir}`,
    async load() {
      const files = new Map<string, string>();
      for (const { key } of BUNDLE_KEYS) {
        const text = await readFile(join(dir, key), 'utf8').catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return undefined;
          throw err;
        });
        if (text !== undefined) files.set(key, text);
      }
      const bundle = bundleFrom((key) => files.get(key));
      return bundle && { bundle, revision: '' };
    },
    async save(bundle) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      for (const { key, field, private: secret } of BUNDLE_KEYS) {
        // Write then rename, so a reader never sees half a file.
        const path = join(dir, key);
        await writeFile(`${path}.tmp`, bundle[field], { mode: secret ? 0o600 : 0o644 });
        await rename(`${path}.tmp`, path);
      }
      return { bundle, revision: '' };
    },
  };
}
