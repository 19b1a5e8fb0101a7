// What the watcher leaves on the pods it acts on, for the people and tools that read them
// (kubectl, alerts, dashboards, `sidecar-terminator status`): the reasons of its events and its
// pod condition. The label that marks a managed pod, and its values, are in labels.ts.

/** Reasons of the events the watcher records on pods. */
export const EVENT_REASONS = {
  /** Normal: the sidecars are being told to stop. OpenKruise's reason, so filters written for Kruise keep working. */
  stopping: 'SidecarTerminator',
  /** Warning: a sidecar cannot be stopped, or stopping it failed; the message says why and what to do. */
  failed: 'SidecarTerminationFailed',
} as const;

/**
 * The pod condition the watcher sets (OpenKruise's type), when the pod's status has something to
 * say that the event does not: True with the terminal phase the watcher sets (as Kruise sets it),
 * False while a sidecar cannot be stopped yet (True again once it can).
 */
export const TERMINATED_CONDITION = 'SidecarTerminated';

/** Reasons of that condition. */
export const CONDITION_REASONS = {
  /** True: the pod was moved to its terminal phase, or every sidecar was told to stop after a wait. */
  stopping: 'SidecarsStopped',
  /** False: a sidecar waits for a quick-exit image its node cannot pull. */
  imageNotPulled: 'QuickExitImageNotPulled',
} as const;
