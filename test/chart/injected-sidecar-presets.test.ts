// The chart's presets against the pods their injectors make: each preset, enabled alone, is read
// back from the rendered ConfigMap as serve reads it and applied to a Job's pod shaped as that
// injector's webhook leaves it (its containers' real names, ports and arguments, from the source
// cited); the pod gets the annotations its author would have written, the webhook's rule then
// labels it managed with the injected container as its sidecar, and the stop is a request to a
// port of the pod's own loopback that the sidecar serves. Here rather than in test/policy: it
// renders the chart with helm, which the unit loop does not build.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import {
  INJECTED_POLICY_ANNOTATION,
  POD_ANNOTATIONS,
  classifyContainers,
  injectedSidecarAnnotations,
  parseStopMethod,
  shouldManageObject,
  type InjectedSidecarPolicy,
  type StopMethod,
} from '../../src/policy/index.ts';
import { parseInjectedSidecarPolicy } from '../../src/policy/injected-sidecar-file.ts';
import { chartDir, get, render, type Manifest } from './helm.ts';

interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  ports?: Array<{ name?: string; containerPort: number; protocol?: string }>;
  restartPolicy?: string;
}

/** A pod as the injector left it: its own annotations, init containers and containers around the Job's `app`. */
interface Injected {
  annotations?: Record<string, string>;
  initContainers?: Container[];
  containers: Container[];
}

