// Security properties of a real `serve` (webhook and watcher) against a real API server:
// - the webhook port speaks TLS 1.2 or later only, never plain HTTP;
// - the watcher writes no image but the one a pod's own env declares (and, with an allowlist,
//   only an allowed one), and the managed label alone never makes it act;
// - nothing secret reaches the logs: the API token, the serving key, env values of pods;
// - the certificate Secret is readable by the webhook's service account only (the chart's RBAC,
//   rendered with helm and applied to the API server, asked with `kubectl auth can-i`).
import { readFileSync, statSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { join } from 'node:path';
import tls from 'node:tls';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, MANAGED, MANAGED_LABEL } from '../../src/policy/index.ts';
import { render, type Manifest } from '../chart/helm.ts';
import { expectJobStoppedBy, expectStoppedBy } from '../support/endings.ts';
import { findContainerStatus, simAnnotations } from '../support/kubelet-simulator.ts';
import { handshake, postStatus } from '../support/net.ts';
import { waitFor } from '../support/wait.ts';
import { apply, eventsOf, podOfJob, startStack, waitForJob } from '../support/stack.ts';
import { imageSidecar, jobYaml, main, podYaml, sidecarMarked } from '../support/pods.ts';

// Let this process offer TLS 1.0 and 1.1 at all, so that a refusal is the server's doing.
tls.DEFAULT_MIN_VERSION = 'TLSv1';
tls.DEFAULT_CIPHERS += ':@SECLEVEL=0';

const ALLOWED = 'registry.example.com/quick-exit:*';
// The secret-looking values of this run; none may appear in any log line.
const SECRETS = {
  password: `pw-${randomBytes(12).toString('hex')}`,
  awsKey: `wJalrXUtnFEMI/K7MDENG/${randomBytes(9).toString('base64url')}`,
  token: `ghp_${randomBytes(18).toString('hex')}`,
};

const stack = await startStack(t, { serveArgs: ['--kill-mechanism', 'signal', '--quick-exit-image-allowlist', ALLOWED, '--log-level', 'debug'] });
const { cp, core } = stack;
const addonNamespace = await cp.createNamespace('sidecar-terminator'); // excluded from the webhook: pods there are not admitted by it

// Every container carries a secret in its env, which no log may show.
const mainWithSecret = () => main('main', 'busybox:1.36', { env: [{ name: 'DB_PASSWORD', value: SECRETS.password }] });
/** The logs sidecar, one KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE per image. */
const imageSidecarWithSecret = ([first, ...more]: string[]) =>
  imageSidecar('logs', first, { env: [{ name: 'AWS_SECRET_ACCESS_KEY', value: SECRETS.awsKey }, ...more.map((image) => ({ name: ENV_WITH_IMAGE, value: image }))] });
const killSidecarWithSecret = (value = 'true') => sidecarMarked(value, 'proxy', { env: [{ name: 'GITHUB_TOKEN', value: SECRETS.token }] });

t.test('the webhook port: TLS 1.2 or later, never plain HTTP', async (t) => {
  const { port } = stack.serve;
  t.match(await handshake(port, {}), { protocol: 'TLSv1.3' }, 'TLS 1.3 is served');
  t.match(await handshake(port, { maxVersion: 'TLSv1.2' }), { protocol: 'TLSv1.2' }, 'TLS 1.2 is served');
  t.match(await handshake(port, { minVersion: 'TLSv1', maxVersion: 'TLSv1.1' }), { error: /protocol version|unsupported protocol|alert/i }, 'TLS 1.1 is refused');
  t.match(await handshake(port, { minVersion: 'TLSv1', maxVersion: 'TLSv1' }), { error: /protocol version|unsupported protocol|alert/i }, 'TLS 1.0 is refused');

  const plain = await new Promise<{ status?: number; error?: string }>((resolvePlain) => {
    const req = httpGet({ host: '127.0.0.1', port, path: '/healthz', timeout: 5000 }, (res) => {
      res.resume();
      resolvePlain({ status: res.statusCode });
    });
    req.on('error', (error) => resolvePlain({ error: error.message }));
    req.on('timeout', () => req.destroy(new Error('timeout')));
  });
  t.notOk(plain.status, `plain HTTP gets no HTTP answer (${plain.error ?? plain.status})`);
  t.ok(plain.error, 'the connection fails');
});

