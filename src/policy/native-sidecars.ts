// Native sidecar migration (--native-sidecars): whether the containers of a pod marked with
// KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true move to initContainers with restartPolicy: Always
// when the pod is created. Kubernetes runs such native sidecars itself: they start before the
// main containers, and the kubelet stops them once the main containers are done, with no
// watcher in the path. Pure: the mutating webhook applies the plan, the validating webhook
// checks that the API server kept it, and lint reports it.
//
// A pod moves only when the move cannot change what it does; otherwise it stays as it is (the
// watcher stops its sidecars) and the plan says why. All of a pod's sidecars move, or none: a
// migrated pod is never also managed by the watcher. So a sidecar another webhook injected, which
// stays where its injector puts it, keeps the pod's own marked sidecars where they are too: moved
// alone, they would start before it, and a mesh proxy that captures the pod's traffic (Istio's,
// Linkerd's) is not up yet to carry theirs.
import { clipValue, listedFindings, type Finding } from './findings.ts';
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, annotationNames, classifyContainers, isTrueValue, markerEntries } from './markers.ts';
import { INJECTED_POLICY_ANNOTATION, MIGRATED_ANNOTATION, NATIVE_SIDECARS_OPT_OUT, POD_ANNOTATIONS } from './names.ts';
import { nodeKindOf, virtualNodeField } from './nodes.ts';
import { podMetadataPrefix } from './templates.ts';
import { arrayOf, isRecord, restartPolicyOf, type Container, type PodSpec } from './types.ts';

export const NATIVE_SIDECARS_MODES = ['none', 'labelled', 'all'] as const;
/** Which pods the webhook migrates: none, those of namespaces carrying NATIVE_SIDECARS_NAMESPACE_LABEL, or all it serves. */
export type NativeSidecarsMode = (typeof NATIVE_SIDECARS_MODES)[number];

export type MigrationPlan =
  /** Move these containers (names, in their order in spec.containers); `findings` say so, one per container. */
  | { outcome: 'migrate'; sidecars: string[]; findings: Finding[] }
  /** The pod could move but must not: `findings` say why, each at the field that prevents it. */
  | { outcome: 'keep'; findings: Finding[] }
  /** Nothing to decide: no sidecar, a restartPolicy the markers do not apply to, or the pod opted out. */
  | { outcome: 'none'; reason: string };

/** A node whose kubelet runs no native sidecars. */
export interface OldKubelet {
  node: string;
  /** Its kubelet's version, as the node reports it. */
  version: string;
}

/**
 * The nodes whose kubelets run no native sidecars (older than 1.29): a pod migrated there would
 * run its sidecar as a plain init container that never finishes (the kubelet ignores the field
 * it does not know), so no pod is migrated while the cluster has one. Virtual-kubelet nodes are
 * left out: a pod that can run on them is not migrated anyway, and so is a node whose version
 * cannot be read (a node object without a kubelet behind it yet).
 */
export function kubeletsWithoutNativeSidecars(nodes: readonly unknown[]): OldKubelet[] {
  return nodes.flatMap((node) => {
    if (!isRecord(node) || nodeKindOf(node) === 'virtual') return [];
    const name = isRecord(node.metadata) && typeof node.metadata.name === 'string' ? node.metadata.name : '?';
    const info = isRecord(node.status) && isRecord(node.status.nodeInfo) ? node.status.nodeInfo : {};
    const version = typeof info.kubeletVersion === 'string' ? info.kubeletVersion : '';
    const parsed = parseKubernetesVersion({ gitVersion: version });
    return !parsed || parsed.major > 1 || parsed.minor >= NATIVE_SIDECARS_SINCE ? [] : [{ node: name, version }];
  });
}

export interface MigrationInput {
  /** The pod's spec, or its template's. */
  spec: unknown;
  /** The pod's annotations, or its template's. */
  annotations: Record<string, unknown>;
  /** Path of the spec inside the object: `spec`, `spec.template.spec`, ... */
  fieldPrefix: string;
  /** The sidecar configuration has an error: such a pod is left to the watcher, which handles it as OpenKruise does. */
  hasErrors: boolean;
  /** The cluster's nodes whose kubelets run no native sidecars, or 'unread' until they are known; none without it (lint, a pod judged alone). */
  oldKubelets?: readonly OldKubelet[] | 'unread' | undefined;
  /** The sidecars the injected-sidecar policy named on this pod, each with its entry's name (the webhook's; none in lint). */
  injectedSidecars?: ReadonlyMap<string, string>;
}