/** The vault-agent containers' image and command, the init container's and the sidecar's alike (vault-k8s DefaultContainerArg). */
const VAULT_AGENT = { image: 'hashicorp/vault:1.19.0', command: ['/bin/sh', '-ec'], args: ['echo ${VAULT_CONFIG?} | base64 -d > /home/vault/config.json && vault agent -config=/home/vault/config.json'] };
const APP: Container = { name: 'app', image: 'registry.example.com/nightly-export:3.2.1', args: ['--since=24h'] };
const JOB_OWNER = { apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-export', uid: '5c3f0d1e-3b8e-4c53-9a59-2f1f9d0c4a11', controller: true, blockOwnerDeletion: true };

/** The port of the request a stop method sends. */
const portOf = (stop: StopMethod) => (stop.kind === 'http' ? Number(new URL(stop.url).port) : undefined);
const declaredPort = (container: Container, name: string) => container.ports?.find((port) => port.name === name)?.containerPort;
const flagPort = (container: Container, flag: string) => Number(container.args?.find((arg) => arg.startsWith(`${flag}=`))?.slice(flag.length + 1));

interface Preset {
  /** The preset's entry name, and its container. */
  entry: string;
  sidecar: string;
  injected: Injected;
  /** The annotations the policy adds besides the sidecar's name and the entry's. */
  stop?: string;
  gracePeriodSeconds?: string;
  /** How the request is sent, when the sidecar is stopped by one. */
  request?: { method: string; path: string };
  /** The port the sidecar serves its shutdown endpoint on, as its own spec says; undefined where the spec does not say. */
  serves?: (sidecar: Container) => number | undefined;
}

const PRESETS: Record<string, Preset> = {
  // istio/istio manifests/charts/istio-control/istio-discovery/files/injection-template.yaml:
  // istio-init first, then istio-proxy beside the app (pilot-agent's status port, 15020, is not declared).
  istio: {
    entry: 'istio',
    sidecar: 'istio-proxy',
    injected: {
      annotations: { 'sidecar.istio.io/status': '{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy","istio-data","istio-podinfo","istio-token","istiod-ca-cert"],"imagePullSecrets":null}' },
      initContainers: [{ name: 'istio-init', image: 'docker.io/istio/proxyv2:1.24.2', args: ['istio-iptables', '-p', '15001', '-z', '15006', '-u', '1337', '-m', 'REDIRECT', '-i', '*', '-x', '', '-b', '*', '-d', '15090,15021,15020'] }],
      containers: [
        APP,
        {
          name: 'istio-proxy',
          image: 'docker.io/istio/proxyv2:1.24.2',
          args: ['proxy', 'sidecar', '--domain', '$(POD_NAMESPACE).svc.cluster.local', '--proxyLogLevel=warning', '--proxyComponentLogLevel=misc:error', '--log_output_level=default:info'],
          ports: [
            { containerPort: 15090, protocol: 'TCP', name: 'http-envoy-prom' },
            { containerPort: 15021, protocol: 'TCP', name: 'health' },
          ],
        },
      ],
    },
    stop: 'istio-proxy',
    request: { method: 'POST', path: '/quitquitquit' },
  },
  // linkerd/linkerd2 charts/partials/templates/_proxy.tpl and pkg/inject: linkerd-init, then
  // linkerd-proxy first among the containers (proxy-await), its admin server on 4191.
  linkerd: {
    entry: 'linkerd',
    sidecar: 'linkerd-proxy',
    injected: {
      annotations: { 'linkerd.io/inject': 'enabled', 'linkerd.io/proxy-version': 'edge-25.4.4', 'config.linkerd.io/proxy-admin-shutdown': 'enabled' },
      initContainers: [{ name: 'linkerd-init', image: 'cr.l5d.io/linkerd/proxy-init:v2.4.2', args: ['--incoming-proxy-port', '4143', '--outgoing-proxy-port', '4140', '--proxy-uid', '2102', '--inbound-ports-to-ignore', '4190,4191,4567,4568'] }],
      containers: [
        {
          name: 'linkerd-proxy',
          image: 'cr.l5d.io/linkerd/proxy:edge-25.4.4',
          ports: [
            { containerPort: 4143, name: 'linkerd-proxy' },
            { containerPort: 4191, name: 'linkerd-admin' },
          ],
        },
        APP,
      ],
    },
    stop: 'linkerd-proxy',
    request: { method: 'POST', path: '/shutdown' },
    serves: (sidecar) => declaredPort(sidecar, 'linkerd-admin'),
  },
  // hashicorp/vault-k8s agent-inject/agent/container_sidecar.go and container_init_sidecar.go:
  // vault-agent-init, then vault-agent, a shell running `vault agent`; no port.
  vaultAgent: {
    entry: 'vault-agent',
    sidecar: 'vault-agent',
    injected: {
      annotations: { 'vault.hashicorp.com/agent-inject': 'true', 'vault.hashicorp.com/role': 'nightly-export', 'vault.hashicorp.com/agent-inject-status': 'injected' },
      initContainers: [{ name: 'vault-agent-init', ...VAULT_AGENT }],
      containers: [APP, { name: 'vault-agent', ...VAULT_AGENT }],
    },
  },
  // dapr/dapr pkg/injector/patcher/sidecar_container.go and consts.go: daprd beside the app, its
  // HTTP API on the port named dapr-http.
  dapr: {
    entry: 'dapr',
    sidecar: 'daprd',
    injected: {
      annotations: { 'dapr.io/enabled': 'true', 'dapr.io/app-id': 'nightly-export' },
      containers: [
        APP,
        {
          name: 'daprd',
          image: 'ghcr.io/dapr/daprd:1.15.4',
          args: ['/daprd', '--dapr-http-port', '3500', '--dapr-grpc-port', '50001', '--dapr-internal-grpc-port', '50002', '--dapr-listen-addresses', '[::1],127.0.0.1', '--dapr-public-port', '3501', '--app-id', 'nightly-export', '--app-protocol', 'http', '--log-level', 'info', '--dapr-graceful-shutdown-seconds', '5', '--mode', 'kubernetes'],
          ports: [
            { containerPort: 3500, name: 'dapr-http' },
            { containerPort: 50001, name: 'dapr-grpc' },
            { containerPort: 50002, name: 'dapr-internal' },
            { containerPort: 9090, name: 'dapr-metrics' },
          ],
        },
      ],
    },
    stop: 'POST http://localhost:3500/v1.0/shutdown',
    request: { method: 'POST', path: '/v1.0/shutdown' },
    serves: (sidecar) => declaredPort(sidecar, 'dapr-http'),
  },
  // hashicorp/consul-k8s control-plane/connect-inject/webhook/consul_dataplane_sidecar.go:
  // consul-connect-inject-init, then consul-dataplane, whose lifecycle server takes -graceful-port.
  consul: {
    entry: 'consul',
    sidecar: 'consul-dataplane',
    injected: {
      annotations: { 'consul.hashicorp.com/connect-inject': 'true', 'consul.hashicorp.com/connect-inject-status': 'injected' },
      initContainers: [{ name: 'consul-connect-inject-init', image: 'hashicorp/consul-k8s-control-plane:1.7.0', command: ['/bin/sh', '-ec', 'consul-k8s-control-plane connect-init -pod-name=${POD_NAME} -pod-namespace=${POD_NAMESPACE} -log-level=info -log-json=false'] }],
      containers: [
        APP,
        {
          name: 'consul-dataplane',
          image: 'hashicorp/consul-dataplane:1.7.0',
          args: [
            '-addresses', 'consul-server.consul.svc', '-envoy-admin-bind-address=127.0.0.1', '-consul-dns-bind-addr=127.0.0.1', '-xds-bind-addr=127.0.0.1', '-grpc-port=8502',
            '-proxy-service-id-path=/consul/connect-inject/proxyid', '-log-level=info', '-log-json=false', '-envoy-concurrency=2', '-graceful-addr=127.0.0.1', '-tls-disabled',
            '-graceful-port=20600', '-shutdown-drain-listeners', '-shutdown-grace-period-seconds=30', '-graceful-shutdown-path=/graceful_shutdown', '-graceful-startup-path=/graceful_startup',
            '-startup-grace-period-seconds=0', '-telemetry-prom-scrape-path=/metrics',
          ],
        },
      ],
    },
    stop: 'POST http://localhost:20600/graceful_shutdown',
    gracePeriodSeconds: '45',
    request: { method: 'POST', path: '/graceful_shutdown' },
    serves: (sidecar) => flagPort(sidecar, '-graceful-port'),
  },
  // Google's Cloud SQL Auth Proxy v2 written into a Job's template by its chart, as Google's
  // "Connect from Google Kubernetes Engine" sidecar example names it, with the admin server of
  // --quitquitquit (its default port, 9091: no --admin-port).
  cloudSqlProxy: {
    entry: 'cloud-sql-proxy',
    sidecar: 'cloud-sql-proxy',
    injected: {
      containers: [APP, { name: 'cloud-sql-proxy', image: 'gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.15.2', args: ['--structured-logs', '--port=5432', '--quitquitquit', 'example-project:europe-west1:exports'] }],
    },
    stop: 'cloud-sql-proxy',
    request: { method: 'POST', path: '/quitquitquit' },
    serves: (sidecar) => (sidecar.args?.includes('--quitquitquit') && !sidecar.args.some((arg) => arg.startsWith('--admin-port')) ? 9091 : undefined),
  },
};

/** The policy the chart renders with only this preset enabled, read as serve reads it. */
async function presetPolicy(preset: string): Promise<InjectedSidecarPolicy> {
  const manifests = await render({ injectedSidecars: { presets: { [preset]: { enabled: true } } } });
  const { data } = get(manifests, 'ConfigMap') as Manifest & { data: Record<string, string> };
  const parsed = parseInjectedSidecarPolicy(data['policy.yaml'] ?? '');
  if ('errors' in parsed) throw new Error(`${preset}: ${parsed.errors.join('; ')}`);
  return parsed.policy;
}

function jobPod(injected: Injected) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'nightly-export-7xk2p', namespace: 'exports', ownerReferences: [JOB_OWNER], ...(injected.annotations ? { annotations: injected.annotations } : {}) },
    spec: { restartPolicy: 'Never', ...(injected.initContainers ? { initContainers: injected.initContainers } : {}), containers: injected.containers },
  };
}