t.test('the watcher writes exactly the quick-exit image the pod declares, and nothing else', async (t) => {
  const namespace = await cp.createNamespace();
  // The marker defined twice: the first definition is the quick-exit image, as OpenKruise picks it
  // (although the container's environment has the last value).
  const images = ['registry.example.com/quick-exit:0.9', 'registry.example.com/quick-exit:2.0'];
  const warned = await apply(cp, namespace, jobYaml('image', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers: [mainWithSecret(), imageSidecarWithSecret(images)] }));
  t.match(warned, /defined 2 times in this container/, 'the webhook warned about the duplicate');
  const before = await podOfJob(stack, namespace, 'image');
  await waitForJob(stack, namespace, 'image', 'Complete');
  const after = await podOfJob(stack, namespace, 'image');
  t.equal(after.spec?.containers.find((c) => c.name === 'logs')?.image, images[0], 'the image is the first definition, as OpenKruise picks it');
  const withoutReplacedImage = (pod: V1Pod) => pod.spec!.containers.map((c) => (c.name === 'logs' ? { ...c, image: '(replaced)' } : c));
  t.same(withoutReplacedImage(after), withoutReplacedImage(before), 'no other field of any container changed');
  t.notOk(after.spec?.ephemeralContainers, 'no ephemeral container either');
  await expectJobStoppedBy(t, stack, namespace, 'image', { logs: 'image' });
});

t.test('a labelled pod whose quick-exit image is outside the allowlist is not given that image', async (t) => {
  // The add-on's own namespace is not served by the webhook: the author labels the pod and names any image.
  const outside = 'evil.example.com/miner:1.0';
  const labelled = { labels: { [MANAGED_LABEL]: MANAGED }, annotations: { [simAnnotations.exitAfter('main')]: '1s' } };
  await apply(cp, addonNamespace, podYaml('outside-allowlist', [mainWithSecret(), imageSidecarWithSecret([outside])], labelled));
  const warning = await waitFor('a SidecarTerminationFailed event', async () => (await eventsOf(stack, addonNamespace, 'outside-allowlist')).find((e) => e.type === 'Warning'), { timeoutMs: 30_000 }).catch(() => undefined);
  const current = await core.readNamespacedPod({ namespace: addonNamespace, name: 'outside-allowlist' });
  t.equal(current.spec?.containers.find((c) => c.name === 'logs')?.image, 'fluent/fluent-bit:3.1', `the watcher did not write ${outside} (not in --quick-exit-image-allowlist ${ALLOWED})`);
  t.match(warning?.message, /allowlist/, 'and said why in a Warning event');
});

t.test('the managed label alone never makes the watcher act', async (t) => {
  const namespace = addonNamespace;
  const labelled = { labels: { [MANAGED_LABEL]: MANAGED }, annotations: { [simAnnotations.exitAfter('main')]: '1s' } };
  const pod = (name: string, sidecar: V1Container) => podYaml(name, [mainWithSecret(), sidecar], labelled);
  const fromConfigMap: V1Container = { name: 'proxy', image: 'envoyproxy/envoy:v1.31.0', env: [{ name: ENV_WHEN_JOB_EXIT, valueFrom: { configMapKeyRef: { name: 'settings', key: 'stop' } } }] };
  await apply(cp, namespace, pod('no-markers', main('other', 'nginx:1.27')));
  await apply(cp, namespace, pod('marker-from-configmap', fromConfigMap));
  await apply(cp, namespace, pod('marker-false', killSidecarWithSecret('false')));
  // A control pod, created last, that the watcher does act on: once it is done, the others were seen.
  await apply(cp, namespace, pod('control', killSidecarWithSecret()));
  const control = await waitFor('the control pod to succeed', async () => {
    const current = await core.readNamespacedPod({ namespace, name: 'control' });
    return current.status?.phase === 'Succeeded' && current;
  });
  await expectStoppedBy(t, stack, control, { proxy: 'signal' });
  for (const name of ['no-markers', 'marker-from-configmap', 'marker-false']) {
    const current = await core.readNamespacedPod({ namespace, name });
    t.ok(findContainerStatus(current, 'main')?.state?.terminated, `${name}: its main container has finished`);
    t.equal(current.status?.phase, 'Running', `${name}: still running`);
    t.notOk(current.spec?.ephemeralContainers, `${name}: no ephemeral container`);
    t.same(current.spec?.containers.map((c) => c.image), ['busybox:1.36', name === 'no-markers' ? 'nginx:1.27' : 'envoyproxy/envoy:v1.31.0'], `${name}: images untouched`);
    t.notOk(current.status?.conditions?.some((c) => c.type === 'SidecarTerminated'), `${name}: no SidecarTerminated condition`);
    t.same(await eventsOf(stack, namespace, name), [], `${name}: no event`);
  }
});