export function planNativeSidecars({ spec: rawSpec, annotations, fieldPrefix, hasErrors, oldKubelets = [], injectedSidecars = new Map() }: MigrationInput): MigrationPlan {
  const spec: PodSpec = isRecord(rawSpec) ? rawSpec : {};
  const restartPolicy = restartPolicyOf(spec);
  if (restartPolicy !== 'Never' && restartPolicy !== 'OnFailure') return { outcome: 'none', reason: 'restartPolicy is neither Never nor OnFailure' };
  const sidecars = classifyContainers(spec, annotations).filter((role) => role.role === 'sidecar');
  if (sidecars.length === 0) return { outcome: 'none', reason: 'no container is marked as a sidecar' };
  const optOut = annotations[NATIVE_SIDECARS_OPT_OUT.key];
  if (optOut === NATIVE_SIDECARS_OPT_OUT.value) return { outcome: 'none', reason: `the pod is annotated ${NATIVE_SIDECARS_OPT_OUT.key}: ${NATIVE_SIDECARS_OPT_OUT.value}` };

  const obstacles: Finding[] = [];
  const obstacle = (field: string, detail: string, value?: Pick<Finding, 'type' | 'value'>) =>
    obstacles.push({ rule: 'native-sidecar-migration-skipped', severity: 'info', field, ...value, detail });
  if (optOut !== undefined) {
    obstacle(
      `${podMetadataPrefix(fieldPrefix)}.annotations[${NATIVE_SIDECARS_OPT_OUT.key}]`,
      `the only value is "${NATIVE_SIDECARS_OPT_OUT.value}", which keeps the pod as it is; remove the annotation to let its sidecars move`,
      { type: 'Unsupported value', value: typeof optOut === 'string' ? optOut : JSON.stringify(optOut) },
    );
  }
  if (hasErrors) {
    obstacle(`${fieldPrefix}.containers`, 'the sidecar configuration has errors, so the pod is handled as OpenKruise handles it; fix them to let its sidecars move');
  }
  if (oldKubelets === 'unread') {
    obstacle(`${fieldPrefix}.containers`, "the nodes' kubelet versions are not read yet (the webhook reads them in the background; its log says why when it cannot): on a kubelet before 1.29 a native sidecar would be a plain init container that never finishes");
  } else if (oldKubelets.length > 0) {
    const named = oldKubelets.slice(0, 3).map(({ node, version }) => `${clipValue(node)} (${clipValue(version)})`).join(', ') + (oldKubelets.length > 3 ? ` and ${oldKubelets.length - 3} more` : '');
    obstacle(`${fieldPrefix}.containers`, `the cluster has nodes whose kubelet runs no native sidecars (before 1.29): ${named}; there a native sidecar would be a plain init container that never finishes`);
  }
  const virtual = virtualNodeField(spec);
  if (virtual) {
    obstacle(`${fieldPrefix}.${virtual}`, 'the pod can run on virtual-kubelet nodes, whose providers may not run native sidecars; there a sidecar is stopped by its quick-exit image');
  }
  const containers = arrayOf(spec.containers);
  for (const sidecar of sidecars) {
    const path = `${fieldPrefix}.containers[${sidecar.index}]`;
    // A record: only a record can carry the markers that make a sidecar.
    const container = containers[sidecar.index] as Container;
    const marked = markerEntries(container).some((entry) => entry.name === ENV_WHEN_JOB_EXIT && isTrueValue(entry.value));
    if (sidecar.markers.whenJobExit && !marked) {
      const entry = injectedSidecars.get(sidecar.name);
      if (entry === undefined) {
        obstacle(`${podMetadataPrefix(fieldPrefix)}.annotations[${POD_ANNOTATIONS.sidecars}]`, `sidecar ${sidecar.name} is named by the pod's annotation, not marked: another webhook may inject it, and it stays where that webhook puts it`);
      } else {
        obstacle(
          `${podMetadataPrefix(fieldPrefix)}.annotations[${INJECTED_POLICY_ANNOTATION}]`,
          `sidecar ${sidecar.name} is named by entry ${clipValue(entry)} of the injected-sidecar policy: another webhook injects it, and it stays where that webhook puts it, and so do the pod's other sidecars (they move all or none)`,
        );
      }
    }
    if (sidecar.markers.stop.kind === 'http') {
      obstacle(`${path}`, `sidecar ${sidecar.name} is stopped by its HTTP shutdown request; a native sidecar gets SIGTERM instead`);
    }
    if (!sidecar.markers.whenJobExit) {
      obstacle(
        `${path}.env[${ENV_WITH_IMAGE}]`,
        `sidecar ${sidecar.name} is stopped by its quick-exit image alone; a native sidecar gets SIGTERM instead, which it may not handle; add ${ENV_WHEN_JOB_EXIT}="true" to allow that`,
      );
    }
    if (isSet(container.startupProbe)) {
      obstacle(`${path}.startupProbe`, `as a native sidecar, ${sidecar.name} would hold back the main containers until this probe succeeds`);
    }
    if (isRecord(container.lifecycle) && isSet(container.lifecycle.postStart)) {
      obstacle(`${path}.lifecycle.postStart`, `as a native sidecar, ${sidecar.name} would hold back the main containers until this hook completes`);
    }
    if (isSet(container.restartPolicy) || isSet(container.restartPolicyRules)) {
      obstacle(`${path}.${isSet(container.restartPolicy) ? 'restartPolicy' : 'restartPolicyRules'}`, `sidecar ${sidecar.name} sets its own restart policy, which a native sidecar replaces with Always`);
    }
  }
  if (obstacles.length > 0) return { outcome: 'keep', findings: obstacles };

  const initCount = arrayOf(spec.initContainers).length;
  return {
    outcome: 'migrate',
    sidecars: sidecars.map((sidecar) => sidecar.name),
    findings: sidecars.map((sidecar, order) => ({
      rule: 'native-sidecar-migration',
      severity: 'info',
      field: `${fieldPrefix}.containers[${sidecar.index}]`,
      detail: `sidecar ${sidecar.name} moves to initContainers[${initCount + order}] with restartPolicy: Always when the pod is created: the kubelet stops it once the main containers are done`,
    })),
  };
}

