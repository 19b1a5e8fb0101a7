// The cluster's mutating webhooks for pods, read every minute while native sidecar migration is
// on: a pod whose native sidecars lost restartPolicy: Always is refused naming the webhooks that
// may have dropped it (src/policy/native-sidecars.ts). Read in the background, so that no
// admission waits for the API server; a refusal names them as they were up to a minute before.
import type { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { apiErrorMessage } from './api-errors.ts';
import type { Logger } from '../logger.ts';
import { podMutatingWebhooks, type PodMutatingWebhook } from '../policy/index.ts';

/** How often the list is read again. */
export const POD_MUTATING_WEBHOOKS_REFRESH_MS = 60_000;

export interface PodMutatingWebhookListOptions {
  admission: Pick<AdmissionregistrationV1Api, 'listMutatingWebhookConfiguration'>;
  /** The add-on's own configuration, left out. */
  ownConfiguration: string;
  logger: Logger;
  refreshMs?: number;
}

export class PodMutatingWebhookList {
  private readonly options: PodMutatingWebhookListOptions;
  private webhooks: readonly PodMutatingWebhook[] | undefined;
  private timer: NodeJS.Timeout | undefined;
  private failing = false;

  constructor(options: PodMutatingWebhookListOptions) {
    this.options = options;
  }

  /** The list as last read; undefined until the first read succeeds. */
  current(): readonly PodMutatingWebhook[] | undefined {
    return this.webhooks;
  }

  /** Reads the list now, then every refreshMs until stop(). */
  async start(): Promise<void> {
    await this.refresh();
    const every = this.options.refreshMs ?? POD_MUTATING_WEBHOOKS_REFRESH_MS;
    const next = () => {
      this.timer = setTimeout(() => void this.refresh().then(next), every);
      this.timer.unref();
    };
    next();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** One read; a failure keeps the last list and is logged once until a read succeeds again. */
  async refresh(): Promise<void> {
    const { admission, ownConfiguration, logger } = this.options;
    try {
      const list = await admission.listMutatingWebhookConfiguration();
      this.webhooks = podMutatingWebhooks(list.items, ownConfiguration);
      if (this.failing) logger.info({ webhooks: this.webhooks.length }, 'mutating webhook configurations read again');
      this.failing = false;
    } catch (error) {
      if (!this.failing) logger.warn({ error: apiErrorMessage(error) }, 'cannot list the mutating webhook configurations: a pod refused for lost native sidecars names no webhook until they can be read');
      this.failing = true;
    }
  }
}
