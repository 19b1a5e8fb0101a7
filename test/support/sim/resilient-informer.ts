// A list+watch that never gives up. client-node's informer already relists on 410 Gone and
// rewatches after its client-side timeout; on any other error (API server restarting, a CRD
// not installed yet) it stops, so it is started again after a pause.
import { makeInformer, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import { describeError, isApiError } from './api-errors.ts';

const retryDelayMs = 1000;

export interface InformerHandlers<T> {
  /** Added or modified (also for every object of a relist). */
  changed(object: T): void;
  deleted(object: T): void;
}

export interface RunningInformer {
  stop(): Promise<void>;
}

export async function startResilientInformer<T extends KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  list: () => Promise<KubernetesListObject<T>>,
  handlers: InformerHandlers<T>,
  log: (message: string) => void,
): Promise<RunningInformer> {
  const informer = makeInformer(kubeConfig, path, list);
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  informer.on('add', (object) => handlers.changed(object));
  informer.on('update', (object) => handlers.changed(object));
  informer.on('delete', (object) => handlers.deleted(object));
  const failed = (err: unknown) => {
    if (stopped) return;
    // 404: the resource is not served (yet); 429: its storage is still starting. Quietly look again later.
    if (!isApiError(err, 404) && !isApiError(err, 429)) log(`watch ${path}: ${describeError(err)}; retrying`);
    clearTimeout(retry);
    // A start that fails before it reaches the API server (e.g. its CA file is gone) rejects
    // instead of emitting 'error'; either way one retry is pending, and none after stop().
    retry = setTimeout(() => {
      if (!stopped) informer.start().catch(failed);
    }, retryDelayMs);
  };
  informer.on('error', failed);
  await informer.start();
  return {
    async stop() {
      stopped = true;
      clearTimeout(retry);
      await informer.stop();
    },
  };
}