/**
 * The spec with these containers moved from containers to the end of initContainers, in their
 * order, with restartPolicy: Always. Native sidecars start in order before the main containers,
 * after the regular init containers before them: those still run first, as they did.
 */
export function migratePodSpec(spec: Record<string, unknown>, sidecars: readonly string[]): Record<string, unknown> {
  const moving = new Set(sidecars);
  const moves = (container: unknown) => isRecord(container) && typeof container.name === 'string' && moving.has(container.name);
  const containers = arrayOf(spec.containers);
  const moved = containers.filter(moves).map((container) => ({ ...(container as Record<string, unknown>), restartPolicy: 'Always' }));
  return { ...spec, initContainers: [...arrayOf(spec.initContainers), ...moved], containers: containers.filter((container) => !moves(container)) };
}

/** The names MIGRATED_ANNOTATION lists. */
export function migratedSidecars(annotations: Record<string, unknown>): string[] {
  return annotationNames(annotations[MIGRATED_ANNOTATION]);
}

/** MIGRATED_ANNOTATION's value after `sidecars` moved too (a reinvocation after a later webhook added one). */
export function migratedAnnotation(annotations: Record<string, unknown>, sidecars: readonly string[]): string {
  return [...new Set([...migratedSidecars(annotations), ...sidecars])].join(',');
}

/** SKIPPED_ANNOTATION's value: the reasons, as the findings word them (the first few, and how many more). */
export function skippedAnnotation(findings: readonly Finding[]): string {
  return listedFindings(findings, 'reason').join('; ');
}

/**
 * The migrated sidecars (MIGRATED_ANNOTATION) that are init containers without restartPolicy:
 * Always, by position in spec.initContainers. Two things strip it: a mutating webhook that ran
 * after this one and rewrote the init containers with a client that predates the field (it drops
 * what it does not know), and the API server itself, after every mutating webhook, when its
 * SidecarContainers feature gate is off (it can be turned off up to Kubernetes 1.32).
 */
export function strippedNativeSidecars(rawSpec: unknown, annotations: Record<string, unknown>): Array<{ index: number; name: string }> {
  const spec: PodSpec = isRecord(rawSpec) ? rawSpec : {};
  const migrated = new Set(migratedSidecars(annotations));
  return arrayOf(spec.initContainers).flatMap((container, index) =>
    isRecord(container) && typeof container.name === 'string' && migrated.has(container.name) && container.restartPolicy !== 'Always' ? [{ index, name: container.name }] : [],
  );
}

/**
 * The spec with restartPolicy: Always put back on these init containers (strippedNativeSidecars).
 * The mutating webhook does it when it is called again after the webhook that stripped them
 * (reinvocationPolicy IfNeeded); with the feature gate off, the API server strips them again.
 */
export function restoreNativeSidecars(spec: Record<string, unknown>, stripped: ReadonlyArray<{ index: number }>): Record<string, unknown> {
  const indexes = new Set(stripped.map(({ index }) => index));
  return { ...spec, initContainers: arrayOf(spec.initContainers).map((container, index) => (indexes.has(index) && isRecord(container) ? { ...container, restartPolicy: 'Always' } : container)) };
}

/** A mutating webhook the API server calls when a pod is created, and whether it calls it again after later ones (reinvocationPolicy IfNeeded). */
export interface PodMutatingWebhook {
  /** `configuration/webhook`. */
  name: string;
  again: boolean;
}

const covers = (list: unknown, ...values: string[]) => arrayOf(list).some((value) => value === '*' || values.includes(value as string));

