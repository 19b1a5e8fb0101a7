// A real OCI registry on loopback, as a cluster pulls from: CNCF Distribution (Debian's
// docker-registry package, scripts/install-debian-tool.sh) serving HTTPS with a certificate of its
// own CA, and basic authentication (an htpasswd file, bcrypt: Distribution reads no other kind).
// Its access log says what was pulled.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { buildScriptOutput, ManagedProcess } from './managed-process.ts';
import { httpStatus, PortLease } from './net.ts';
import { waitFor } from './wait.ts';

export interface Registry {
  /** host:port, e.g. 127.0.0.1:20123. */
  host: string;
  /** The CA that signed its serving certificate (PEM). */
  caFile: string;
  username: string;
  password: string;
  /** The access log's request lines (method and path) so far, with the client's user agent. */
  requests(): { method: string; path: string; userAgent: string }[];
  logTail(lines: number): string;
  stop(): Promise<void>;
}

export async function startRegistry(): Promise<Registry> {
  const binary = await buildScriptOutput('install-debian-tool.sh', ['docker-registry']);
  const dir = mkdtempSync(join(tmpdir(), 'st-registry-'));
  const lease = new PortLease();
  const port = await lease.take();
  const host = `127.0.0.1:${port}`;
  const openssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=sidecar-terminator test registry CA']);
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'tls.key', '-out', 'tls.csr', '-subj', '/CN=127.0.0.1']);
  writeFileSync(join(dir, 'san.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  openssl(['x509', '-req', '-in', 'tls.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'tls.crt', '-days', '2', '-extfile', 'san.cnf']);
  const username = 'release';
  const password = randomBytes(12).toString('hex');
  // bcrypt through the C library's crypt(3) (libxcrypt), from Perl, which every Debian has.
  const salt = randomBytes(16).toString('base64').replace(/[^A-Za-z0-9]/g, '.').slice(0, 22);
  const hash = execFileSync('perl', ['-e', 'print crypt($ARGV[0], $ARGV[1])', password, `$2b$10$${salt}`], { encoding: 'utf8' });
  if (!hash.startsWith('$2b$')) throw new Error(`crypt(3) made no bcrypt hash here (${hash}): the registry's htpasswd needs one`);
  writeFileSync(join(dir, 'htpasswd'), `${username}:${hash}\n`);
  writeFileSync(
    join(dir, 'config.yml'),
    stringify({
      version: 0.1,
      log: { level: 'info', formatter: 'text', accesslog: { disabled: false } },
      storage: { filesystem: { rootdirectory: join(dir, 'data') }, delete: { enabled: true } },
      http: { addr: host, secret: randomBytes(16).toString('hex'), tls: { certificate: join(dir, 'tls.crt'), key: join(dir, 'tls.key') } },
      auth: { htpasswd: { realm: 'sidecar-terminator test registry', path: join(dir, 'htpasswd') } },
    }),
  );
  const process = new ManagedProcess('registry', [binary, 'serve', join(dir, 'config.yml')], join(dir, 'registry.log'));
  const stop = async () => {
    await process.stop();
    lease.release();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // /v2/ answers 401 without credentials once it serves.
    await waitFor('the registry to serve', async () => {
      if (process.exitStatus !== undefined) throw new Error(`the registry exited: ${process.logTail(20)}`);
      return (await httpStatus(`https://${host}/v2/`)) === 401;
    }, { timeoutMs: 30_000 });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    host,
    caFile: join(dir, 'ca.crt'),
    username,
    password,
    requests: () =>
      [...readFileSync(join(dir, 'registry.log'), 'utf8').matchAll(/"(GET|HEAD|PUT|POST|PATCH) (\S+) HTTP\/[\d.]+" (?:\d+) (?:\d+) "[^"]*" "([^"]*)"/g)].map(([, method = '', path = '', userAgent = '']) => ({ method, path, userAgent })),
    logTail: (lines) => process.logTail(lines),
    stop,
  };
}
