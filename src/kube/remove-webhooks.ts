// `sidecar-terminator remove-webhooks`: deletes the add-on's MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration. The chart runs it as a pre-delete hook, so that `helm
// uninstall` takes the webhook out of the API server's path before it deletes the Service and
// the Deployments behind it: with failurePolicy Fail, a configuration left pointing at nothing
// refuses every pod of the namespaces it serves.
import { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { isApiError } from './api-errors.ts';
import { loadKubeConfig } from './client.ts';

/** Deletes both configurations named `name`; those already gone are fine. Returns what it deleted. */
export async function removeWebhookConfigurations(api: Pick<AdmissionregistrationV1Api, 'deleteMutatingWebhookConfiguration' | 'deleteValidatingWebhookConfiguration'>, name: string): Promise<string[]> {
  const kinds = {
    MutatingWebhookConfiguration: () => api.deleteMutatingWebhookConfiguration({ name }),
    ValidatingWebhookConfiguration: () => api.deleteValidatingWebhookConfiguration({ name }),
  };
  const deleted: string[] = [];
  for (const [kind, remove] of Object.entries(kinds)) {
    try {
      await remove();
      deleted.push(`${kind}/${name}`);
    } catch (error) {
      if (!isApiError(error, 404)) throw error;
    }
  }
  return deleted;
}

/** The command: one line per configuration deleted, or a line saying there was none. */
export async function runRemoveWebhooks(options: { kubeconfig: string; webhookConfigName: string }, out: { write(text: string): unknown }): Promise<number> {
  const api = loadKubeConfig(options.kubeconfig).makeApiClient(AdmissionregistrationV1Api);
  const deleted = await removeWebhookConfigurations(api, options.webhookConfigName);
  out.write(deleted.length > 0 ? deleted.map((object) => `deleted ${object}\n`).join('') : `no webhook configuration named ${options.webhookConfigName}: nothing to delete\n`);
  return 0;
}