t.test('the values name exactly the presets tested here', async (t) => {
  const values = parse(readFileSync(join(chartDir, 'values.yaml'), 'utf8')) as { injectedSidecars: { presets: object } };
  t.same(Object.keys(values.injectedSidecars.presets).sort(), Object.keys(PRESETS).sort());
});

for (const [key, preset] of Object.entries(PRESETS)) {
  t.test(`${key}: a Job's pod as its injector leaves it gets the annotations of a marked sidecar, and is managed`, async (t) => {
    const policy = await presetPolicy(key);
    const pod = jobPod(preset.injected);
    const sidecar = preset.injected.containers.find((container) => container.name === preset.sidecar)!;
    t.ok(sidecar, `the injector's container is ${preset.sidecar}`);

    const added = injectedSidecarAnnotations(pod, undefined, policy);
    t.same(added, {
      annotations: {
        [POD_ANNOTATIONS.sidecars]: preset.sidecar,
        ...(preset.stop !== undefined ? { [`${POD_ANNOTATIONS.stopPrefix}${preset.sidecar}`]: preset.stop } : {}),
        ...(preset.gracePeriodSeconds !== undefined ? { [`${POD_ANNOTATIONS.gracePeriodPrefix}${preset.sidecar}`]: preset.gracePeriodSeconds } : {}),
        [INJECTED_POLICY_ANNOTATION]: preset.entry,
      },
      entries: [preset.entry],
    });

    const mutated = { ...pod, metadata: { ...pod.metadata, annotations: { ...pod.metadata.annotations, ...added?.annotations } } };
    t.ok(shouldManageObject(mutated, []), 'the webhook labels the pod managed');
    const roles = classifyContainers(mutated.spec, mutated.metadata.annotations);
    t.same(roles.map((role) => [role.name, role.role]), preset.injected.containers.map((container) => [container.name, container.name === preset.sidecar ? 'sidecar' : 'main']), 'the injected container is its sidecar, the app its main container');

    const stop = parseStopMethod(preset.stop ?? 'signal');
    t.notOk('error' in stop, `the stop method reads: ${JSON.stringify(stop)}`);
    if (!('method' in stop)) return;
    const role = roles.find((each) => each.name === preset.sidecar);
    t.same(role?.markers.stop, stop.method, 'as the sidecar reads it');
    if (preset.request === undefined) {
      t.same(stop.method, { kind: 'signal' }, 'SIGTERM');
      return;
    }
    t.equal(stop.method.kind, 'http');
    if (stop.method.kind !== 'http') return;
    const url = new URL(stop.method.url);
    t.match({ method: stop.method.method, host: url.hostname, path: url.pathname }, { method: preset.request.method, host: 'localhost', path: preset.request.path }, 'a request to the pod\'s own loopback');
    const served = preset.serves?.(sidecar);
    if (preset.serves) t.equal(portOf(stop.method), served, `on the port the sidecar's spec serves it on (${served})`);

    t.same(injectedSidecarAnnotations(mutated, undefined, policy), added, 'a second admission of the pod changes nothing');
  });
}

