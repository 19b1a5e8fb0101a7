// The chart's RBAC against the code. Every Kubernetes call in src/ is found by scanning the source
// for the method names of @kubernetes/client-node's API classes (taken from the library itself),
// for `new Watch(` and for `getJson(` (src/kube/client.ts: a GET without the API classes; the
// watcher's per-pod calls go as plain JSON under their generated names, src/kube/plain-calls.ts); each
// must be in CALLS below, with the rule it needs and its reason, and the
// chart must grant exactly those rules: a call without a rule fails, and so does a granted verb
// that no call needs. test/chart/cluster.test.ts then runs both processes under these
// permissions against a real API server.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import * as clientNode from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { parseFlags } from '../../src/cli.ts';
import { SERVE_FLAGS, type ServeConfig } from '../../src/config.ts';
import { policyNeedsNamespaceLabels } from '../../src/policy/index.ts';
import { parseInjectedSidecarPolicy } from '../../src/policy/injected-sidecar-file.ts';
import type { Component } from '../support/config-reference.ts';
import { find, render, type Manifest } from './helm.ts';
import { repoRoot } from '../support/repo.ts';

/** Where a call's permission must hold: cluster-scoped objects, the add-on's own namespace, or the pods' namespaces (every one, or --namespaces). */
type Scope = 'cluster' | 'own' | 'watched';

interface Need {
  group: string;
  resource: string;
  verb: string;
  scope: Scope;
  /** The object names the call touches, when Kubernetes can limit the verb to them (never for create). */
  names?: (config: ServeConfig) => string[];
  /** When this one is needed, given the process's flags and its policy (always, without). */
  when?: When;
}

/** What a process's injected-sidecar policy asks of it, from the file the chart renders. */
interface Policy {
  /** An entry has a namespaceSelector: the namespaces' labels are read. */
  selectsNamespaces: boolean;
}

type When = (config: ServeConfig, policy: Policy) => boolean;

interface Call {
  /** Files (under src/) that make this call. */
  sites: string[];
  needs: Need[];
  why: string;
  /** When the process makes the call, given its flags and its policy. */
  when?: When;
  /** Why the chart grants nothing for it, when it does not. */
  notGranted?: string;
}

const pods = (verb: string, resource = 'pods'): Need => ({ group: '', resource, verb, scope: 'watched' });
const tlsSecret = (config: ServeConfig) => [config.tlsSecret];
const configurations = (config: ServeConfig) => [config.webhookConfigName];
const lease = (config: ServeConfig) => [config.leaderElectionLease];
const webhookConfigurations = (verb: string, kind: 'mutating' | 'validating'): Need => ({
  group: 'admissionregistration.k8s.io',
  resource: `${kind}webhookconfigurations`,
  verb,
  scope: 'cluster',
  names: configurations,
});
/** The webhook issues its own certificate (not --tls-cert-dir, where cert-manager does). */
const issuesCertificate = (config: ServeConfig) => config.tlsCertDir === '';
/** It reads (and patches) the webhook configurations: its own certificate's CA, or it registers them itself. */
const ownCertificate = (config: ServeConfig) => issuesCertificate(config) || config.registerWebhooks;
const usesCrr = (config: ServeConfig) => config.killMechanism !== 'signal';
/** The namespaces are read: by the sweeper, while it runs, for --namespace-labels; by the webhook, for a policy that selects namespaces. */
const readsNamespaces: When = (config, policy) => (config.noWatcher ? policy.selectsNamespaces : config.sweepInterval > 0 && config.namespaceLabels.length > 0);
const REGISTER_ONLY = 'only `serve --register-webhooks` (local runs) writes the configurations; the chart creates them itself';
const FENCE_REGISTER_ONLY = 'only `serve --register-webhooks` (local runs) writes the fence; the chart installs it itself';
const DISCOVERY = 'discovery documents: the built-in system:discovery ClusterRole grants them to every authenticated user';
const USERS_OWN = 'sidecar-terminator status (the kubectl plugin) reads with the user\'s kubeconfig and permissions, not the chart\'s';
const status = (why: string): Call => ({ sites: ['src/status/cluster.ts'], needs: [], why, notGranted: USERS_OWN });

