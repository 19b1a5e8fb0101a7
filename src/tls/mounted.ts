// A serving certificate someone else issues and renews, as files in a directory: a mounted
// kubernetes.io/tls Secret that cert-manager keeps current (the chart's webhook.certManager). The
// webhook generates nothing, writes no Secret and patches no caBundle (cert-manager's cainjector
// does): it serves what the files hold, and re-reads them every check interval, so a renewed
// certificate is served without a restart once the kubelet has updated the mounted files. Files
// that cannot be read or do not form a valid pair are not served: the previous pair stays.
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../logger.ts';
import type { CertificateBundle } from './certificates.ts';

export interface MountedCertificate {
  readonly description: string;
  /** The certificate and key the files hold now; throws, naming the files and why, when they are not a valid pair. */
  load(): Promise<CertificateBundle>;
  /** Every check interval: load(), and `apply` when the certificate changed. */
  watch(apply: (bundle: CertificateBundle) => void): void;
  stop(): void;
}

/** The kubernetes.io/tls key names, as the files of a mounted Secret. */
const FILES = { cert: 'tls.crt', key: 'tls.key', ca: 'ca.crt' };

export function mountedCertificate(dir: string, options: { checkIntervalMs: number; logger: Pick<Logger, 'info' | 'warn'> }): MountedCertificate {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let current: string | undefined;
  const description = `directory ${dir} (${FILES.cert}, ${FILES.key}; issued and renewed outside the add-on)`;

  async function load(): Promise<CertificateBundle> {
    const read = (file: string) => readFile(join(dir, file), 'utf8');
    let cert: string;
    let key: string;
    try {
      [cert, key] = await Promise.all([read(FILES.cert), read(FILES.key)]);
    } catch (error) {
      throw new Error(`--tls-cert-dir ${dir}: cannot read ${FILES.cert} and ${FILES.key} (${(error as Error).message}); mount the certificate's Secret there`, { cause: error });
    }
    try {
      if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) throw new Error(`${FILES.cert} is not the certificate of ${FILES.key}`);
    } catch (error) {
      throw new Error(`--tls-cert-dir ${dir}: ${(error as Error).message}`, { cause: error });
    }
    // ca.crt (cert-manager writes it) only says what the API server is told to trust; the caBundle is cainjector's.
    const caBundle = await read(FILES.ca).catch(() => '');
    current = cert;
    return { caBundle, caKey: '', cert, key };
  }

  return {
    description,
    load,
    watch(apply) {
      const check = async () => {
        const served = current;
        try {
          const bundle = await load();
          if (bundle.cert !== served) apply(bundle);
        } catch (error) {
          current = served;
          options.logger.warn({ err: error }, 'the mounted certificate cannot be served; serving the previous one');
        }
      };
      const schedule = () => {
        if (!stopped) timer = setTimeout(() => void check().finally(schedule), options.checkIntervalMs);
      };
      schedule();
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
