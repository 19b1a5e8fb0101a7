// The list of the cluster's mutating webhooks for pods: read at start and every refresh, the last
// one kept through failures, which are logged once until a read succeeds again.
import t from 'tap';
import type { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { PodMutatingWebhookList } from '../../src/kube/pod-mutating-webhooks.ts';

function listWith() {
  const logs: Array<{ level: string; msg: string }> = [];
  const log = (level: string) => (_fields: object, msg: string) => logs.push({ level, msg });
  const logger = { info: log('info'), warn: log('warn'), debug: log('debug'), error: log('error'), child: () => logger } as never;
  const answers: Array<object | Error> = [];
  let reads = 0;
  const admission = {
    listMutatingWebhookConfiguration: async () => {
      reads++;
      const answer = answers.shift() ?? new Error('no answer');
      if (answer instanceof Error) throw answer;
      return answer;
    },
  } as unknown as AdmissionregistrationV1Api;
  return { list: (refreshMs?: number) => new PodMutatingWebhookList({ admission, ownConfiguration: 'sidecar-terminator', logger, ...(refreshMs ? { refreshMs } : {}) }), answers, logs, reads: () => reads };
}

const configuration = (name: string, reinvocationPolicy = 'Never') => ({
  metadata: { name },
  webhooks: [{ name: `w.${name}.example.com`, reinvocationPolicy, rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'] }] }],
});

t.test('read at start; a failed read keeps the last list and is logged once', async (t) => {
  const { list, answers, logs } = listWith();
  const webhooks = list();
  t.equal(webhooks.current(), undefined, 'nothing before the first read');
  answers.push({ items: [configuration('sidecar-terminator'), configuration('agent', 'IfNeeded')] });
  await webhooks.start();
  webhooks.stop();
  t.same(webhooks.current(), [{ name: 'agent/w.agent.example.com', again: true }], 'ours left out');
  answers.push(Object.assign(new Error('forbidden'), { code: 403 }), new Error('down'));
  await webhooks.refresh();
  await webhooks.refresh();
  t.same(webhooks.current(), [{ name: 'agent/w.agent.example.com', again: true }], 'kept through failures');
  t.same(logs.filter((l) => l.level === 'warn').length, 1, 'one warning for a run of failures');
  answers.push({ items: [] });
  await webhooks.refresh();
  t.same(webhooks.current(), []);
  t.match(logs.at(-1), { level: 'info', msg: 'mutating webhook configurations read again' });
});

t.test('read again every refreshMs until stopped', async (t) => {
  const { list, answers, reads } = listWith();
  answers.push({ items: [] }, { items: [configuration('mesh')] });
  const webhooks = list(20);
  await webhooks.start();
  await new Promise((resolve) => setTimeout(resolve, 100));
  webhooks.stop();
  t.ok(reads() >= 2, `read again (${reads()} reads)`);
  t.same(webhooks.current(), [{ name: 'mesh/w.mesh.example.com', again: false }], "the second read's list, kept through the failed reads after it");
  const after = reads();
  await new Promise((resolve) => setTimeout(resolve, 60));
  t.equal(reads(), after, 'no read after stop');
});
