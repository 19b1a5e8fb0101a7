// Validation of the sidecar configuration of one pod spec (a pod's, or a template's): the rules
// of docs/admission-rules.md. Pure: the webhook and the lint command both call it.
import { clipValue, type Finding, type FindingType, type Report, type RuleId } from './findings.ts';
import { isAllowedImage, isSameImage, parseImageReference } from './image.ts';
import {
  ENV_GRACE_PERIOD,
  ENV_IGNORE_EXIT_CODE,
  ENV_STOP,
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  annotationNames,
  classifyContainers,
  markerEntries,
  type ContainerRole,
  type MarkerEntry,
  type MarkerName,
  type SidecarMarkers,
} from './markers.ts';
import { MIGRATED_ANNOTATION, POD_ANNOTATIONS } from './names.ts';
import { strippedNativeSidecars } from './native-sidecars.ts';
import { targetsVirtualNodes } from './nodes.ts';
import { parseGracePeriod, parseStopMethod } from './stop-method.ts';
import { fixClause, severityOf } from './rules.ts';
import { podMetadataPrefix, type JobSpecLocation } from './templates.ts';
import { DNS_LABEL, arrayOf, isRecord, restartPolicyOf, type Container, type PodSpec } from './types.ts';
import { validateExits } from './validate-exits.ts';

export interface ValidationOptions {
  /** Path of the pod spec inside the admitted object: `spec`, `spec.template.spec`, ... */
  fieldPrefix: string;
  /** Markers on an `Always` pod are an error (Job/CronJob templates, pods asking for it), else a warning. */
  strictRestartPolicy: boolean;
  /** When non-empty, quick-exit images must match one of these patterns (`*` is a wildcard). */
  quickExitImageAllowlist?: readonly string[];
  /** Init containers the webhook made native sidecars (MIGRATED_ANNOTATION): their markers come from the template, and stay. */
  migratedSidecars?: readonly string[];
  /** The pod's annotations, or its template's: they may name sidecars and say how to stop them. */
  annotations?: Record<string, unknown>;
  /**
   * The spec is a pod's, with every container injected: a name the annotations give must be one
   * of them, and a sidecar moved to a native sidecar must have kept restartPolicy: Always.
   */
  containersFinal?: boolean;
  /** The Job spec the template is part of, for a Job or a CronJob: its podFailurePolicy is checked too. */
  job?: JobSpecLocation;
}

export function validatePodSpec(rawSpec: unknown, options: ValidationOptions): Finding[] {
  const spec: PodSpec = isRecord(rawSpec) ? rawSpec : {};
  const findings: Finding[] = [];
  // The severity is the rule's (rules.ts): its milder one where the case is.
  const report: Report = (finding, milder = false) => findings.push({ severity: severityOf(finding.rule, milder), ...finding });

  const containersPath = `${options.fieldPrefix}.containers`;
  const annotations = options.annotations ?? {};
  const roles = classifyContainers(spec, annotations);
  arrayOf(spec.containers).forEach((raw, index) => {
    const container: Container = isRecord(raw) ? raw : {};
    validateContainerMarkers(container, roles[index]!, `${containersPath}[${index}]`, options, report);
  });
  validateAnnotations(annotations, roles, options, report);

  const sidecars = roles.filter((role) => role.role === 'sidecar');
  if (sidecars.length > 0) validatePodLevel(spec, roles, sidecars, options, report);

  const migrated = new Set(options.migratedSidecars);
  // A pod's only: the mutating webhook repairs a template's when it creates its pods.
  const lost = new Map(options.containersFinal ? strippedNativeSidecars(spec, annotations).map(({ index, name }) => [index, name]) : []);
  arrayOf(spec.initContainers).forEach((raw, index) => {
    if (!isRecord(raw)) return;
    const native = raw.restartPolicy === 'Always';
    if (native && typeof raw.name === 'string' && migrated.has(raw.name)) return;
    const lostName = lost.get(index);
    if (lostName !== undefined) {
      report({ rule: 'native-sidecar-lost', field: `${options.fieldPrefix}.initContainers[${index}].restartPolicy`, type: 'Required value', detail: lostDetail(lostName) });
      return;
    }
    for (const entry of markerEntries(raw)) {
      report({
        rule: 'marker-on-init-container',
        field: `${options.fieldPrefix}.initContainers[${index}].env[${entry.name}]`,
        detail: native
          ? 'markers have no effect on init containers; this is a native sidecar (restartPolicy: Always), which Kubernetes already stops when the main containers finish, so remove the marker'
          : 'markers have no effect on init containers, which run to completion before the main containers start; move it to the sidecar in spec.containers or remove it',
      });
    }
  });
  return findings;
}

