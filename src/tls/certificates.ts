// The webhook's certificates: a long-lived CA and a serving certificate signed by it, and the
// decision when to replace which. Keys are EC P-256 with ECDSA-SHA256 signatures: selfsigned
// signs with SHA-1 by default, which the API server (Go) refuses.
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { isIP } from 'node:net';

/** Everything the webhook serves and publishes, as PEM text. */
export interface CertificateBundle {
  /** The certificates the API server trusts (the webhook configurations' caBundle): the CA that
   * signs serving certificates first, then the previous CA while it is still valid, so that a
   * replica still serving a certificate of the previous CA stays trusted during a CA change. */
  caBundle: string;
  /** Private key of the first CA in caBundle. */
  caKey: string;
  /** The serving certificate and its key. */
  cert: string;
  key: string;
}

export interface IssueOptions {
  /** DNS names and IP addresses the serving certificate is valid for. */
  hosts: string[];
  /** Lifetime of a serving certificate; a CA lives ten times longer. */
  validityMs: number;
  now: Date;
}

const CA_LIFETIME_FACTOR = 10;
// Issued certificates start slightly in the past, so a verifier whose clock lags ours accepts them.
const BACKDATE_MS = 60_000;
const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----\n?/g;

/** The serving certificate's names: the Service's DNS names, the loopback names for local runs, and `extra`. */
export function servingHosts(serviceName: string, namespace: string, extra: string[] = []): string[] {
  const service = [serviceName, `${serviceName}.${namespace}`, `${serviceName}.${namespace}.svc`, `${serviceName}.${namespace}.svc.cluster.local`];
  return [...new Set([...service, 'localhost', '127.0.0.1', ...extra])];
}

/** A new CA and a serving certificate signed by it; the old bundle's CA stays in caBundle while valid. */
export async function issueWithNewCa(options: IssueOptions, previous?: CertificateBundle): Promise<CertificateBundle> {
  const notBefore = new Date(options.now.getTime() - BACKDATE_MS);
  const { generate } = await x509Issuer();
  const ca = await generate([{ name: 'commonName', value: `sidecar-terminator-ca@${Math.floor(options.now.getTime() / 1000)}` }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate: notBefore,
    notAfterDate: new Date(options.now.getTime() + CA_LIFETIME_FACTOR * options.validityMs),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return issueServing({ caBundle: ca.cert + stillValidCa(previous, options.now), caKey: ca.private }, options);
}

/**
 * selfsigned and its X.509 stack, loaded only to issue: a replica that finds valid certificates in
 * its store reads them with node:crypto and starts without it (bench/README.md, section 0).
 */
const x509Issuer = async () => (await import('selfsigned')).default; // CommonJS: its exports are the default

/** The PEM of the bundle's CA when it is readable and still valid, else ''. */
function stillValidCa(bundle: CertificateBundle | undefined, now: Date): string {
  try {
    const ca = bundle && signingCa(bundle);
    return ca && ca.validToDate > now ? ca.toString() : '';
  } catch {
    return '';
  }
}

/** A new serving certificate signed by the bundle's CA (it never outlives that CA). */
export async function issueServing(ca: Pick<CertificateBundle, 'caBundle' | 'caKey'>, options: IssueOptions): Promise<CertificateBundle> {
  const caCert = signingCa(ca);
  const notAfter = Math.min(options.now.getTime() + options.validityMs, caCert.validToDate.getTime());
  const [commonName] = options.hosts;
  const { generate } = await x509Issuer();
  const served = await generate([{ name: 'commonName', value: commonName ?? 'localhost' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate: new Date(options.now.getTime() - BACKDATE_MS),
    notAfterDate: new Date(notAfter),
    ca: { cert: caCert.toString(), key: ca.caKey },
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: options.hosts.map((host) => (isIP(host) ? { type: 7 as const, ip: host } : { type: 2 as const, value: host })) },
    ],
  });
  return { caBundle: ca.caBundle, caKey: ca.caKey, cert: served.cert, key: served.private };
}

/** The PEM certificates of a bundle, each as its own block ending in a newline. */
export function certificatesIn(pem: string): string[] {
  return (pem.replaceAll('\r\n', '\n').match(PEM_BLOCK) ?? []).map((block) => (block.endsWith('\n') ? block : `${block}\n`));
}

/** The CA that signs serving certificates: the first certificate of caBundle. */
export function signingCa(bundle: Pick<CertificateBundle, 'caBundle'>): X509Certificate {
  const [first] = bundle.caBundle.match(PEM_BLOCK) ?? [];
  if (!first) throw new Error('the CA bundle holds no PEM certificate');
  return new X509Certificate(first);
}

export type RenewalPlan =
  | { action: 'keep' }
  | { action: 'issue-serving'; reason: string }
  | { action: 'new-ca'; reason: string };

export interface RenewalPolicy {
  hosts: string[];
  validityMs: number;
  renewBeforeMs: number;
  now: Date;
}

/**
 * What to do with the stored bundle (undefined: nothing stored yet). The CA is replaced when
 * unusable or when it would expire before a serving certificate issued now; the serving
 * certificate when unusable, not signed by the CA, missing one of the hosts, or expiring
 * within renewBefore.
 */
export function planRenewal(bundle: CertificateBundle | undefined, policy: RenewalPolicy): RenewalPlan {
  if (!bundle) return { action: 'new-ca', reason: 'no certificate stored yet' };
  const caReason = caProblem(bundle, policy);
  if (caReason) return { action: 'new-ca', reason: caReason };
  const servingReason = servingCertificateProblem(bundle, policy);
  if (servingReason) return { action: 'issue-serving', reason: servingReason };
  return { action: 'keep' };
}

function caProblem(bundle: CertificateBundle, policy: RenewalPolicy): string | undefined {
  let ca: X509Certificate;
  try {
    ca = signingCa(bundle);
    if (!ca.ca || !ca.checkPrivateKey(createPrivateKey(bundle.caKey))) return 'the stored CA certificate and key do not form a CA';
  } catch (err) {
    return `the stored CA cannot be read (${(err as Error).message})`;
  }
  if (ca.validToDate.getTime() < policy.now.getTime() + policy.validityMs) return `the CA expires at ${ca.validToDate.toISOString()}, before a new serving certificate would`;
  return undefined;
}

function servingCertificateProblem(bundle: CertificateBundle, policy: RenewalPolicy): string | undefined {
  let served: X509Certificate;
  try {
    served = new X509Certificate(bundle.cert);
    if (!served.checkPrivateKey(createPrivateKey(bundle.key))) return 'the serving certificate does not match its key';
  } catch (err) {
    return `the serving certificate cannot be read (${(err as Error).message})`;
  }
  const ca = signingCa(bundle);
  if (!served.checkIssued(ca) || !served.verify(ca.publicKey)) return 'the serving certificate is not signed by the current CA';
  const missing = policy.hosts.filter((host) => (isIP(host) ? served.checkIP(host) : served.checkHost(host, { wildcards: false })) === undefined);
  if (missing.length > 0) return `the serving certificate does not cover ${missing.join(', ')}`;
  if (served.validToDate.getTime() - policy.now.getTime() <= policy.renewBeforeMs) return `the serving certificate expires at ${served.validToDate.toISOString()}, within the renewal window`;
  return undefined;
}

/** Whether the serving certificate is currently within its validity window. */
export function isServingCertificateValid(bundle: CertificateBundle, now: Date): boolean {
  const served = new X509Certificate(bundle.cert);
  return served.validFromDate <= now && now < served.validToDate;
}
