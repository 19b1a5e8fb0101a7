// What the webhook reads of the cluster in the background: read at start and every interval (sooner
// after a failure), the last value kept through failures, which are logged once until a read
// succeeds again; the mutating webhooks for pods, and the kubelets without native sidecars, page
// by page.
import t from 'tap';
import type { V1NodeList } from '@kubernetes/client-node';
import { PeriodicRead } from '../../src/kube/periodic-read.ts';
import { oldKubeletList, podMutatingWebhookList } from '../../src/kube/pod-mutating-webhooks.ts';
import { fakeAdmissionregistrationV1Api, fakeCoreV1Api, type Partly } from '../support/fake-kube.ts';

function capture() {
  const logs: Array<{ level: string; msg: string }> = [];
  const log = (level: string) => (_fields: object, msg: string) => logs.push({ level, msg });
  const logger = { info: log('info'), warn: log('warn'), debug: log('debug'), error: log('error'), child: () => logger } as never;
  return { logs, logger };
}

/** A read that answers from `answers` in turn (an Error is thrown), counting its calls. */
function scripted(answers: Array<number | Error>) {
  let reads = 0;
  return {
    read: async () => {
      reads++;
      const answer = answers.shift() ?? new Error('no answer');
      if (answer instanceof Error) throw answer;
      return answer;
    },
    reads: () => reads,
  };
}

t.test('read at start; a failed read keeps the last value and is logged once', async (t) => {
  const { logs, logger } = capture();
  const source = scripted([1, new Error('forbidden'), new Error('down'), 2]);
  const value = new PeriodicRead({ read: source.read, everyMs: 60_000, what: 'the things', meanwhile: 'nothing is named', logger });
  t.equal(value.current(), undefined, 'nothing before the first read');
  await value.start();
  value.stop();
  t.equal(value.current(), 1);
  await value.refresh();
  await value.refresh();
  t.equal(value.current(), 1, 'kept through failures');
  t.same(logs.filter((l) => l.level === 'warn').map((l) => l.msg), ['cannot read the things: nothing is named'], 'one warning for a run of failures');
  await value.refresh();
  t.equal(value.current(), 2);
  t.match(logs.at(-1), { level: 'info', msg: 'the things read again' });
});

t.test('read again every everyMs until stopped', async (t) => {
  const { logger } = capture();
  const source = scripted([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  const value = new PeriodicRead({ read: source.read, everyMs: 20, what: 'x', meanwhile: 'y', logger });
  await value.start();
  await new Promise((resolve) => setTimeout(resolve, 100));
  value.stop();
  t.ok(source.reads() >= 3, `read again (${source.reads()} reads)`);
  t.equal(value.current(), source.reads(), 'the last read is the value');
  const after = source.reads();
  await new Promise((resolve) => setTimeout(resolve, 60));
  t.equal(source.reads(), after, 'no read after stop');
});

t.test('a read with no answer fails after the timeout; stop() holds back the read after an answer still in flight', async (t) => {
  const { logs, logger } = capture();
  let answer: (value: number) => void = () => {};
  let reads = 0;
  const read = () => {
    reads++;
    return new Promise<number>((resolve) => (answer = resolve));
  };
  const slow = new PeriodicRead({ read, everyMs: 10, timeoutMs: 20, what: 'the slow things', meanwhile: 'none', logger });
  await slow.start();
  t.equal(slow.current(), undefined, 'no answer within the timeout: no value');
  t.match(logs.at(-1), { level: 'warn', msg: 'cannot read the slow things: none' });
  await new Promise((resolve) => setTimeout(resolve, 15));
  slow.stop();
  answer(1);
  const after = reads;
  await new Promise((resolve) => setTimeout(resolve, 60));
  t.equal(reads, after, 'no read once stopped, though one was in flight');
});

t.test('the mutating webhooks for pods, ours left out', async (t) => {
  const { logger } = capture();
  const rule = { apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'] };
  const admission = fakeAdmissionregistrationV1Api().answer('listMutatingWebhookConfiguration', {
    items: [
      { metadata: { name: 'sidecar-terminator' }, webhooks: [{ name: 'mutate.sidecar-terminator.io', rules: [rule] }] },
      { metadata: { name: 'agent' }, webhooks: [{ name: 'w.agent.example.com', rules: [rule], reinvocationPolicy: 'IfNeeded' }] },
    ],
  }).api;
  const webhooks = podMutatingWebhookList(admission, 'sidecar-terminator', logger);
  await webhooks.refresh();
  t.same(webhooks.current(), [{ name: 'agent/w.agent.example.com', again: true }]);
});

t.test('the kubelets without native sidecars, every page of nodes', async (t) => {
  const { logger } = capture();
  const node = (name: string, kubeletVersion: string, labels: Record<string, string> = {}) => ({ metadata: { name, labels }, status: { nodeInfo: { kubeletVersion } } });
  const pages: Record<string, Partly<V1NodeList>> = {
    first: { items: [node('a', 'v1.37.2'), node('old', 'v1.28.9')], metadata: { _continue: 'second' } },
    second: { items: [node('vk', 'v1.19.3-vk', { type: 'virtual-kubelet' }), node('older', 'v1.27.1-eks-1234')], metadata: {} },
  };
  const core = fakeCoreV1Api().handle('listNode', (request) => pages[request?._continue ?? 'first']!);
  const kubelets = oldKubeletList(core.api, logger);
  await kubelets.refresh();
  t.same(kubelets.current(), [{ node: 'old', version: 'v1.28.9' }, { node: 'older', version: 'v1.27.1-eks-1234' }], 'the virtual node left out');
  t.same(core.requests('listNode'), [{ limit: 500 }, { limit: 500, _continue: 'second' }], 'page by page');
});