/**
 * Why a migrated sidecar that arrived as a plain init container is refused, and both causes: the
 * mutating webhook puts back what a later webhook strips when it is called again, but a webhook
 * that runs after that call, or the feature gate, still wins.
 */
function lostDetail(name: string): string {
  return (
    `${clipValue(name)} was moved here as a native sidecar (annotation ${MIGRATED_ANNOTATION}), but its restartPolicy: Always was dropped, ` +
    'by a mutating webhook that rewrote the init containers after the last call of the native-sidecars webhook (one built on a client library older than native sidecars drops the field; upgrade it, or exclude these pods from it), ' +
    'or by the API server when its SidecarContainers feature gate is off (up to Kubernetes 1.32; turn it on); as a plain init container it would never finish and the main containers would never start; ' +
    'or set --native-sidecars=none (chart value admission.nativeSidecars)'
  );
}

function validateContainerMarkers(
  container: Container,
  role: ContainerRole,
  path: string,
  options: ValidationOptions,
  report: Report,
): void {
  const entries = markerEntries(container);
  if (entries.length === 0) return;
  const byName = new Map<MarkerName, MarkerEntry[]>();
  for (const entry of entries) {
    const definitions = byName.get(entry.name);
    if (definitions) definitions.push(entry);
    else byName.set(entry.name, [entry]);
  }
  const envPath = (name: MarkerName) => `${path}.env[${name}]`;

  for (const [name, definitions] of byName) {
    if (definitions.length < 2 || name === ENV_STOP || name === ENV_GRACE_PERIOD) continue;
    report({
      rule: 'duplicate-marker',
      field: envPath(name),
      type: 'Duplicate value',
      value: name,
      detail: `defined ${definitions.length} times in this container; ${duplicateOutcome(name, role.markers)}; keep one definition`,
    });
  }

  // Every definition is checked (each one counts at run time), each distinct mistake once.
  const reported = new Set<string>();
  for (const entry of entries) {
    const key = `${entry.name}\n${entry.fromValueFrom ? 'valueFrom' : entry.value}`;
    if (reported.has(key)) continue;
    reported.add(key);
    if (entry.fromValueFrom) {
      report({
        rule: 'marker-value-from',
        field: `${envPath(entry.name)}.valueFrom`,
        type: 'Forbidden',
        detail: `sidecar markers must be literal values: valueFrom cannot be read from the pod spec, so the marker would silently do nothing; set value: ${LITERAL_VALUES[entry.name]} instead`,
      });
    } else if (entry.name === ENV_STOP || entry.name === ENV_GRACE_PERIOD) {
      const problem = settingProblem(entry.name, entry.value ?? '');
      if (problem) report({ ...problem, field: envPath(entry.name), type: 'Invalid value', value: entry.value ?? '' });
    } else if (entry.name !== ENV_WITH_IMAGE && !/^(true|false)$/i.test(entry.value ?? '')) {
      report({
        rule: 'marker-value',
        field: envPath(entry.name),
        type: 'Invalid value',
        value: entry.value ?? '',
        detail: 'must be "true" or "false" (any case); any other value counts as "false", as in OpenKruise',
      });
    }
  }

  // The quick-exit image used is the first definition's, as OpenKruise picks it.
  const image = byName.get(ENV_WITH_IMAGE)?.[0];
  if (image && !image.fromValueFrom) validateQuickExitImage(container, image.value ?? '', envPath(ENV_WITH_IMAGE), options, report);

  for (const name of [ENV_STOP, ENV_GRACE_PERIOD] as const) {
    if (!byName.has(name) || role.markers.whenJobExit) continue;
    report({
      rule: 'stop-without-sidecar',
      field: envPath(name),
      type: 'Forbidden',
      detail: `takes effect only on a sidecar stopped by the kill mechanism: add ${ENV_WHEN_JOB_EXIT}="true" to the container (or name it in the ${POD_ANNOTATIONS.sidecars} annotation), or remove this variable`,
    });
  }

  if (role.markers.ignoreExitCode && !role.markers.whenJobExit && byName.has(ENV_IGNORE_EXIT_CODE)) {
    report({
      rule: 'ignore-exit-code-without-kill',
      field: envPath(ENV_IGNORE_EXIT_CODE),
      type: 'Forbidden',
      detail: `takes effect only together with ${ENV_WHEN_JOB_EXIT}="true" on the same container; add that variable, or remove this one`,
    });
  }
}

/** What a marker set through valueFrom should be set to instead. */
const LITERAL_VALUES: Record<MarkerName, string> = {
  [ENV_WHEN_JOB_EXIT]: '"true"',
  [ENV_WITH_IMAGE]: 'to the quick-exit image reference',
  [ENV_IGNORE_EXIT_CODE]: '"true"',
  [ENV_STOP]: 'to the stop method',
  [ENV_GRACE_PERIOD]: 'to the number of seconds',
};