/**
 * The webhooks of these MutatingWebhookConfigurations whose rules cover the creation of pods
 * (selectors aside: the namespace's labels are not at hand), other than those of `own`, the
 * add-on's configuration. Read defensively: the list comes from the cluster.
 */
export function podMutatingWebhooks(configurations: readonly unknown[], own: string): PodMutatingWebhook[] {
  return configurations.flatMap((configuration) => {
    if (!isRecord(configuration) || !isRecord(configuration.metadata)) return [];
    const name = configuration.metadata.name;
    if (typeof name !== 'string' || name === own) return [];
    return arrayOf(configuration.webhooks).flatMap((webhook) => {
      if (!isRecord(webhook) || typeof webhook.name !== 'string') return [];
      const forPods = arrayOf(webhook.rules).some(
        (rule) => isRecord(rule) && covers(rule.apiGroups, '') && covers(rule.apiVersions, 'v1') && covers(rule.resources, 'pods', '*/*') && covers(rule.operations, 'CREATE'),
      );
      return forPods ? [{ name: `${name}/${webhook.name}`, again: webhook.reinvocationPolicy === 'IfNeeded' }] : [];
    });
  });
}

/** At most this many webhooks are named: a cluster may register many. */
const MAX_NAMED_WEBHOOKS = 10;

/**
 * Which mutating webhooks may have dropped restartPolicy: Always, in words, for a refusal. A
 * webhook called once ran before the native-sidecars webhook's second call, which put the field
 * back: only one called again (IfNeeded) can have dropped it for good.
 */
export function suspectWebhooks(webhooks: readonly PodMutatingWebhook[]): string {
  const named = (list: readonly PodMutatingWebhook[]) =>
    list.slice(0, MAX_NAMED_WEBHOOKS).map((webhook) => clipValue(webhook.name)).join(', ') + (list.length > MAX_NAMED_WEBHOOKS ? ` and ${list.length - MAX_NAMED_WEBHOOKS} more` : '');
  const again = webhooks.filter((webhook) => webhook.again);
  if (again.length > 0) return `the mutating webhooks for pods called again after the others (reinvocationPolicy IfNeeded), one of which dropped it: ${named(again)}`;
  if (webhooks.length > 0) return `no other mutating webhook for pods is called again after the others (reinvocationPolicy IfNeeded), so none of these dropped it for good: ${named(webhooks)}; the feature gate did`;
  return 'no other mutating webhook is registered for pods: the feature gate dropped it';
}

/** A Kubernetes version, as the API server's /version reports it. */
export interface KubernetesVersion {
  gitVersion: string;
  major: number;
  minor: number;
}

/** The version from /version's fields; providers write minor as "29+" and add suffixes to gitVersion. */
export function parseKubernetesVersion(info: { gitVersion?: unknown; major?: unknown; minor?: unknown }): KubernetesVersion | undefined {
  const gitVersion = typeof info.gitVersion === 'string' ? info.gitVersion : '';
  const fromGit = /^v?(\d+)\.(\d+)/.exec(gitVersion);
  const text = (value: unknown) => (typeof value === 'string' ? value : '');
  const major = Number.parseInt(text(info.major) || fromGit?.[1] || '', 10);
  const minor = Number.parseInt(text(info.minor) || fromGit?.[2] || '', 10);
  if (!Number.isInteger(major) || !Number.isInteger(minor)) return undefined;
  return { gitVersion: gitVersion || `v${major}.${minor}`, major, minor };
}

/** The first minor release of Kubernetes 1 that runs native sidecars by default (beta; GA in 1.33). */
export const NATIVE_SIDECARS_SINCE = 29;
const NATIVE_SIDECARS_GA = 33;

/** Whether the server runs native sidecars, and what that means for --native-sidecars, in words for the log. */
export function nativeSidecarSupport(version: KubernetesVersion): { supported: boolean; note: string } {
  if (version.major > 1 || version.minor >= NATIVE_SIDECARS_GA) return { supported: true, note: `Kubernetes ${version.gitVersion} runs native sidecars (GA since 1.33)` };
  if (version.minor >= NATIVE_SIDECARS_SINCE) {
    return {
      supported: true,
      note: `Kubernetes ${version.gitVersion} runs native sidecars unless its SidecarContainers feature gate is off (beta, on by default); if it is off, the validating webhook refuses the pods whose native sidecars the API server dropped`,
    };
  }
  return {
    supported: false,
    note: `Kubernetes ${version.gitVersion} predates native sidecars (1.${NATIVE_SIDECARS_SINCE}): no pod is migrated, the watcher stops the sidecars of every pod`,
  };
}

function isSet(value: unknown): boolean {
  return value !== undefined && value !== null;
}
