// The injected-sidecar policy as serve holds it: refused at start with the file, the entry and the
// fix; read again by content (the kubelet swaps a ConfigMap volume by a symlink); a bad change
// keeps the last good policy in force and says so in the log, the metrics and an event on the
// add-on's own pod.
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Registry } from 'prom-client';
import type { Readiness } from '../../src/health.ts';
import { INJECTED_POLICY_INVALID_REASON } from '../../src/policy/index.ts';
import { InjectedSidecarPolicySource, loadInjectedSidecarPolicy, ownPodOf } from '../../src/serve/injected-sidecar-source.ts';
import { injectedSidecarReads } from '../../src/serve/webhook.ts';
import { UsageError } from '../../src/usage-error.ts';
import { runCli } from '../cli/run.ts';
import { apiError, fakeCoreV1Api } from '../support/fake-kube.ts';
import { capturingLogger } from '../support/logger.ts';
import { sumSamples } from '../support/metrics.ts';
import { waitFor } from '../support/wait.ts';
import { fakeNamespaces, namespace, namespaceList } from '../kube/fake-namespaces.ts';

const ISTIO = 'entries: [{name: istio, container: istio-proxy, stop: istio-proxy}]\n';
const LINKERD = 'entries: [{name: linkerd, container: linkerd-proxy, stop: linkerd-proxy}]\n';
const BAD_STOP = 'entries: [{name: istio, container: istio-proxy, stop: "POST http://example.com/quit"}]\n';