/** What is wrong with a stop method or a grace period, as its rule and detail; undefined when nothing is. */
function settingProblem(name: typeof ENV_STOP | typeof ENV_GRACE_PERIOD, value: string): Pick<Finding, 'rule' | 'detail'> | undefined {
  if (name === ENV_STOP) {
    const parsed = parseStopMethod(value);
    return 'error' in parsed ? { rule: 'stop-method-invalid', detail: `${parsed.error}; the sidecar would be sent SIGTERM instead` } : undefined;
  }
  const parsed = parseGracePeriod(value);
  return 'error' in parsed ? { rule: 'grace-period-invalid', detail: `${parsed.error}; the pod's terminationGracePeriodSeconds would apply instead` } : undefined;
}

/**
 * The pod annotations that name sidecars and say how to stop them: names that are container
 * names, values that can be read, and settings for containers that are sidecars. A name the
 * template does not have is fine (another webhook may inject it); a pod has every container.
 */
function validateAnnotations(annotations: Record<string, unknown>, roles: ContainerRole[], options: ValidationOptions, report: Report): void {
  const path = (key: string) => `${podMetadataPrefix(options.fieldPrefix)}.annotations[${key}]`;
  const byName = new Map(roles.map((role) => [role.name, role]));
  const namedSidecars = new Set(annotationNames(annotations[POD_ANNOTATIONS.sidecars]));
  const isKillSidecar = (name: string) => byName.get(name)?.markers.whenJobExit ?? namedSidecars.has(name);
  const notFound = (key: string, name: string) =>
    report({ rule: 'sidecar-not-found', field: path(key), type: 'Not found', value: name, detail: `the pod has no container ${name}, so this has no effect; correct the name or remove it` });
  const notSidecar = (key: string, name: string, what: string) =>
    report({
      rule: 'stop-without-sidecar',
      field: path(key),
      type: 'Forbidden',
      detail: `${what} takes effect only on a sidecar stopped by the kill mechanism, and ${name} is none: name it in ${POD_ANNOTATIONS.sidecars} too (or mark it ${ENV_WHEN_JOB_EXIT}="true"), or remove this`,
    });

  for (const key of [POD_ANNOTATIONS.sidecars, POD_ANNOTATIONS.ignoreExitCode]) {
    const value = annotations[key];
    if (value === undefined) continue;
    for (const name of typeof value === 'string' ? annotationNames(value) : [JSON.stringify(value)]) {
      if (!DNS_LABEL.test(name)) {
        report({ rule: 'sidecar-name-invalid', field: path(key), type: 'Invalid value', value: name, detail: 'not a container name: list container names (lowercase letters, digits and "-") separated by commas' });
      } else if (options.containersFinal && !byName.has(name)) {
        notFound(key, name);
      } else if (key === POD_ANNOTATIONS.ignoreExitCode && !isKillSidecar(name)) {
        notSidecar(key, name, 'ignoring the exit code');
      }
    }
  }

  for (const [key, value] of Object.entries(annotations)) {
    const prefix = [POD_ANNOTATIONS.stopPrefix, POD_ANNOTATIONS.gracePeriodPrefix].find((p) => key.startsWith(p));
    if (!prefix) continue;
    const name = key.slice(prefix.length);
    if (!DNS_LABEL.test(name)) {
      report({ rule: 'sidecar-name-invalid', field: path(key), type: 'Invalid value', value: name, detail: `the key must be ${prefix}<container name>` });
      continue;
    }
    const problem = settingProblem(prefix === POD_ANNOTATIONS.stopPrefix ? ENV_STOP : ENV_GRACE_PERIOD, typeof value === 'string' ? value : JSON.stringify(value));
    if (problem) report({ ...problem, field: path(key), type: 'Invalid value', value: typeof value === 'string' ? value : JSON.stringify(value) });
    else if (options.containersFinal && !byName.has(name)) notFound(key, name);
    else if (!isKillSidecar(name)) notSidecar(key, name, prefix === POD_ANNOTATIONS.stopPrefix ? 'a stop method' : 'a grace period');
  }
}

/** What a marker defined several times means at run time (readMarkers), in words. */
function duplicateOutcome(name: MarkerName, markers: SidecarMarkers): string {
  if (name === ENV_WITH_IMAGE) return "the first definition is the quick-exit image, as OpenKruise picks it, although the container's environment holds the last one";
  const holds = name === ENV_WHEN_JOB_EXIT ? markers.whenJobExit : markers.ignoreExitCode;
  const effect = name === ENV_WHEN_JOB_EXIT ? 'the container is a sidecar' : 'its exit code is ignored';
  return holds
    ? `one of them is "true", so ${effect}: any "true" counts, as in OpenKruise`
    : `none of them is "true", so this variable has no effect`;
}