/** Every Kubernetes API call the code makes, keyed by client-node method name. */
const CALLS: Record<string, Call> = {
  // The watcher.
  getJson: { sites: ['src/watcher/reflector.ts'], needs: [pods('list')], why: 'list the managed pods (in every namespace, or per namespace with --namespaces), as plain JSON' },
  listPodForAllNamespaces: { sites: ['src/watcher/sweeper.ts', 'src/status/cluster.ts'], needs: [pods('list')], why: 'the sweeper lists unlabelled running pods' },
  listNamespacedPod: { sites: ['src/watcher/sweeper.ts', 'src/status/cluster.ts', 'src/kube/kruise-daemons.ts'], needs: [pods('list')], why: 'the same, per namespace with --namespaces; with --kill-mechanism auto, the ready kruise-daemon pods in --kruise-namespace (with --namespaces the watcher may not list them, and sends ContainerRecreateRequests to every node)' },
  'Watch.watch': {
    sites: ['src/watcher/reflector.ts', 'src/kube/namespace-labels.ts'],
    needs: [
      { ...pods('watch'), when: (config) => !config.noWatcher },
      { group: '', resource: 'namespaces', verb: 'watch', scope: 'cluster', when: (config, policy) => config.noWatcher && policy.selectsNamespaces },
    ],
    why: "watch the managed pods; the webhook's watch of the namespaces' labels, for a policy that selects namespaces",
  },
  readNamespacedPod: { sites: ['src/watcher/reconciler.ts', 'src/watcher/sweeper.ts', 'src/watcher/executor.ts', 'src/status/cluster.ts'], needs: [pods('get')], why: 'the pod as it is now, before saying its sidecar ignores SIGTERM; a stopped pod once it has ended; the sweeper re-reads a pod that changed before its label; `status pod/NAME` reads it as the user' },
  patchNamespacedPod: { sites: ['src/watcher/pod-writes.ts', 'src/watcher/sweeper.ts'], needs: [pods('patch')], why: "the sweeper's managed label, and the in-place quick-exit image" },
  patchNamespacedPodStatus: { sites: ['src/watcher/pod-writes.ts'], needs: [pods('patch', 'pods/status')], why: 'the terminal phase with the SidecarTerminated condition; that condition while a quick-exit image cannot be pulled, and with the stop record once the pod has ended' },
  patchNamespacedPodEphemeralcontainers: { sites: ['src/watcher/pod-writes.ts'], needs: [pods('patch', 'pods/ephemeralcontainers')], why: 'the signal container: the signal mechanism, and HTTP stop methods with either' },
  createNamespacedEvent: {
    sites: ['src/watcher/event-recorder.ts', 'src/webhook/owner-events.ts', 'src/serve/injected-sidecar-source.ts'],
    needs: [
      pods('create', 'events'),
      // KillMechanismChanged on the watcher's Lease, when the kill mechanism follows the cluster.
      { group: '', resource: 'events', verb: 'create', scope: 'own', when: (config) => config.leaderElect && config.killMechanism === 'auto' && config.killMechanismCheckInterval > 0 },
      // InjectedSidecarPolicyInvalid on the process's own pod, when a changed policy cannot be used.
      { group: '', resource: 'events', verb: 'create', scope: 'own', when: (config) => config.injectedSidecars !== '' },
    ],
    why: "the watcher's events on pods, and on its Lease when the kill mechanism changes; the webhook's InvalidSidecarConfiguration events on the owners of objects admitted despite errors, and on its own pod about a policy it cannot use",
  },
  createNamespacedCustomObject: {
    sites: ['src/watcher/crr.ts'],
    // Its owner reference to the pod has blockOwnerDeletion, as Kruise's: where the API server runs
    // OwnerReferencesPermissionEnforcement, that takes update on the pod's finalizers.
    needs: [{ group: 'apps.kruise.io', resource: 'containerrecreaterequests', verb: 'create', scope: 'watched' }, pods('update', 'pods/finalizers')],
    why: 'the crr mechanism',
    when: usesCrr,
  },
  listNamespace: {
    sites: ['src/watcher/sweeper.ts', 'src/kube/namespace-labels.ts'],
    needs: [{ group: '', resource: 'namespaces', verb: 'list', scope: 'cluster' }],
    why: "the namespaces --namespace-labels selects, where the sweeper labels pods; the webhook's list of the namespaces' labels, which a policy's namespaceSelectors are matched against",
    when: readsNamespaces,
  },
  readNode: { sites: ['src/watcher/node-lookup.ts', 'src/status/cluster.ts'], needs: [{ group: '', resource: 'nodes', verb: 'get', scope: 'cluster' }], why: 'virtual-kubelet label or taint' },
  getAPIVersions: { sites: ['src/kube/discovery.ts'], needs: [], why: 'is apps.kruise.io served?', when: usesCrr, notGranted: DISCOVERY },
  getAPIResources: { sites: ['src/kube/discovery.ts'], needs: [], why: 'does it serve containerrecreaterequests?', when: usesCrr, notGranted: DISCOVERY },
  createNamespacedLease: {
    sites: ['src/kube/leader-election.ts'],
    needs: [{ group: 'coordination.k8s.io', resource: 'leases', verb: 'create', scope: 'own' }],
    why: 'the first replica creates the Lease',
    when: (config) => config.leaderElect,
  },
  readNamespacedLease: {
    sites: ['src/kube/leader-election.ts'],
    needs: [{ group: 'coordination.k8s.io', resource: 'leases', verb: 'get', scope: 'own', names: lease }],
    why: 'who holds the Lease',
    when: (config) => config.leaderElect,
  },
  replaceNamespacedLease: {
    sites: ['src/kube/leader-election.ts'],
    needs: [{ group: 'coordination.k8s.io', resource: 'leases', verb: 'update', scope: 'own', names: lease }],
    why: 'acquire, renew and release the Lease',
    when: (config) => config.leaderElect,
  },
  // The webhook. With --tls-cert-dir (the chart's webhook.tls.certManager) it issues no certificate: cert-manager keeps the Secret and the caBundle.
  readNamespacedSecret: { sites: ['src/tls/secret-store.ts'], needs: [{ group: '', resource: 'secrets', verb: 'get', scope: 'own', names: tlsSecret }], why: 'load the certificates', when: issuesCertificate },
  createNamespacedSecret: { sites: ['src/tls/secret-store.ts'], needs: [{ group: '', resource: 'secrets', verb: 'create', scope: 'own' }], why: 'the first replica stores the certificates', when: issuesCertificate },
  replaceNamespacedSecret: { sites: ['src/tls/secret-store.ts'], needs: [{ group: '', resource: 'secrets', verb: 'update', scope: 'own', names: tlsSecret }], why: 'store renewed certificates', when: issuesCertificate },
  readMutatingWebhookConfiguration: { sites: ['src/kube/webhook-configurations.ts'], needs: [webhookConfigurations('get', 'mutating')], why: 'compare the caBundle; are the matchConditions kept?', when: ownCertificate },
  readValidatingWebhookConfiguration: { sites: ['src/kube/webhook-configurations.ts'], needs: [webhookConfigurations('get', 'validating')], why: 'compare the caBundle; are the matchConditions kept?', when: ownCertificate },
  patchMutatingWebhookConfiguration: { sites: ['src/kube/webhook-configurations.ts'], needs: [webhookConfigurations('patch', 'mutating')], why: 'set the caBundle', when: ownCertificate },
  patchValidatingWebhookConfiguration: { sites: ['src/kube/webhook-configurations.ts'], needs: [webhookConfigurations('patch', 'validating')], why: 'set the caBundle', when: ownCertificate },
  readNamespacedJob: {
    sites: ['src/webhook/owner-events.ts', 'src/watcher/executor.ts'],
    needs: [{ group: 'batch', resource: 'jobs', verb: 'get', scope: 'watched' }],
    why: "the Job a review names as the owner of a pod admitted despite errors, read before its event is written; the watcher's, for the podFailurePolicy that judged a pod a stopped sidecar's exit code failed",
  },
  readNamespacedCronJob: {
    sites: ['src/webhook/owner-events.ts'],
    needs: [{ group: 'batch', resource: 'cronjobs', verb: 'get', scope: 'watched' }],
    why: 'the same for the CronJob of a Job',
  },
  createMutatingWebhookConfiguration: { sites: ['src/kube/webhook-configurations.ts'], needs: [], why: 'register', when: (config) => config.registerWebhooks, notGranted: REGISTER_ONLY },
  createValidatingWebhookConfiguration: { sites: ['src/kube/webhook-configurations.ts'], needs: [], why: 'register', when: (config) => config.registerWebhooks, notGranted: REGISTER_ONLY },
  replaceMutatingWebhookConfiguration: { sites: ['src/kube/webhook-configurations.ts'], needs: [], why: 'register', when: (config) => config.registerWebhooks, notGranted: REGISTER_ONLY },
  replaceValidatingWebhookConfiguration: { sites: ['src/kube/webhook-configurations.ts'], needs: [], why: 'register', when: (config) => config.registerWebhooks, notGranted: REGISTER_ONLY },
  readValidatingAdmissionPolicy: { sites: ['src/kube/fence.ts'], needs: [], why: 'register the fence', when: (config) => config.registerWebhooks, notGranted: FENCE_REGISTER_ONLY },
  createValidatingAdmissionPolicy: { sites: ['src/kube/fence.ts'], needs: [], why: 'register the fence', when: (config) => config.registerWebhooks, notGranted: FENCE_REGISTER_ONLY },
  replaceValidatingAdmissionPolicy: { sites: ['src/kube/fence.ts'], needs: [], why: 'register the fence', when: (config) => config.registerWebhooks, notGranted: FENCE_REGISTER_ONLY },
  readValidatingAdmissionPolicyBinding: { sites: ['src/kube/fence.ts'], needs: [], why: 'register the fence', when: (config) => config.registerWebhooks, notGranted: FENCE_REGISTER_ONLY },
  createValidatingAdmissionPolicyBinding: { sites: ['src/kube/fence.ts'], needs: [], why: 'register the fence', when: (config) => config.registerWebhooks, notGranted: FENCE_REGISTER_ONLY },
  replaceValidatingAdmissionPolicyBinding: { sites: ['src/kube/fence.ts'], needs: [], why: 'register the fence', when: (config) => config.registerWebhooks, notGranted: FENCE_REGISTER_ONLY },
  getCode: {
    sites: ['src/kube/server-version.ts'],
    needs: [],
    why: 'does the API server run native sidecars?',
    when: (config) => config.nativeSidecars !== 'none',
    notGranted: '/version: the built-in system:public-info-viewer ClusterRole grants it to everyone',
  },
  // `sidecar-terminator remove-webhooks`, the chart's pre-delete hook.
  deleteMutatingWebhookConfiguration: { sites: ['src/kube/remove-webhooks.ts'], needs: [webhookConfigurations('delete', 'mutating')], why: 'helm uninstall takes the webhook out of the path first' },
  deleteValidatingWebhookConfiguration: { sites: ['src/kube/remove-webhooks.ts'], needs: [webhookConfigurations('delete', 'validating')], why: 'the same' },
  // `sidecar-terminator status`, run by users (it also lists pods and reads nodes, above).
  listNamespacedEvent: status("the add-on's events about the pods"),
  listEventForAllNamespaces: status('the same, with -A'),
  listNamespacedCustomObject: status('the ContainerRecreateRequests'),
  listClusterCustomObject: status('the same, with -A'),
  listNode: {
    sites: ['src/kube/pod-mutating-webhooks.ts'],
    needs: [{ group: '', resource: 'nodes', verb: 'list', scope: 'cluster' }],
    why: 'the kubelets that run no native sidecars: while a node has one, no pod is migrated',
    when: (config) => config.nativeSidecars !== 'none',
  },
  listMutatingWebhookConfiguration: {
    sites: ['src/kube/pod-mutating-webhooks.ts', 'src/status/cluster.ts'],
    needs: [{ group: 'admissionregistration.k8s.io', resource: 'mutatingwebhookconfigurations', verb: 'list', scope: 'cluster' }],
    why: 'the mutating webhooks for pods, named when a pod that lost its native sidecars is refused; `status` reads whether the webhook is registered and serves the namespace, as the user',
    when: (config) => config.nativeSidecars !== 'none',
  },
  readNamespace: {
    sites: ['src/status/cluster.ts', 'src/kube/namespace-labels.ts'],
    needs: [{ group: '', resource: 'namespaces', verb: 'get', scope: 'cluster' }],
    why: "the webhook reads a namespace its watch has not brought yet (created or labelled a moment before its first pod), for a policy that selects namespaces; `status` reads the namespace's labels, for the webhook's namespaceSelector, as the user",
    when: (config, policy) => config.noWatcher && policy.selectsNamespaces,
  },
};

