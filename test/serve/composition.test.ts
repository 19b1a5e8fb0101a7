// src/serve/composition.ts and the webhook component it starts, without a cluster: what is refused
// before anything starts, and the webhook's drain as --shutdown-grace and --shutdown-drain set it.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server as HttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseFlags } from '../../src/cli.ts';
import { SERVE_FLAGS, type ServeConfig } from '../../src/config.ts';
import { compose } from '../../src/serve/composition.ts';
import { webhookDrain } from '../../src/serve/webhook.ts';
import { UsageError } from '../../src/usage-error.ts';
import { capturingLogger } from '../support/logger.ts';

/** A kubeconfig for an API server that is not there: nothing here may reach it. */
function kubeconfigFile(t: { teardown(fn: () => void): void }): { dir: string; kubeconfig: string } {
  const dir = mkdtempSync(join(tmpdir(), 'st-composition-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'none', cluster: { server: 'https://127.0.0.1:9' } }],
    users: [{ name: 'none', user: { token: 'none' } }],
    contexts: [{ name: 'none', context: { cluster: 'none', user: 'none' } }],
    'current-context': 'none',
  }));
  return { dir, kubeconfig };
}

const serveConfig = (args: string[]): ServeConfig => parseFlags('serve', SERVE_FLAGS, ['--namespace', 'ns', '--log-level', 'error', ...args], {}).values;

t.test('nothing to run is refused before a logger or a client exists', async (t) => {
  t.throws(() => compose(serveConfig(['--no-webhook', '--no-watcher'])), new UsageError('nothing to run: both --no-webhook and --no-watcher are set; drop one of them'));
});

t.test('the components the flags enable, in start order', async (t) => {
  const { kubeconfig } = kubeconfigFile(t);
  t.equal(compose(serveConfig(['--kubeconfig', kubeconfig])).components.length, 2, 'the watcher and the webhook');
  t.equal(compose(serveConfig(['--kubeconfig', kubeconfig, '--no-watcher', '--probe-address', ':0'])).components.length, 2, 'the webhook and the probes');
  t.equal(compose(serveConfig(['--kubeconfig', kubeconfig, '--no-webhook'])).components.length, 1, 'the watcher alone');
  const { dir } = kubeconfigFile(t);
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, 'entries: []\n');
  t.equal(compose(serveConfig(['--kubeconfig', kubeconfig, '--no-watcher', '--injected-sidecars', policy])).components.length, 2, 'the injected-sidecar policy first, then the webhook');
  t.throws(() => compose(serveConfig(['--kubeconfig', kubeconfig, '--no-webhook', '--injected-sidecars', policy])), new UsageError('--injected-sidecars is read by the webhook, which --no-webhook turns off: give the policy to the webhook replicas, or drop --no-webhook'), 'a watcher alone refuses the policy, which it would read for nothing');
});

t.test('the webhook refuses a --shutdown-drain that does not fit --shutdown-grace before any certificate work', async (t) => {
  const { dir, kubeconfig } = kubeconfigFile(t);
  const certDir = join(dir, 'certs');
  const drainTooLong = ['--kubeconfig', kubeconfig, '--no-watcher', '--shutdown-grace', '5s', '--shutdown-drain', '5s'];
  const message = '--shutdown-drain (5000 ms) must be shorter than --shutdown-grace (5000 ms), which it is part of';

  const [issuing] = compose(serveConfig([...drainTooLong, '--cert-dir', certDir])).components;
  await t.rejects(issuing!(), new UsageError(message));
  t.notOk(existsSync(certDir), 'no certificate issued');

  const [mounted] = compose(serveConfig([...drainTooLong, '--tls-cert-dir', join(dir, 'no-such-dir')])).components;
  await t.rejects(mounted!(), new UsageError(message), 'refused for the flag, not for the missing files');
});

t.test("the webhook's drain: unready at once, listening for --shutdown-drain, forced closed when --shutdown-grace is over", async (t) => {
  const { logger, lines } = capturingLogger();
  const drain = webhookDrain(serveConfig(['--shutdown-grace', '200ms', '--shutdown-drain', '50ms']), logger);
  const begun = Date.now();
  const events: Array<[string, number]> = [];
  let forced = () => {};
  const server = { closeAllConnections: () => (events.push(['forced', Date.now() - begun]), forced()) } as unknown as HttpsServer;
  const close = () => (events.push(['close', Date.now() - begun]), new Promise<void>((resolve) => (forced = resolve)));
  const stopped = drain.stop({ server, close });
  t.equal(drain.draining(), true);
  await stopped;
  const [[first, closeAt], [second, forcedAt]] = events as [[string, number], [string, number]];
  t.same([first, second], ['close', 'forced']);
  t.ok(closeAt >= 45, `stops listening after --shutdown-drain (${closeAt} ms)`);
  t.ok(forcedAt >= 195, `closes what is left at --shutdown-grace after stop began (${forcedAt} ms)`);
  t.same(lines.map((line) => line.fields), [{ graceMs: 150 }], 'the grace left after the drain');
});
