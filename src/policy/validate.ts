// Validation of the sidecar configuration of one pod spec (a pod's, or a template's): the rules
// of docs/admission-rules.md. Pure: the webhook and the lint command both call it.
import type { Finding, RuleId, Severity, FindingType } from './findings.ts';
import { isAllowedImage, isSameImage, parseImageReference } from './image.ts';
import {
  ENV_IGNORE_EXIT_CODE,
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  classifyContainers,
  markerEntries,
  type ContainerRole,
  type MarkerEntry,
  type MarkerName,
  type SidecarMarkers,
} from './markers.ts';
import { targetsVirtualNodes } from './nodes.ts';
import { arrayOf, isRecord, restartPolicyOf, type Container, type PodSpec } from './types.ts';

export interface ValidationOptions {
  /** Path of the pod spec inside the admitted object: `spec`, `spec.template.spec`, ... */
  fieldPrefix: string;
  /** Markers on an `Always` pod are an error (Job/CronJob templates, pods asking for it), else a warning. */
  strictRestartPolicy: boolean;
  /** When non-empty, quick-exit images must match one of these patterns (`*` is a wildcard). */
  quickExitImageAllowlist?: readonly string[];
  /** Init containers the webhook made native sidecars (MIGRATED_ANNOTATION): their markers come from the template, and stay. */
  migratedSidecars?: readonly string[];
}

type NewFinding = Omit<Finding, 'severity'>;

export function validatePodSpec(rawSpec: unknown, options: ValidationOptions): Finding[] {
  const spec: PodSpec = isRecord(rawSpec) ? rawSpec : {};
  const findings: Finding[] = [];
  const report = (severity: Severity, finding: NewFinding) => findings.push({ severity, ...finding });

  const containersPath = `${options.fieldPrefix}.containers`;
  const roles = classifyContainers(spec);
  arrayOf(spec.containers).forEach((raw, index) => {
    const container: Container = isRecord(raw) ? raw : {};
    validateContainerMarkers(container, roles[index]!, `${containersPath}[${index}]`, options, report);
  });

  const sidecars = roles.filter((role) => role.role === 'sidecar');
  if (sidecars.length > 0) validatePodLevel(spec, roles, sidecars, options, report);

  const migrated = new Set(options.migratedSidecars);
  arrayOf(spec.initContainers).forEach((raw, index) => {
    if (!isRecord(raw)) return;
    const native = raw.restartPolicy === 'Always';
    if (native && typeof raw.name === 'string' && migrated.has(raw.name)) return;
    for (const entry of markerEntries(raw)) {
      report('warning', {
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

function validateContainerMarkers(
  container: Container,
  role: ContainerRole,
  path: string,
  options: ValidationOptions,
  report: (severity: Severity, finding: NewFinding) => void,
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
    if (definitions.length < 2) continue;
    report('warning', {
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
      report('error', {
        rule: 'marker-value-from',
        field: `${envPath(entry.name)}.valueFrom`,
        type: 'Forbidden',
        detail: `sidecar markers must be literal values: valueFrom cannot be read from the pod spec, so the marker would silently do nothing; set value: ${entry.name === ENV_WITH_IMAGE ? 'to the quick-exit image reference' : '"true"'} instead`,
      });
    } else if (entry.name !== ENV_WITH_IMAGE && !/^(true|false)$/i.test(entry.value ?? '')) {
      report('error', {
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

  if (role.markers.ignoreExitCode && !role.markers.whenJobExit) {
    report('error', {
      rule: 'ignore-exit-code-without-kill',
      field: envPath(ENV_IGNORE_EXIT_CODE),
      type: 'Forbidden',
      detail: `takes effect only together with ${ENV_WHEN_JOB_EXIT}="true" on the same container; add that variable, or remove this one`,
    });
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
  report: (severity: Severity, finding: NewFinding) => void,
): void {
  const invalid = (rule: RuleId, type: FindingType, detail: string) =>
    report('error', { rule, field, type, ...(type === 'Required value' ? {} : { value: image }), detail });

  if (image === '') {
    return invalid('quick-exit-image-empty', 'Required value', 'set it to an image that exits 0 at once (for example a pinned busybox running `true`), or remove the variable');
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
    report('warning', {
      rule: 'quick-exit-image-unpinned',
      field,
      type: 'Invalid value',
      value: image,
      detail: 'the quick-exit image has no tag or digest, or uses :latest, so what runs at termination can change under you; pin a tag or a digest',
    });
  }
  if (container.command !== undefined && container.command !== null) {
    report('warning', {
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
  report: (severity: Severity, finding: NewFinding) => void,
): void {
  const containersPath = `${options.fieldPrefix}.containers`;
  if (sidecars.length === roles.length) {
    report('error', {
      rule: 'no-main-container',
      field: containersPath,
      type: 'Forbidden',
      detail: 'every container is marked as a sidecar, so there is no main container to wait for: as soon as all of them have started, every one is stopped (as OpenKruise does), cutting the work short; remove the markers from the container that does the work',
    });
  }

  const restartPolicy = restartPolicyOf(spec);
  if (restartPolicy === 'Always') {
    report(options.strictRestartPolicy ? 'error' : 'warning', {
      rule: 'restart-policy-always',
      field: `${options.fieldPrefix}.restartPolicy`,
      type: 'Unsupported value',
      value: typeof spec.restartPolicy === 'string' ? spec.restartPolicy : 'Always',
      detail: 'sidecar markers take effect only when restartPolicy is "Never" or "OnFailure" (unset means "Always"), so these sidecars would never be stopped; set restartPolicy, or remove the markers',
    });
  }

  const onVirtualNodes = targetsVirtualNodes(spec);
  for (const sidecar of sidecars) {
    const path = `${containersPath}[${sidecar.index}]`;
    if (restartPolicy === 'OnFailure' && sidecar.markers.whenJobExit && !sidecar.markers.ignoreExitCode) {
      report('warning', {
        rule: 'on-failure-kill-exit-code',
        field: `${path}.env[${ENV_WHEN_JOB_EXIT}]`,
        detail: `with restartPolicy OnFailure, kubelet restarts a sidecar that exits non-zero when it is stopped by signal (143 on SIGTERM is common); set ${ENV_IGNORE_EXIT_CODE}="true", or make the sidecar exit 0 on SIGTERM`,
      });
    }
    if (onVirtualNodes && sidecar.markers.quickExitImage === undefined) {
      report('warning', {
        rule: 'virtual-node-without-image',
        field: path,
        detail: `the pod can run on virtual-kubelet nodes, where a sidecar can only be stopped by replacing its image; add ${ENV_WITH_IMAGE} with a quick-exit image`,
      });
    }
  }
}

/**
 * Whether the watcher should manage a pod: it has a sidecar, a restartPolicy the trigger
 * applies to, and its configuration has no error (even when `warn` mode admitted it).
 */
export function isManageable(rawSpec: unknown, findings: Finding[]): boolean {
  const spec: PodSpec = isRecord(rawSpec) ? rawSpec : {};
  const restartPolicy = restartPolicyOf(spec);
  return (
    (restartPolicy === 'Never' || restartPolicy === 'OnFailure') &&
    classifyContainers(spec).some((role) => role.role === 'sidecar') &&
    !findings.some((finding) => finding.severity === 'error')
  );
}
