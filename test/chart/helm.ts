// Helm for the chart tests: the binary scripts/build-helm.sh builds (or finds cached), `helm
// template` with values, and small readers of the rendered manifests.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { runCommand, type CommandResult } from '../support/command.ts';
import { buildScriptOutput } from '../support/managed-process.ts';
import { repoRoot } from '../support/repo.ts';

export const chartDir = join(repoRoot, 'charts/sidecar-terminator');

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

let helmPath: Promise<string> | undefined;

/** The helm binary: built once from the Go module proxy, then cached (the script prints its path). */
export function helmBinary(): Promise<string> {
  helmPath ??= buildScriptOutput('build-helm.sh');
  return helmPath;
}

/** Runs helm; never throws for a non-zero exit. */
export async function helm(args: string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<CommandResult> {
  return runCommand(await helmBinary(), args, { cwd: repoRoot, env: { ...process.env, ...options.env }, input: options.input });
}

/** A values file (JSON is YAML) in a fresh temporary directory; `cleanup` removes it. */
export function valuesFile(values: object): { path: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'st-chart-values-'));
  const path = join(dir, 'values.json');
  writeFileSync(path, JSON.stringify(values));
  return { path, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface RenderOptions {
  release?: string;
  namespace?: string;
  /** Capabilities.APIVersions beyond helm's defaults, as a cluster's discovery would list them. */
  apiVersions?: string[];
}

/** What a cluster that serves ValidatingAdmissionPolicy (Kubernetes 1.30+) adds to Capabilities.APIVersions. */
export const VAP_API_VERSION = 'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy';

/** `helm template` output with these values; the result's code tells whether it rendered. */
export async function template(values: object = {}, options: RenderOptions = {}): Promise<CommandResult> {
  const file = valuesFile(values);
  const apiVersions = (options.apiVersions ?? []).flatMap((version) => ['--api-versions', version]);
  try {
    return await helm(['template', options.release ?? 'sidecar-terminator', chartDir, '--namespace', options.namespace ?? 'sidecar-terminator', '--values', file.path, ...apiVersions]);
  } finally {
    file.cleanup();
  }
}

/** The manifests the chart renders with these values; throws with helm's message when it does not render. */
export async function render(values: object = {}, options: RenderOptions = {}): Promise<Manifest[]> {
  const result = await template(values, options);
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return parseManifests(result.stdout);
}

/** A Helm home of its own (config, cache, data) for the releases a test makes on the cluster of `kubeconfig`. */
export function helmEnv(kubeconfig: string, t: { teardown(fn: () => void): void }): NodeJS.ProcessEnv {
  const home = mkdtempSync(join(tmpdir(), 'st-helm-home-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  return { KUBECONFIG: kubeconfig, HELM_CONFIG_HOME: join(home, 'config'), HELM_CACHE_HOME: join(home, 'cache'), HELM_DATA_HOME: join(home, 'data') };
}

/** `helm install` or `helm upgrade` of the chart with these values; the manifests of the release. */
export async function helmRelease(env: NodeJS.ProcessEnv, command: 'install' | 'upgrade', release: string, namespace: string, values: object): Promise<Manifest[]> {
  const file = valuesFile(values);
  try {
    const result = await helm([command, release, chartDir, '--namespace', namespace, '--values', file.path], { env });
    if (result.code !== 0) throw new Error(`helm ${command} failed: ${result.stderr}`);
    const manifest = await helm(['get', 'manifest', release, '--namespace', namespace], { env });
    return parseManifests(manifest.stdout);
  } finally {
    file.cleanup();
  }
}

export function parseManifests(text: string): Manifest[] {
  return parseAllDocuments(text)
    .map((document) => {
      if (document.errors.length > 0) throw new Error(`rendered YAML does not parse: ${document.errors[0]!.message}`);
      return document.toJS() as Manifest | null;
    })
    .filter((manifest): manifest is Manifest => manifest !== null);
}

export function find(manifests: Manifest[], kind: string, name?: string): Manifest | undefined {
  return manifests.find((m) => m.kind === kind && (name === undefined || m.metadata.name === name));
}

export function get(manifests: Manifest[], kind: string, name?: string): Manifest {
  const found = find(manifests, kind, name);
  if (!found) throw new Error(`no ${kind}${name ? ` named ${name}` : ''} in the rendered chart (${manifests.map((m) => `${m.kind}/${m.metadata.name}`).join(', ')})`);
  return found;
}

interface ContainerSpec {
  name: string;
  image: string;
  args?: string[];
  [key: string]: unknown;
}

export interface PodSpec {
  serviceAccountName?: string;
  containers: ContainerSpec[];
  [key: string]: unknown;
}

/** The pod template's spec of the webhook or watcher Deployment. */
export function podSpec(manifests: Manifest[], component: 'webhook' | 'watcher'): PodSpec {
  const deployment = manifests.find((m) => m.kind === 'Deployment' && m.metadata.labels?.['app.kubernetes.io/component'] === component);
  if (!deployment) throw new Error(`no ${component} Deployment in the rendered chart`);
  return (deployment.spec as { template: { spec: PodSpec } }).template.spec;
}

/** The container args of the webhook or watcher Deployment. */
export function argsOf(manifests: Manifest[], component: 'webhook' | 'watcher'): string[] {
  return podSpec(manifests, component).containers[0]?.args ?? [];
}

/** The value of `--name=value` in args (true for a bare `--name`), undefined when absent. */
export function flagValue(args: string[], name: string): string | true | undefined {
  let value: string | true | undefined;
  for (const arg of args) {
    if (arg === `--${name}`) value = true;
    else if (arg.startsWith(`--${name}=`)) value = arg.slice(name.length + 3);
  }
  return value;
}

/** Sets a dotted path in a fresh values object: setPath('a.b', 1) -> { a: { b: 1 } }. */
export function valuesAt(path: string, value: unknown): Record<string, unknown> {
  return path
    .split('.')
    .reverse()
    .reduce<unknown>((inner, key) => ({ [key]: inner }), value) as Record<string, unknown>;
}

/** The names of the Prometheus metrics src/ registers (`name: 'sidecar_terminator_...'`). */
export function registeredMetrics(): Set<string> {
  const files = (function walk(dir: string): string[] {
    return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? walk(join(dir, entry.name)) : [join(dir, entry.name)]));
  })(join(repoRoot, 'src'));
  return new Set(files.flatMap((file) => [...readFileSync(file, 'utf8').matchAll(/name: '(sidecar_terminator_\w+)'/g)].map(([, name = '']) => name)));
}

/** An alert of the chart's PrometheusRule. */
export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** The groups of the PrometheusRule the chart rendered. */
export function alertGroups(manifests: Manifest[]): Array<{ name: string; rules: AlertRule[] }> {
  return (get(manifests, 'PrometheusRule').spec as { groups: Array<{ name: string; rules: AlertRule[] }> }).groups;
}
