// Prometheus text read by the tests and the benchmarks: the add-on's /metrics (over HTTPS with its
// own certificate) and the API server's (through kubectl, with the admin credentials).
import { get } from 'node:https';
import type { ControlPlane } from './control-plane.ts';

/** The sum of every sample of `name` whose labels include `labels` (0 when there is none). */
export function sumSamples(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const sample = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, key = '', value = '']) => [key, value]));
    if (Object.entries(labels).every(([key, value]) => sample[key] === value)) sum += Number(match[3]);
  }
  return sum;
}

/** The body of a GET over HTTPS, whatever certificate the server has (the add-on's /metrics). */
export function scrape(url: string): Promise<string> {
  return new Promise((resolveText, reject) => {
    get(url, { rejectUnauthorized: false, agent: false, timeout: 5000 }, (response) => {
      let body = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      response.on('end', () => (response.statusCode === 200 ? resolveText(body) : reject(new Error(`GET ${url}: ${response.statusCode} ${body}`))));
    }).on('error', reject);
  });
}

/** The API server's own metrics. */
export async function apiServerMetrics(cp: ControlPlane): Promise<string> {
  const result = await cp.kubectl(['get', '--raw', '/metrics']);
  if (result.code !== 0) throw new Error(`kubectl get --raw /metrics: ${result.stderr}`);
  return result.stdout;
}
