// A pod without the managed label: why the webhook did not label it, and what to do.
import {
  ENV_WITH_IMAGE,
  POD_ANNOTATIONS,
  errorsOf,
  formatFinding,
  inspectObject,
  migratedSidecars,
  restartPolicyOf,
  strippedNativeSidecars,
} from '../policy/index.ts';
import { RULES } from '../policy/rules.ts';
import type { PodFacts, PodStory } from './story-types.ts';

export function unmanagedStory(story: PodStory, facts: PodFacts): PodStory {
  const annotations = facts.pod.metadata?.annotations ?? {};
  const moved = migratedSidecars(annotations);
  const stripped = moved.length > 0 ? strippedNativeSidecars(facts.pod.spec ?? { containers: [] }, annotations) : [];
  if (stripped.length > 0) return nativeSidecarLost(story, stripped.map(({ name }) => name).join(', '));
  if (moved.length > 0) {
    // Nothing for the watcher: the kubelet stops native sidecars itself.
    return { ...story, state: 'not managed', notManaged: [`its sidecars ${moved.join(', ')} were moved to native sidecars (init containers with restartPolicy: Always) when it was created: the kubelet stops them once the main containers are done`], advice: [] };
  }
  const reasons: string[] = [];
  const advice: string[] = [];
  specReasons(story, facts, reasons, advice);
  if (reasons.length === 0) webhookReasons(story, facts, reasons, advice);
  return { ...story, state: 'not managed', notManaged: reasons, advice };
}

/** Admitted past the validating webhook (down, with failurePolicy Ignore): a plain init container that never finishes. */
function nativeSidecarLost(story: PodStory, names: string): PodStory {
  return {
    ...story,
    state: 'failed',
    notManaged: [`its sidecars ${names} were moved to native sidecars when it was created, but lost restartPolicy: Always afterwards: as plain init containers they never finish, and the main containers never start`],
    advice: [
      `A mutating webhook that rewrote the init containers after the native-sidecars webhook's last call dropped the field (one built on a client library older than native sidecars), or the API server's SidecarContainers feature gate is off: upgrade or exclude that webhook, or set --native-sidecars=none (chart value admission.nativeSidecars), then replace the pod${story.job ? ` (kubectl delete job -n ${story.namespace} ${story.job}, then create it again)` : ''}.`,
    ],
  };
}

/** What in the pod's spec keeps the webhook from labelling it: no sidecar, its restartPolicy, an error. */
function specReasons(story: PodStory, { pod }: PodFacts, reasons: string[], advice: string[]): void {
  const spec = pod.spec ?? { containers: [] };
  if (!story.containers.some((c) => c.role === 'sidecar')) {
    const inert = story.containers.filter((c) => c.markers.length > 0);
    reasons.push(
      inert.length > 0
        ? `no container is a sidecar: the markers on ${inert.map((c) => c.name).join(', ')} do not make one (KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT must be "true", or ${ENV_WITH_IMAGE} an image)`
        : `no container is marked as a sidecar (env KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true" or KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE, or its name in the pod annotation ${POD_ANNOTATIONS.sidecars})`,
    );
    advice.push('Mark the sidecar: add env KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT: "true" to it in the Job template.');
  }
  const policy = restartPolicyOf(spec);
  if (policy !== 'Never' && policy !== 'OnFailure') {
    reasons.push(`restartPolicy is ${spec.restartPolicy ?? 'unset, which means Always'}: sidecars are stopped only in pods whose restartPolicy is Never or OnFailure`);
    advice.push('Set restartPolicy: Never or OnFailure in the pod template (Jobs require one of them).');
  }
  const inspection = inspectObject({ ...pod, apiVersion: 'v1', kind: 'Pod' }, []);
  const errors = inspection ? errorsOf(inspection.findings) : [];
  if (errors.length > 0) {
    reasons.push(`its sidecar configuration has ${errors.length === 1 ? 'an error' : `${errors.length} errors`}, so the webhook denies such a pod (or, with --enforcement warn, admits it without the label): ${errors.map(formatFinding).join('; ')}`);
    advice.push(...new Set(errors.map((f) => `${f.field}: ${RULES[f.rule].fix}`)));
  }
}

/** A pod the webhook would label: what the registration says of why it did not. */
function webhookReasons(story: PodStory, facts: PodFacts, reasons: string[], advice: string[]): void {
  const webhook = facts.webhook && 'value' in facts.webhook ? facts.webhook.value : undefined;
  if (webhook && !webhook.registered) reasons.push('no sidecar-terminator mutating webhook is registered in the cluster: the add-on is not installed, or its webhook configuration was removed');
  else if (webhook?.namespaceExcluded) reasons.push(`the namespace ${story.namespace} is excluded from the webhooks (the add-on's own namespace, kube-system and --excluded-namespaces), so nothing labels its pods`);
  else {
    reasons.push(
      'the webhook did not label it although it would: the webhook was unreachable when the pod was created (failurePolicy Ignore) and the sweeper has not labelled it yet, or the pod predates the add-on',
    );
    advice.push('The watcher\'s sweeper labels such running pods every --sweep-interval (5m by default); check that the watcher runs and look at its logs.');
  }
  if (webhook?.namespaceExcluded) advice.push('Run the Job in a namespace the webhooks serve, or remove the namespace from webhook.excludedNamespaces.');
}