/** Which processes run the code in a file; `user` for the status command, which runs with the user's permissions. None: not known. */
function processesOf(file: string): Array<Process | 'user'> {
  if (file.startsWith('src/status/')) return ['user'];
  if (file === 'src/kube/remove-webhooks.ts') return ['webhooks-cleanup'];
  // status reads the same discovery documents with the user's own permissions.
  if (file.startsWith('src/watcher/') || file === 'src/kube/leader-election.ts' || file === 'src/kube/discovery.ts' || file === 'src/kube/kruise-daemons.ts') return ['watcher'];
  if (file.startsWith('src/tls/') || file.startsWith('src/webhook/') || ['src/kube/webhook-configurations.ts', 'src/kube/fence.ts', 'src/kube/server-version.ts', 'src/kube/pod-mutating-webhooks.ts', 'src/kube/namespace-labels.ts'].includes(file)) return ['webhook'];
  // What serve composes for both: the injected-sidecar policy's source.
  if (file.startsWith('src/serve/')) return ['webhook', 'watcher'];
  return [];
}

/** Values imported from client-node that make no API call themselves. */
const INERT_IMPORTS = new Set(['KubeConfig', 'Observable', 'PatchStrategy', 'setHeaderOptions', 'ApiException', 'HttpMethod']);
/** client-node's ListWatch, allowed in this file only: its list is the file's own list call and its watch the file's `new Watch`, both followed by the scan. */
const LIST_WATCH_FILE = 'src/kube/namespace-labels.ts';
/** What getJson sends its requests with: allowed in its own file only, whose callers are followed as `getJson`. */
const RAW_REQUEST_IMPORTS = new Set(['RequestContext', 'createConfiguration']);
const RAW_REQUEST_FILE = 'src/kube/client.ts';
/** requestJson's other caller: the generated methods it replaces keep their names, so the scan finds their call sites as before. */
const PLAIN_CALLS_FILE = 'src/kube/plain-calls.ts';