t.test('a preset leaves alone what it must: a native sidecar, a pod that marks its own, a pod that never finishes, a pod of another controller', async (t) => {
  const policy = await presetPolicy('istio');
  const { injected } = PRESETS.istio!;
  const proxy = injected.containers.find((container) => container.name === 'istio-proxy')!;
  // Istio's native sidecar mode (ENABLE_NATIVE_SIDECARS): istio-proxy an init container with restartPolicy Always.
  const native = jobPod({ ...injected, initContainers: [...(injected.initContainers ?? []), { ...proxy, restartPolicy: 'Always' }], containers: [APP] });
  t.equal(injectedSidecarAnnotations(native, undefined, policy), undefined, 'a native sidecar: the kubelet stops it');
  const own = jobPod({ ...injected, annotations: { ...injected.annotations, [POD_ANNOTATIONS.sidecars]: 'istio-proxy', [`${POD_ANNOTATIONS.stopPrefix}istio-proxy`]: 'istio-proxy:15021' } });
  t.equal(injectedSidecarAnnotations(own, undefined, policy), undefined, 'a pod whose author named the sidecar: its own markers win');
  const always = jobPod(injected);
  always.spec.restartPolicy = 'Always';
  t.equal(injectedSidecarAnnotations(always, undefined, policy), undefined, 'restartPolicy Always: never');
  const workflow = jobPod(injected);
  workflow.metadata.ownerReferences = [{ ...JOB_OWNER, apiVersion: 'argoproj.io/v1alpha1', kind: 'Workflow' }];
  t.equal(injectedSidecarAnnotations(workflow, undefined, policy), undefined, 'an Argo Workflow\'s pod: Argo stops its own sidecars');
});