function directory(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'st-injected-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A policy file with `text`, and a source over it with a registry, a logger and, unless `ownPod` is false, an event sink. */
function sourceOver(t: { teardown(fn: () => void): void }, text: string, ownPod = true) {
  const path = join(directory(t), 'policy.yaml');
  writeFileSync(path, text);
  const metrics = new Registry();
  const { logger, lines } = capturingLogger();
  const core = fakeCoreV1Api().handle('createNamespacedEvent', ({ body }) => body);
  const source = new InjectedSidecarPolicySource({
    path,
    loaded: loadInjectedSidecarPolicy(path),
    checkIntervalMs: 0,
    logger,
    metrics,
    ...(ownPod ? { ownPod: { name: 'webhook-7d9f', namespace: 'sidecar-terminator', core: core.api } } : {}),
  });
  const changes: string[][] = [];
  source.onChange((policy) => changes.push(policy.entries.map((entry) => entry.name)));
  const sample = async (name: string, labels: Record<string, string> = {}) => sumSamples(await metrics.metrics(), name, labels);
  const valid = () => sample('sidecar_terminator_injected_sidecars_policy_valid');
  const reloads = async () => ({ ok: await sample('sidecar_terminator_injected_sidecars_policy_reloads_total', { result: 'ok' }), error: await sample('sidecar_terminator_injected_sidecars_policy_reloads_total', { result: 'error' }) });
  const events = () => core.requests('createNamespacedEvent').map(({ body }) => body);
  return { path, source, lines, changes, valid, reloads, events, core };
}

const names = (source: InjectedSidecarPolicySource) => source.current().entries.map((entry) => entry.name);

t.test('at start, a bad file is a usage error naming the file, each entry at fault and the fix', async (t) => {
  const dir = directory(t);
  const bad = join(dir, 'bad.yaml');
  writeFileSync(bad, BAD_STOP);
  const refusal = (() => {
    try {
      loadInjectedSidecarPolicy(bad);
    } catch (error) {
      return error;
    }
    return undefined;
  })();
  t.ok(refusal instanceof UsageError, 'a usage error: serve exits 2');
  t.throws(() => loadInjectedSidecarPolicy(bad), { message: new RegExp(`^--injected-sidecars ${bad}: an error: entries\\[0\\]\\.stop: .*localhost.*; serve does not start with this policy$`) });
  const missing = join(dir, 'none.yaml');
  t.throws(() => loadInjectedSidecarPolicy(missing), { message: new RegExp(`^--injected-sidecars ${missing}: cannot read the policy file: ENOENT`) });
  const good = join(dir, 'good.yaml');
  writeFileSync(good, ISTIO);
  t.same(loadInjectedSidecarPolicy(good).policy.entries.map((entry) => entry.name), ['istio']);
});

t.test('serve refuses to start on a bad policy file: exit 2, before any client, naming the file, the entry and the fix', async (t) => {
  const bad = join(directory(t), 'policy.yaml');
  writeFileSync(bad, BAD_STOP);
  // No kubeconfig: anything after the policy check would fail otherwise, with exit 1.
  const { code, stderr } = await runCli(['serve', '--injected-sidecars', bad], { env: { KUBECONFIG: '', KUBERNETES_SERVICE_HOST: '' } });
  t.equal(code, 2);
  t.match(stderr, `sidecar-terminator: --injected-sidecars ${bad}: an error: entries[0].stop: `);
  t.match(stderr, /loopback/, 'the fix');
});

t.test('a changed file is put in force: listeners told, a line logged, counted ok', async (t) => {
  const { path, source, lines, changes, valid, reloads } = sourceOver(t, ISTIO);
  t.equal(await valid(), 1);
  t.same(await reloads(), { ok: 0, error: 0 }, 'both results counted from 0');
  await source.check();
  t.same(changes, [], 'unchanged: nothing happens');
  writeFileSync(path, LINKERD);
  await source.check();
  t.same(names(source), ['linkerd']);
  t.same(changes, [['linkerd']]);
  t.same(await reloads(), { ok: 1, error: 0 });
  t.match(lines.at(-1), { level: 'info', fields: { path, entries: ['linkerd'] }, message: /changed; the new one is in force/ });
});

t.test('a bad change keeps the last good policy, and says so once: a warning, the metrics, an event on this pod', async (t) => {
  const { path, source, lines, changes, valid, reloads, events } = sourceOver(t, ISTIO);
  writeFileSync(path, BAD_STOP);
  await source.check();
  t.same(names(source), ['istio'], 'the last good policy stays');
  t.same(changes, []);
  t.equal(await valid(), 0);
  t.same(await reloads(), { ok: 0, error: 1 });
  const warning = lines.find((line) => line.level === 'warn');
  t.match(warning, { fields: { path, errors: [/^entries\[0\]\.stop: /] }, message: /changed and cannot be used .*entries\[0\]\.stop.*the policy read before stays in force/ });
  t.match(events(), [
    {
      metadata: { namespace: 'sidecar-terminator', name: /^webhook-7d9f\./ },
      involvedObject: { apiVersion: 'v1', kind: 'Pod', name: 'webhook-7d9f', namespace: 'sidecar-terminator' },
      type: 'Warning',
      reason: INJECTED_POLICY_INVALID_REASON,
      message: warning?.message,
    },
  ]);

  await source.check();
  t.equal(events().length, 1, 'the same bad file read again: no second event');
  t.same(await reloads(), { ok: 0, error: 1 });

  writeFileSync(path, LINKERD);
  await source.check();
  t.same(names(source), ['linkerd'], 'fixed: in force');
  t.equal(await valid(), 1);
  t.same(await reloads(), { ok: 1, error: 1 });
});

t.test('a file that cannot be read is a bad change; without POD_NAME the event is left out, and a refused event is logged', async (t) => {
  const { path, source, lines, events, valid } = sourceOver(t, ISTIO, false);
  rmSync(path);
  await source.check();
  t.same(names(source), ['istio']);
  t.equal(await valid(), 0);
  t.match(lines.find((line) => line.level === 'warn'), { message: /cannot read the policy file: ENOENT/ });
  t.same(events(), [], 'no pod to put an event on');

  const refused = sourceOver(t, ISTIO);
  refused.core.answer('createNamespacedEvent', apiError(403, 'events is forbidden'));
  writeFileSync(refused.path, BAD_STOP);
  await refused.source.check();
  t.match(refused.lines.at(-1), { level: 'warn', fields: { error: 'events is forbidden', reason: INJECTED_POLICY_INVALID_REASON }, message: /cannot record the event/ });

  t.same(ownPodOf({ POD_NAME: 'webhook-7d9f', POD_NAMESPACE: 'sidecar-terminator' }), { name: 'webhook-7d9f', namespace: 'sidecar-terminator' });
  t.equal(ownPodOf({ POD_NAME: 'webhook-7d9f' }), undefined);
});

t.test("a ConfigMap volume's swap by symlink is seen by its content, whatever the file's mtime, on the interval", async (t) => {
  // As the kubelet writes a ConfigMap volume: policy.yaml -> ..data/policy.yaml, ..data -> a timestamped directory.
  const volume = directory(t);
  const version = (name: string, text: string) => {
    mkdirSync(join(volume, name));
    writeFileSync(join(volume, name, 'policy.yaml'), text);
    utimesSync(join(volume, name, 'policy.yaml'), new Date('2020-01-01'), new Date('2020-01-01'));
  };
  version('..2026_01_01_one', ISTIO);
  symlinkSync('..2026_01_01_one', join(volume, '..data'));
  symlinkSync('..data/policy.yaml', join(volume, 'policy.yaml'));
  const path = join(volume, 'policy.yaml');
  const { logger } = capturingLogger();
  const source = new InjectedSidecarPolicySource({ path, loaded: loadInjectedSidecarPolicy(path), checkIntervalMs: 10, logger, metrics: new Registry() });
  source.start();
  t.teardown(() => source.stop());

  version('..2026_01_01_two', LINKERD);
  symlinkSync('..2026_01_01_two', join(volume, '..data_tmp'));
  renameSync(join(volume, '..data_tmp'), join(volume, '..data'));
  const entries = await waitFor('the new policy', () => (names(source)[0] === 'linkerd' ? names(source) : undefined), { timeoutMs: 5000, intervalMs: 10 });
  t.same(entries, ['linkerd']);
});

t.test("the webhook's reads: the namespaces' labels only while an entry has a namespaceSelector, ready once listed at start", async (t) => {
  const MESH = 'entries: [{name: istio, container: istio-proxy, namespaceSelector: {matchLabels: {istio-injection: enabled}}}]\n';
  const { path, source, lines } = sourceOver(t, MESH);
  let answerFirstList: (list: ReturnType<typeof namespaceList>) => void = () => {};
  const caches = [
    fakeNamespaces(new Promise((resolve) => (answerFirstList = resolve))),
    fakeNamespaces(namespaceList([namespace('mesh', { 'istio-injection': 'enabled' })], '20')),
  ];
  let made = 0;
  const readinessChecks: Readiness[] = [];
  const ready = () => readinessChecks.map((check) => check()).find((result) => !result.ready) ?? { ready: true };
  const reads = injectedSidecarReads({ injectedSidecars: source, logger: capturingLogger().logger, readinessChecks }, () => caches[made++]!.listWatch);
  t.teardown(() => reads.stop());

  t.same(reads.settings?.().namespaceLabels, undefined, 'unknown until listed');
  t.match(ready(), { ready: false, reason: /namespaces are not listed yet/ }, 'not ready before the first list');
  answerFirstList(namespaceList([namespace('mesh', { 'istio-injection': 'enabled' })], '10'));
  await waitFor('the first list', () => ready().ready, { timeoutMs: 5000, intervalMs: 5 });
  t.same(reads.settings?.().namespaceLabels?.get('mesh'), { 'istio-injection': 'enabled' });
  t.equal(reads.settings?.().policy, source.current(), 'the policy in force');

  writeFileSync(path, ISTIO);
  await source.check();
  t.equal(reads.settings?.().namespaceLabels, undefined, 'no selector left: the namespaces are no longer read');
  t.ok(caches[0]!.watches.latest?.aborted, 'their watch ended');

  writeFileSync(path, MESH);
  await source.check();
  t.equal(made, 2, 'a selector again: a new cache');
  t.same(ready(), { ready: true }, 'a selector added later does not hold readiness');
  await waitFor('the second list', () => reads.settings?.().namespaceLabels, { timeoutMs: 5000, intervalMs: 5 });
  t.same(lines.filter((line) => line.level === 'warn'), []);

  caches[1]!.answerGet(async (name) => namespace(name, { 'istio-injection': 'enabled' }));
  t.same(await reads.readNamespaceLabels?.('new', 1000), { 'istio-injection': 'enabled' }, 'a namespace not seen yet: read');
  t.same(reads.settings?.().namespaceLabels?.get('new'), { 'istio-injection': 'enabled' }, 'and kept');
  writeFileSync(path, ISTIO);
  await source.check();
  await t.rejects(reads.readNamespaceLabels!('other', 1000), { message: /no longer selects namespaces/ }, 'no selector left: nothing to read');

  t.same(injectedSidecarReads({ logger: capturingLogger().logger, readinessChecks: [] }, () => caches[0]!.listWatch).settings, undefined, 'no policy: nothing to apply');
});

t.test('a listener that throws is logged, and the reads go on: the next change is put in force', async (t) => {
  const { path, source, lines } = sourceOver(t, ISTIO);
  let failing = true;
  const told: string[][] = [];
  source.onChange((policy) => {
    if (failing) throw new Error('the listener failed');
    told.push(policy.entries.map((entry) => entry.name));
  });
  writeFileSync(path, LINKERD);
  await t.resolves(source.check(), 'check() does not reject');
  t.match(lines.find((line) => line.level === 'error'), { fields: { err: { message: 'the listener failed' }, path }, message: /acting on the injected-sidecar policy file failed/ });

  failing = false;
  writeFileSync(path, ISTIO);
  await source.check();
  t.same(names(source), ['istio'], 'the next change is read and put in force');
  t.same(told, [['istio']], 'and told');
});
