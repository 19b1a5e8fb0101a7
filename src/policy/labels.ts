/** The label the webhook sets on pods the watcher manages; the watcher sets it to `done` after. */
export const MANAGED_LABEL = 'sidecar-terminator.io/managed';
export const MANAGED = 'true';
export const DONE = 'done';