t.test('no token, key or env value in the logs, errors included', async (t) => {
  const namespace = await cp.createNamespace();
  // Admitted, denied (the wrong marker value is an error), and stopped by signal.
  await apply(cp, namespace, jobYaml('secret-env', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers: [mainWithSecret(), killSidecarWithSecret()] }));
  const denied = await cp.kubectl(['apply', '-f', '-'], { namespace, input: jobYaml('denied', { containers: [mainWithSecret(), killSidecarWithSecret('yes')] }) });
  t.match(denied.stderr, /denied the request/, 'the Job with an invalid marker is denied');
  // Bodies that fail on the way in, each carrying the secrets.
  const review = JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: 'u1', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', object: { spec: { containers: [{ name: 'c', env: [{ name: 'DB_PASSWORD', value: SECRETS.password }, { name: 'T', value: SECRETS.token }] }] } } },
  });
  const malformed = [
    review.slice(0, review.indexOf(SECRETS.token) + 10), // cut inside a value
    `${review}${SECRETS.awsKey}`, // trailing bytes
    review.replace('"u1"', '7'), // a uid that is not a string
    review.replace('"kind":{"group":"","version":"v1","kind":"Pod"},', ''), // no request.kind
  ];
  for (const body of malformed) {
    const status = await postStatus(stack.serve.port, '/validate', body, { contentType: 'application/json' });
    t.equal(status, 400, 'a malformed review is refused');
  }
  await waitForJob(stack, namespace, 'secret-env', 'Complete');
  await expectJobStoppedBy(t, stack, namespace, 'secret-env', { proxy: 'signal' });
  // The API server going away and coming back: watch and client errors, logged with their details.
  await cp.restartApiServer();
  await apply(cp, namespace, jobYaml('after-restart', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers: [mainWithSecret(), killSidecarWithSecret()] }));
  await waitForJob(stack, namespace, 'after-restart', 'Complete');
  await expectJobStoppedBy(t, stack, namespace, 'after-restart', { proxy: 'signal' });
  t.ok(stack.serve.logs().some((line) => Number(line.level) >= 40), 'errors were logged');

  const kubeconfig = JSON.parse(readFileSync(cp.kubeconfigPath, 'utf8')) as { users: Array<{ user: { token: string } }> };
  const token = kubeconfig.users[0]!.user.token;
  const certDir = certDirOf(stack.serve.pid);
  const keyMaterial = ['tls.key', 'ca.key'].flatMap((file) =>
    readFileSync(join(certDir, file), 'utf8')
      .split('\n')
      .filter((line) => line.length >= 16 && !line.startsWith('-----')),
  );
  t.ok(keyMaterial.length >= 2, 'the private keys of --cert-dir were read');
  const output = stack.serve.output();
  t.ok(output.length > 10_000, `serve logged (${output.length} bytes, at debug level)`);
  t.notOk(output.includes(token), 'no bearer token');
  t.notOk(/PRIVATE KEY/.test(output), 'no PEM private key');
  t.same(keyMaterial.filter((line) => output.includes(line)), [], 'no line of the serving or CA key');
  for (const [name, value] of Object.entries(SECRETS)) t.notOk(output.includes(value), `no env value (${name})`);
  const events = (await core.listNamespacedEvent({ namespace })).items.map((e) => e.message ?? '').join('\n');
  t.same(Object.values(SECRETS).filter((value) => events.includes(value)), [], 'no env value in the events either');
});

t.test('the serving key on disk is readable by its owner only', async (t) => {
  const certDir = certDirOf(stack.serve.pid);
  t.equal(statSync(certDir).mode & 0o777, 0o700, '--cert-dir is 0700');
  for (const file of ['tls.key', 'ca.key']) t.equal(statSync(join(certDir, file)).mode & 0o777, 0o600, `${file} is 0600`);
});

// helm comes from scripts/build-helm.sh (built once from the Go module proxy, then cached).
const chart = await render({}, { namespace: 'st-rbac' }).then(
  (manifests) => ({ manifests, skip: false as const }),
  (error: unknown) => ({ manifests: [] as Manifest[], skip: `the chart cannot be rendered here: ${String(error).slice(0, 300)}` }),
);

