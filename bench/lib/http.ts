// The status code of a plain-HTTP GET (a probe endpoint), or undefined when nothing answers.
import { get } from 'node:http';

export function httpStatus(url: string): Promise<number | undefined> {
  return new Promise((resolveStatus) => {
    const req = get(url, { timeout: 2000 }, (res) => {
      res.resume();
      resolveStatus(res.statusCode);
    });
    req.on('error', () => resolveStatus(undefined));
    req.on('timeout', () => req.destroy());
  });
}
