// Network helpers shared by the tests and the benchmarks: a free port, and the status of a GET.
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 right now (another process may take it before it is bound). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolveListen);
  });
  const address = server.address();
  await new Promise((resolveClose) => server.close(resolveClose));
  if (address === null || typeof address === 'string') throw new Error('no TCP port allocated');
  return address.port;
}

/** The status of a GET over HTTP or HTTPS (any certificate) on a fresh connection; undefined when nothing answers within 2 s. */
export function httpStatus(url: string): Promise<number | undefined> {
  return new Promise((resolveStatus) => {
    const getter = url.startsWith('https:') ? httpsGet : httpGet;
    const req = getter(url, { rejectUnauthorized: false, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      resolveStatus(res.statusCode);
    });
    req.on('error', () => resolveStatus(undefined));
    req.on('timeout', () => req.destroy());
  });
}