function validateQuickExitImage(
  container: Container,
  image: string,
  field: string,
  options: ValidationOptions,
  report: Report,
): void {
  const invalid = (rule: RuleId, type: FindingType, detail: string) =>
    report({ rule, field, type, ...(type === 'Required value' ? {} : { value: image }), detail });

  if (image === '') {
    return invalid('quick-exit-image-empty', 'Required value', fixClause('quick-exit-image-empty'));
  }
  const reference = parseImageReference(image);
  if (!reference) {
    return invalid('quick-exit-image-invalid', 'Invalid value', 'not a valid image reference: expected [registry/]repository[:tag][@digest] with a lowercase repository name');
  }
  if (typeof container.image === 'string' && isSameImage(image, container.image)) {
    return invalid('quick-exit-image-own', 'Invalid value', "the quick-exit image is the sidecar's own image, so replacing it changes nothing and the sidecar never stops");
  }
  const allowlist = options.quickExitImageAllowlist ?? [];
  if (allowlist.length > 0 && !isAllowedImage(image, allowlist)) {
    invalid('quick-exit-image-not-allowed', 'Forbidden', `not in this cluster's quick-exit image allowlist (${allowlist.join(', ')}); use one of those images`);
  }
  if (!reference.digest && (reference.tag === undefined || reference.tag === 'latest')) {
    report({
      rule: 'quick-exit-image-unpinned',
      field,
      type: 'Invalid value',
      value: image,
      detail: 'the quick-exit image has no tag or digest, or uses :latest, so what runs at termination can change under you; pin a tag or a digest',
    });
  }
  if (container.command !== undefined && container.command !== null) {
    report({
      rule: 'quick-exit-image-command',
      field,
      detail: 'this container sets command, which the quick-exit image will run in its place: that image must provide the command (or exit 0 whatever the command)',
    });
  }
}

function validatePodLevel(
  spec: PodSpec,
  roles: ContainerRole[],
  sidecars: ContainerRole[],
  options: ValidationOptions,
  report: Report,
): void {
  const containersPath = `${options.fieldPrefix}.containers`;
  if (sidecars.length === roles.length) {
    report({
      rule: 'no-main-container',
      field: containersPath,
      type: 'Forbidden',
      detail: `every container is marked as a sidecar, so there is no main container to wait for: as soon as all of them have started, every one is stopped (as OpenKruise does), cutting the work short; ${fixClause('no-main-container')}`,
    });
  }

  const restartPolicy = restartPolicyOf(spec);
  if (restartPolicy === 'Always') {
    report({
      rule: 'restart-policy-always',
      field: `${options.fieldPrefix}.restartPolicy`,
      type: 'Unsupported value',
      value: typeof spec.restartPolicy === 'string' ? spec.restartPolicy : 'Always',
      detail: 'sidecar markers take effect only when restartPolicy is "Never" or "OnFailure" (unset means "Always"), so these sidecars would never be stopped; set restartPolicy, or remove the markers',
    }, !options.strictRestartPolicy);
  }

  if (restartPolicy === 'Never' || restartPolicy === 'OnFailure') validateExits(spec, roles, options.fieldPrefix, options.job, report);

  const onVirtualNodes = targetsVirtualNodes(spec);
  for (const sidecar of sidecars) {
    if (onVirtualNodes && sidecar.markers.quickExitImage === undefined) {
      report({
        rule: 'virtual-node-without-image',
        field: `${containersPath}[${sidecar.index}]`,
        detail: `the pod can run on virtual-kubelet nodes, where a sidecar can only be stopped by replacing its image; add ${ENV_WITH_IMAGE} with a quick-exit image`,
      });
    }
  }
}

/**
 * Whether the watcher should manage a pod: it has a sidecar, a restartPolicy the trigger
 * applies to, and its configuration has no error (even when `warn` mode admitted it).
 */
export function isManageableSpec(rawSpec: unknown, findings: Finding[], annotations: Record<string, unknown> = {}): boolean {
  const spec: PodSpec = isRecord(rawSpec) ? rawSpec : {};
  const restartPolicy = restartPolicyOf(spec);
  return (
    (restartPolicy === 'Never' || restartPolicy === 'OnFailure') &&
    classifyContainers(spec, annotations).some((role) => role.role === 'sidecar') &&
    !findings.some((finding) => finding.severity === 'error')
  );
}
