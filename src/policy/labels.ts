/** The label the webhook sets on pods the watcher manages. */
export const MANAGED_LABEL = 'sidecar-terminator.io/managed';
export const MANAGED = 'true';
/** Set by earlier versions of the watcher on the pods it was finished with; `status --all` still lists them. */
export const DONE = 'done';
/**
 * The managed pods still in flight: a pod in a terminal phase has nothing left to stop (the kubelet
 * starts no container of it again), so the watcher's watch leaves it out, and the API server drops
 * a pod from that watch when it ends, without a write from the watcher.
 */
export const IN_FLIGHT_FIELD_SELECTOR = 'status.phase!=Succeeded,status.phase!=Failed';
