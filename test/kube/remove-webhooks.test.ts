// remove-webhooks (the chart's pre-delete hook) deletes both configurations; one already gone is
// fine, any other error fails the hook, which Helm then reports.
import t from 'tap';
import { removeWebhookConfigurations } from '../../src/kube/remove-webhooks.ts';

const apiError = (code: number) => Object.assign(new Error(`HTTP ${code}`), { code });

t.test('both deleted; one already gone is no error; a refusal is', async (t) => {
  const calls: string[] = [];
  const api = (mutating: number, validating: number) => ({
    deleteMutatingWebhookConfiguration: async ({ name }: { name: string }) => {
      calls.push(`mutating ${name}`);
      if (mutating !== 200) throw apiError(mutating);
      return {};
    },
    deleteValidatingWebhookConfiguration: async ({ name }: { name: string }) => {
      calls.push(`validating ${name}`);
      if (validating !== 200) throw apiError(validating);
      return {};
    },
  });
  t.same(await removeWebhookConfigurations(api(200, 200), 'st'), ['MutatingWebhookConfiguration/st', 'ValidatingWebhookConfiguration/st']);
  t.same(calls, ['mutating st', 'validating st']);
  t.same(await removeWebhookConfigurations(api(404, 200), 'st'), ['ValidatingWebhookConfiguration/st'], 'gone already');
  await t.rejects(removeWebhookConfigurations(api(200, 403), 'st'), { code: 403 }, 'forbidden: the hook fails');
});