t.test("the chart: only the webhook's service account may read the certificate Secret", { skip: chart.skip }, async (t) => {
  const { manifests } = chart;
  const variants: Array<[string, object]> = [
    ['defaults', {}],
    ['watcher limited to namespaces', { watcher: { namespaces: ['team-a', 'team-b'] } }],
    ['crr only', { watcher: { killMechanism: 'crr' } }],
  ];
  const tlsSecret = 'sidecar-terminator-tls';
  for (const [label, values] of variants) {
    const rendered = label === 'defaults' ? manifests : await render(values, { namespace: 'st-rbac' });
    const grants = secretGrants(rendered);
    t.same(grants.filter((g) => g.kind === 'ClusterRole'), [], `${label}: no ClusterRole grants anything on secrets`);
    const roles = [...new Set(grants.map((g) => `${g.kind}/${g.namespace}/${g.role}`))];
    t.same(roles, ['Role/st-rbac/sidecar-terminator-webhook'], `${label}: one Role in the release namespace grants secrets: the webhook's`);
    t.same(
      grants.filter((g) => g.verb !== 'create' && JSON.stringify(g.resourceNames) !== JSON.stringify([tlsSecret])),
      [],
      `${label}: every verb but create (which cannot be limited by name) is limited to ${tlsSecret}`,
    );
    t.same(grants.filter((g) => ['list', 'watch', '*'].includes(g.verb)), [], `${label}: no list, watch or * on secrets`);
    const bindings = rendered.filter((m) => (m.kind === 'RoleBinding' || m.kind === 'ClusterRoleBinding') && (m.roleRef as { name: string }).name === 'sidecar-terminator-webhook');
    const subjects = bindings.flatMap((b) => (b.subjects as Array<{ kind: string; name: string; namespace?: string }>).map((s) => `${b.kind}:${s.kind}/${s.namespace}/${s.name}`));
    t.ok(subjects.length > 0 && subjects.every((s) => s.endsWith('ServiceAccount/st-rbac/sidecar-terminator-webhook')), `${label}: bound to the webhook's service account only (${subjects.join(', ')})`);
  }

  // The API server's own answer: the RBAC objects applied, then asked per service account.
  await cp.createNamespace('st-rbac');
  const rbac = manifests.filter((m) => ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].includes(m.kind));
  const applied = await cp.kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: rbac }) });
  t.equal(applied.code, 0, 'the chart RBAC applies', { stderr: applied.stderr });
  const canI = async (account: string, ...args: string[]) => (await cp.kubectl(['auth', 'can-i', ...args, '--as', `system:serviceaccount:st-rbac:${account}`])).stdout.trim();
  // The authorizer reads RBAC objects through its informers: a binding just applied counts a moment later.
  const reads = await waitFor('the chart RBAC to apply', async () => ((await canI('sidecar-terminator-webhook', 'get', `secret/${tlsSecret}`, '-n', 'st-rbac')) === 'yes' ? 'yes' : undefined), { timeoutMs: 30_000 }).catch(() => 'no');
  t.equal(reads, 'yes', 'the webhook reads its Secret');
  t.equal(await canI('sidecar-terminator-webhook', 'get', 'secret/other', '-n', 'st-rbac'), 'no', 'no other Secret');
  t.equal(await canI('sidecar-terminator-webhook', 'list', 'secrets', '-n', 'st-rbac'), 'no', 'cannot list Secrets');
  t.equal(await canI('sidecar-terminator-webhook', 'get', `secret/${tlsSecret}`, '-n', 'default'), 'no', 'nor read one of that name elsewhere');
  t.equal(await canI('sidecar-terminator-watcher', 'get', `secret/${tlsSecret}`, '-n', 'st-rbac'), 'no', 'the watcher cannot read it');
  t.equal(await canI('sidecar-terminator-watcher', 'list', 'secrets', '--all-namespaces'), 'no', 'the watcher cannot list Secrets anywhere');
  t.equal(await canI('default', 'get', `secret/${tlsSecret}`, '-n', 'st-rbac'), 'no', "the namespace's default service account cannot read it");
});

interface SecretGrant {
  kind: string;
  role: string;
  namespace: string | undefined;
  verb: string;
  resourceNames: string[] | undefined;
}

/** Every (role, verb) that reaches secrets, with the names it is limited to. */
function secretGrants(manifests: Manifest[]): SecretGrant[] {
  return manifests
    .filter((m) => m.kind === 'Role' || m.kind === 'ClusterRole')
    .flatMap((role) =>
      ((role.rules as Array<{ apiGroups?: string[]; resources?: string[]; verbs: string[]; resourceNames?: string[] }> | undefined) ?? [])
        .filter((rule) => (rule.apiGroups ?? []).some((g) => g === '' || g === '*') && (rule.resources ?? []).some((r) => r === 'secrets' || r === '*'))
        .flatMap((rule) => rule.verbs.map((verb) => ({ kind: role.kind, role: role.metadata.name, namespace: role.metadata.namespace, verb, resourceNames: rule.resourceNames }))),
    );
}

/** The --cert-dir a serve process was started with. */
function certDirOf(pid: number): string {
  const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  const dir = args[args.indexOf('--cert-dir') + 1];
  if (!dir) throw new Error('serve has no --cert-dir');
  return dir;
}