const apiClasses = Object.entries(clientNode).filter(([name, value]) => /Api$/.test(name) && name !== 'KubernetesObjectApi' && typeof value === 'function');
const API_METHODS = new Set(
  apiClasses.flatMap(([, value]) => Object.getOwnPropertyNames((value as { prototype: object }).prototype).filter((name) => name !== 'constructor')),
);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [relative(repoRoot, path)] : [];
  });
}

/** Every API call in src/: method name -> files. */
function callsInSource(t: Test): Map<string, Set<string>> {
  const calls = new Map<string, Set<string>>();
  const add = (method: string, file: string) => calls.set(method, (calls.get(method) ?? new Set()).add(file));
  for (const file of sourceFiles(join(repoRoot, 'src'))) {
    const text = readFileSync(join(repoRoot, file), 'utf8');
    for (const [, names = ''] of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*'@kubernetes\/client-node'/g)) {
      for (const item of names.split(',').map((each) => each.trim()).filter((each) => each !== '' && !each.startsWith('type '))) {
        const known = INERT_IMPORTS.has(item) || item === 'Watch' || (file === RAW_REQUEST_FILE && RAW_REQUEST_IMPORTS.has(item)) || (file === LIST_WATCH_FILE && item === 'ListWatch') || apiClasses.some(([name]) => name === item);
        t.ok(known, `${file} imports ${item} from client-node: say in this test whether it calls the API`);
      }
    }
    t.notMatch(text, file === LIST_WATCH_FILE ? /import\s+\*\s+as\s+\w+\s+from\s+'@kubernetes\/client-node'|KubernetesObjectApi|makeInformer/ : /import\s+\*\s+as\s+\w+\s+from\s+'@kubernetes\/client-node'|KubernetesObjectApi|makeInformer|\bListWatch\b/, `${file}: client-node used in a way this test cannot follow`);
    for (const [, method = ''] of text.matchAll(/\.\s*([A-Za-z_$][\w$]*)\s*\(/g)) if (API_METHODS.has(method)) add(method, file);
    if (/new\s+Watch\s*\(/.test(text)) add('Watch.watch', file);
    if (file !== RAW_REQUEST_FILE && /\bgetJson\s*[<(]/.test(text)) add('getJson', file);
    if (file !== RAW_REQUEST_FILE && file !== PLAIN_CALLS_FILE) t.notMatch(text, /\brequestJson\s*[<(]/, `${file} calls requestJson, which this test cannot follow: use getJson, or a method of the generated API (plain-calls.ts)`);
  }
  return calls;
}

interface Grant {
  serviceAccount: string;
  group: string;
  resource: string;
  verb: string;
  /** '*' for a ClusterRoleBinding. */
  namespace: string;
  /** '*' when the rule has no resourceNames. */
  names: string[] | '*';
}

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

/** What every ServiceAccount may do, from the rendered Roles, ClusterRoles and their bindings. */
function grantsOf(t: Test, manifests: Manifest[]): Grant[] {
  const roles = new Map(manifests.filter((m) => m.kind === 'Role' || m.kind === 'ClusterRole').map((m) => [`${m.kind}/${m.metadata.namespace ?? ''}/${m.metadata.name}`, m]));
  const grants: Grant[] = [];
  for (const binding of manifests.filter((m) => m.kind === 'RoleBinding' || m.kind === 'ClusterRoleBinding')) {
    const { roleRef, subjects } = binding as Manifest & { roleRef: { kind: string; name: string }; subjects: Array<{ kind: string; name: string; namespace: string }> };
    const role = roles.get(`${roleRef.kind}/${roleRef.kind === 'Role' ? binding.metadata.namespace : ''}/${roleRef.name}`);
    if (!role) {
      t.fail(`${binding.kind}/${binding.metadata.name} refers to ${roleRef.kind}/${roleRef.name}, which the chart does not render`);
      continue;
    }
    const namespace = binding.kind === 'ClusterRoleBinding' ? '*' : binding.metadata.namespace!;
    for (const rule of (role as Manifest & { rules: Rule[] }).rules) {
      t.notOk(rule.nonResourceURLs, `${role.metadata.name}: no non-resource rules`);
      for (const value of [...(rule.apiGroups ?? []), ...(rule.resources ?? []), ...rule.verbs, ...(rule.resourceNames ?? [])]) {
        t.not(value, '*', `${role.metadata.name}: no wildcards`);
      }
      for (const subject of subjects) {
        for (const group of rule.apiGroups ?? []) {
          for (const resource of rule.resources ?? []) {
            for (const verb of rule.verbs) {
              grants.push({ serviceAccount: `${subject.namespace}/${subject.name}`, group, resource, verb, namespace, names: rule.resourceNames ?? '*' });
            }
          }
        }
      }
    }
  }
  return grants;
}

interface Requirement extends Grant {
  call: string;
}

/** The chart's processes: its two Deployments, and the Job of its pre-delete hook. */
type Process = Component | 'webhooks-cleanup';

/** The injected-sidecar policy the chart renders, as serve reads it: none, without the ConfigMap. */
function policyOf(manifests: Manifest[]): Policy {
  const file = (find(manifests, 'ConfigMap') as (Manifest & { data: Record<string, string> }) | undefined)?.data['policy.yaml'];
  const parsed = file === undefined ? undefined : parseInjectedSidecarPolicy(file);
  if (parsed && 'errors' in parsed) throw new Error(`the chart's policy: ${parsed.errors.join('; ')}`);
  return { selectsNamespaces: parsed !== undefined && policyNeedsNamespaceLabels(parsed.policy) };
}

/** What each process needs, given the flags the chart passes it and the policy it renders. */
function requirements(manifests: Manifest[], releaseNamespace: string): Requirement[] {
  const result: Requirement[] = [];
  const policy = policyOf(manifests);
  for (const component of ['webhook', 'watcher', 'webhooks-cleanup'] as const) {
    const workload = manifests.find((m) => (m.kind === 'Deployment' || m.kind === 'Job') && m.metadata.labels?.['app.kubernetes.io/component'] === component);
    if (!workload) continue;
    const serviceAccount = `${releaseNamespace}/${(workload.spec as { template: { spec: { serviceAccountName: string } } }).template.spec.serviceAccountName}`;
    const args = (workload.spec as { template: { spec: { containers: Array<{ args: string[] }> } } }).template.spec.containers[0]!.args;
    // remove-webhooks takes a few of serve's flags, read the same way.
    const config = parseFlags('serve', SERVE_FLAGS, args.slice(1), {}).values;
    for (const [method, call] of Object.entries(CALLS)) {
      if (!call.sites.some((file) => processesOf(file).includes(component)) || (call.when && !call.when(config, policy))) continue;
      for (const need of call.needs) {
        if (need.when && !need.when(config, policy)) continue;
        const namespaces = need.scope === 'own' ? [config.namespace] : need.scope === 'watched' && config.namespaces.length > 0 ? config.namespaces : ['*'];
        for (const namespace of namespaces) {
          result.push({ call: method, serviceAccount, group: need.group, resource: need.resource, verb: need.verb, namespace, names: need.names ? need.names(config) : '*' });
        }
      }
    }
  }
  return result;
}

const sameRule = (a: Grant, b: Grant) => a.serviceAccount === b.serviceAccount && a.group === b.group && a.resource === b.resource && a.verb === b.verb;
/** Whether `wide` allows at least everything `narrow` does (namespace and names). */
const covers = (wide: Grant, narrow: Grant) =>
  (wide.namespace === '*' || wide.namespace === narrow.namespace) && (wide.names === '*' || (narrow.names !== '*' && narrow.names.every((name) => wide.names.includes(name))));
const describe = (g: Grant) => `${g.serviceAccount}: ${g.verb} ${g.group || 'core'}/${g.resource} in ${g.namespace === '*' ? 'every namespace' : g.namespace}${g.names === '*' ? '' : ` named ${g.names.join(',')}`}`;

const found = callsInSource(t);

t.test('every Kubernetes call in src/ is in the table, at the sites it lists, in a file whose process is known', async (t) => {
  t.ok(found.size >= 15, `the scan finds the calls (${found.size}): it would notice a new one`);
  for (const [method, files] of found) {
    const call = CALLS[method];
    if (!call) {
      t.fail(`${method} (${[...files].join(', ')}) is a Kubernetes API call without an entry in CALLS: add the rule it needs here and to the chart`);
      continue;
    }
    t.same([...files].sort(), [...call.sites].sort(), `${method}: called from exactly the files listed (a new call site may touch another resource)`);
    for (const file of files) t.ok(processesOf(file).length > 0, `${file}: processesOf() says which processes run it`);
  }
  for (const method of Object.keys(CALLS)) t.ok(found.has(method), `${method}: still called somewhere (otherwise remove its entry, and its rule from the chart)`);
});

const variants: Array<{ label: string; values: object; release?: string; namespace?: string }> = [
  { label: 'defaults', values: {} },
  { label: 'kill mechanism crr', values: { watcher: { killMechanism: 'crr' } } },
  { label: 'certificates from cert-manager', values: { webhook: { tls: { certManager: { enabled: true, issuerRef: { name: 'ca' } } } } } },
  { label: 'auto, following the cluster, with --namespaces', values: { watcher: { namespaces: ['team-a'] } } },
  { label: 'auto, resolved only at start, with --namespaces', values: { watcher: { namespaces: ['team-a'], killMechanismCheckInterval: '0s' } } },
  { label: 'kill mechanism signal', values: { watcher: { killMechanism: 'signal' } } },
  { label: 'without leader election', values: { watcher: { leaderElection: { enabled: false } } } },
  { label: '--namespaces, including the release namespace', values: { watcher: { namespaces: ['team-a', 'sidecar-terminator'] } } },
  { label: 'namespaces opted in by label', values: { webhook: { namespaceLabels: { team: 'batch' } } } },
  { label: 'namespaces opted in by label, no sweeper', values: { webhook: { namespaceLabels: { team: 'batch' } }, watcher: { sweepInterval: '0s' } } },
  { label: 'native sidecars in labelled namespaces', values: { admission: { nativeSidecars: 'labelled' } } },
  { label: '--namespaces with signal, no leader election', values: { watcher: { namespaces: ['team-b'], killMechanism: 'signal', leaderElection: { enabled: false } } } },
  { label: 'an injected-sidecar policy', values: { injectedSidecars: { presets: { linkerd: { enabled: true } } } } },
  { label: 'a policy that selects namespaces', values: { injectedSidecars: { presets: { istio: { enabled: true, namespaceSelector: { matchLabels: { 'istio-injection': 'enabled' } } } } } } },
  { label: 'a policy whose namespaceSelectors are empty (they select every namespace, as none does)', values: { injectedSidecars: { presets: { istio: { enabled: true, namespaceSelector: { matchLabels: {} } } }, entries: [{ name: 'otel', container: 'otc-container', namespaceSelector: { matchLabels: {}, matchExpressions: [] } }] } } },
  { label: 'a policy that selects namespaces, no sweeper', values: { injectedSidecars: { entries: [{ name: 'otel', container: 'otc-container', namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'Exists' }] } }] }, watcher: { sweepInterval: '0s' } } },
  { label: 'a policy with --namespaces, signal, no leader election', values: { injectedSidecars: { presets: { dapr: { enabled: true } } }, watcher: { namespaces: ['team-a'], killMechanism: 'signal', leaderElection: { enabled: false } } } },
  { label: 'a policy with --namespaces, including the release namespace', values: { injectedSidecars: { presets: { dapr: { enabled: true } } }, watcher: { namespaces: ['team-a', 'sidecar-terminator'] } } },
  {
    label: 'another release, namespace and names',
    values: { webhook: { tls: { secretName: 'custom-tls' }, configurationName: 'custom-webhooks' }, watcher: { leaderElection: { leaseName: 'custom-lease' } } },
    release: 'st',
    namespace: 'platform',
  },
];

for (const variant of variants) {
  t.test(`${variant.label}: the chart grants what the calls need, and nothing more`, async (t) => {
    const namespace = variant.namespace ?? 'sidecar-terminator';
    const manifests = await render(variant.values, { release: variant.release ?? 'sidecar-terminator', namespace });
    const grants = grantsOf(t, manifests);
    const needed = requirements(manifests, namespace);
    t.ok(needed.length > 0 && grants.length > 0);
    for (const need of needed) {
      t.ok(grants.some((grant) => sameRule(grant, need) && covers(grant, need)), `granted: ${describe(need)} (for ${need.call})`);
    }
    for (const grant of grants) {
      const reasons = needed.filter((need) => sameRule(grant, need) && covers(need, grant));
      t.ok(reasons.length > 0, `needed by some call: ${describe(grant)}`);
    }
  });
}

t.test('the calls the chart does not grant say why', async (t) => {
  for (const [method, call] of Object.entries(CALLS)) {
    t.equal(call.needs.length === 0, call.notGranted !== undefined, `${method}: either rules or a reason for none`);
  }
});
