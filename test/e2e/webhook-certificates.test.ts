// Certificates kept in a Secret: replicas share them, and they are renewed while serve runs,
// without a restart and without the API server losing trust in the webhook, even when replicas
// renew the CA at the same time.
import { X509Certificate } from 'node:crypto';
import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { syncCaBundles } from '../../src/kube/webhook-configurations.ts';
import { ENV_WITH_IMAGE } from '../../src/policy/index.ts';
import { certificatesIn, issueWithNewCa, servingHosts, type CertificateBundle } from '../../src/tls/certificates.ts';
import { secretStore } from '../../src/tls/secret-store.ts';
import { startControlPlane } from '../support/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { jobYaml, main } from '../support/pods.ts';
import { registeringWebhooks, servedCertificate, startServe, type ServeProcess } from '../support/serve-process.ts';

const cp = await startControlPlane();
t.teardown(() => cp.stop());
const addonNamespace = await cp.createNamespace();
const core = cp.kubeConfig.makeApiClient(CoreV1Api);

const serveArgs = (secret: string, extra: string[]) => [
  '--kubeconfig', cp.kubeconfigPath,
  '--namespace', addonNamespace,
  '--tls-secret', secret,
  '--no-watcher',
  ...extra,
];

/** Starts the replicas at once, so they race to create the Secret. */
async function startReplicas(t: Test, ...argLists: (string[] | ((port: number) => string[]))[]): Promise<ServeProcess[]> {
  const replicas = await Promise.all(argLists.map((args) => startServe(args)));
  t.teardown(() => Promise.all(replicas.map((replica) => replica.stop())));
  return replicas;
}

/** A Job the validating webhook denies: the sidecar's quick-exit image is its own image. */
const ownImageJob = jobYaml('own-image', {
  containers: [main(), { name: 'proxy', image: 'nginx:1.27', env: [{ name: ENV_WITH_IMAGE, value: 'nginx:1.27' }] }],
});

async function secretCertificates(name: string) {
  const secret = await core.readNamespacedSecret({ name, namespace: addonNamespace });
  const text = (key: string) => Buffer.from(secret.data?.[key] ?? '', 'base64').toString();
  return { type: secret.type, keys: Object.keys(secret.data ?? {}).sort(), cert: new X509Certificate(text('tls.crt')), caBundle: text('ca.crt') };
}

t.test('the Secret store: the first writer wins, later writers adopt what it stored', async (t) => {
  const store = secretStore(core, addonNamespace, 'race-tls');
  const issue = () => issueWithNewCa({ hosts: servingHosts('svc', addonNamespace), validityMs: 3_600_000, now: new Date() });
  const [mine, theirs] = await Promise.all([issue(), issue()]);

  const first = await store.save(mine, undefined);
  t.equal(first.bundle, mine, 'created');
  t.equal((await store.save(theirs, undefined)).bundle.cert, mine.cert, 'a second create (AlreadyExists) returns the stored certificates');

  const renewed = await store.save(theirs, first);
  t.equal(renewed.bundle, theirs, 'an update with the current resourceVersion is stored');
  t.equal((await store.save(mine, first)).bundle.cert, theirs.cert, 'an update with a stale resourceVersion (Conflict) returns the stored certificates');
  t.same((await store.load())?.bundle, theirs);
});

t.test('two replicas share one certificate through the Secret', async (t) => {
  const [a, b] = await startReplicas(t, serveArgs('shared-tls', []), serveArgs('shared-tls', []));
  const stored = await secretCertificates('shared-tls');
  t.equal(stored.type, 'kubernetes.io/tls');
  t.same(stored.keys, ['ca.crt', 'ca.key', 'tls.crt', 'tls.key']);
  t.equal((await servedCertificate(a!.port)).serialNumber, stored.cert.serialNumber, 'replica A serves the stored certificate');
  t.equal((await servedCertificate(b!.port)).serialNumber, stored.cert.serialNumber, 'so does replica B');
  for (const replica of [a!, b!]) t.notMatch(replica.output(), /PRIVATE KEY/, 'no key material in the logs');
});

t.test('without --register-webhooks, the caBundle of configurations created by others is kept current', async (t) => {
  const [serve] = await startReplicas(t, serveArgs('chart-tls', ['--webhook-config-name', 'chart', '--cert-check-interval', '1s']));
  // What a chart would install: everything but the caBundle, which it cannot know.
  const applied = await cp.kubectl(['apply', '-f', '-'], {
    input: `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: chart}
webhooks:
  - name: validate.sidecar-terminator.io
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Ignore
    clientConfig: {url: "${serve!.url}/validate"}
    namespaceSelector:
      matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [chart-users]}]
    rules: [{apiGroups: [batch], apiVersions: [v1], resources: [jobs], operations: [CREATE]}]
`,
  });
  t.equal(applied.code, 0, 'applied', { stderr: applied.stderr });
  await cp.createNamespace('chart-users');

  const { caBundle } = await secretCertificates('chart-tls');
  // The wait is the check: it fails the test when the CA of the Secret never arrives.
  await waitFor('the caBundle of the Secret to be patched in', async () => {
    const read = await cp.kubectl(['get', 'validatingwebhookconfiguration', 'chart', '-o', 'jsonpath={.webhooks[0].clientConfig.caBundle}']);
    return Buffer.from(read.stdout, 'base64').toString() === caBundle;
  });
  t.ok(serve!.logs().some((line) => line.msg === 'caBundle of the webhook configurations updated'), 'logged');

  const denied = await cp.kubectl(['apply', '-f', '-'], { namespace: 'chart-users', input: ownImageJob });
  t.not(denied.code, 0, 'the API server now calls the webhook');
  t.match(denied.stderr, "the quick-exit image is the sidecar's own image");
});

t.test('the serving certificate is renewed while serve runs, and the API server keeps trusting it', async (t) => {
  const userNamespace = await cp.createNamespace();
  // Renewed about 15 s after each issue; checked every 2 s.
  const shortLived = ['--cert-validity', '2m', '--cert-renew-before', '1m45s', '--cert-check-interval', '2s'];
  // failurePolicy Ignore: were the API server unable to reach the webhook, the bad Job below would be admitted.
  const [a, b] = await startReplicas(
    t,
    (port) => serveArgs('rotating-tls', [...shortLived, ...registeringWebhooks(port, 'Ignore', 'rotation')]),
    serveArgs('rotating-tls', [...shortLived, '--webhook-config-name', 'rotation']),
  );
  const initial = await servedCertificate(a!.port);
  const initialCa = (await secretCertificates('rotating-tls')).caBundle;

  const renewed = await waitFor(
    'replica A to serve a renewed certificate',
    async () => {
      const served = await servedCertificate(a!.port);
      return served.fingerprint256 !== initial.fingerprint256 && served;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
  t.not(renewed.serialNumber, initial.serialNumber, 'a new certificate is served');
  t.ok(renewed.validToDate > initial.validToDate, 'that expires later');
  t.equal((await secretCertificates('rotating-tls')).caBundle, initialCa, 'signed by the same CA');
  t.ok(a!.running(), 'replica A never stopped');
  t.ok(a!.logs().some((line) => line.msg === 'serving the renewed certificate' && line.pid === a!.pid), 'it swapped the certificate itself (same pid)');

  const [, servedB] = await waitFor(
    'both replicas to serve the same certificate',
    async () => {
      const served = await Promise.all([servedCertificate(a!.port), servedCertificate(b!.port)]);
      return served[0].serialNumber === served[1].serialNumber && served;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  t.ok(servedB.validToDate > initial.validToDate, 'replica B serves a renewed certificate: it picked up the renewal from the Secret (or A picked up B’s)');

  const denied = await cp.kubectl(['apply', '-f', '-'], { namespace: userNamespace, input: ownImageJob });
  t.not(denied.code, 0, 'still denied after the renewal: the API server called the webhook');
  t.match(denied.stderr, "the quick-exit image is the sidecar's own image");
});

t.test('replicas renewing the CA at once: the caBundle never loses the CA of the certificate in the Secret, and every patch is a test-and-set', async (t) => {
  const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const name = 'ca-race';
  const applied = await cp.kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name },
      webhooks: [{ name: 'validate.sidecar-terminator.io', admissionReviewVersions: ['v1'], sideEffects: 'None', failurePolicy: 'Ignore', clientConfig: { url: 'https://127.0.0.1:1/validate' }, namespaceSelector: { matchLabels: { none: 'none' } }, rules: [] }],
    }),
  });
  t.equal(applied.code, 0, 'applied', { stderr: applied.stderr });
  const store = secretStore(core, addonNamespace, 'ca-race-tls');
  const fromStore = { read: async () => (await store.load())?.bundle.caBundle };
  const trusted = async () => certificatesIn(Buffer.from((await admission.readValidatingWebhookConfiguration({ name })).webhooks![0]!.clientConfig.caBundle ?? '', 'base64').toString());
  const trusts = async (bundle: CertificateBundle) => (await trusted()).some((ca) => new X509Certificate(bundle.cert).verify(new X509Certificate(ca).publicKey));
  /** Another replica renews the CA: a new one in the Secret (the previous one kept beside it), then in the caBundle. */
  const renewCa = async () => {
    const stored = (await store.load())!;
    const renewed = (await store.save(await issueWithNewCa({ hosts: servingHosts('svc', addonNamespace), validityMs: 3_600_000, now: new Date() }, stored.bundle), stored)).bundle;
    t.same(await syncCaBundles(admission, name, renewed.caBundle, fromStore), ['ValidatingWebhookConfiguration'], 'the renewing replica patches its new CA in');
    return renewed;
  };

  const first = (await store.save(await issueWithNewCa({ hosts: servingHosts('svc', addonNamespace), validityMs: 3_600_000, now: new Date() }), undefined)).bundle;
  await syncCaBundles(admission, name, first.caBundle, fromStore);
  // Replica B renews the CA; replica A still holds the first bundle and checks the caBundle with it.
  const second = await renewCa();
  await syncCaBundles(admission, name, first.caBundle, fromStore);
  t.ok(await trusts(second), "the stale replica left in the CA of the Secret's certificate");
  t.ok(await trusts(first), 'and the previous one, which the Secret keeps while it is valid');
  // Without reading the Secret first, as before, it would have taken that CA out.
  await syncCaBundles(admission, name, first.caBundle);
  t.notOk(await trusts(second), 'without the Secret read back: the CA the other replica serves with is gone (what the read prevents)');
  await syncCaBundles(admission, name, second.caBundle, fromStore);

  // A renewal between a replica's read of the configuration and its patch: the patch fails on
  // the resourceVersion and is computed again from what is there now. (The caBundle emptied
  // first, as a chart upgrade does, so that the stale replica has something to patch.)
  await admission.patchValidatingWebhookConfiguration({ name, body: [{ op: 'remove', path: '/webhooks/0/clientConfig/caBundle' }] });
  let third: CertificateBundle | undefined;
  const failures: number[] = [];
  const racing = new Proxy(admission, {
    get(target, property, receiver) {
      if (property === 'readValidatingWebhookConfiguration') {
        return async (request: { name: string }) => {
          const read = await target.readValidatingWebhookConfiguration(request);
          third ??= await renewCa();
          return read;
        };
      }
      if (property === 'patchValidatingWebhookConfiguration') {
        return async (request: Parameters<AdmissionregistrationV1Api['patchValidatingWebhookConfiguration']>[0]) => {
          try {
            return await target.patchValidatingWebhookConfiguration(request);
          } catch (error) {
            failures.push((error as { code: number }).code);
            throw error;
          }
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? ((value as (...args: unknown[]) => unknown).bind(target) as unknown) : value;
    },
  });
  await syncCaBundles(racing, name, first.caBundle, fromStore);
  t.equal(failures.length, 1, `the patch computed from the read before the renewal was refused (HTTP ${failures.join(', ')})`);
  t.ok(third && (await trusts(third)), 'the CA of the renewal that came in between is still trusted');
  t.ok(await trusts(second), 'and the one before it, which the Secret still holds');
  t.ok(await trusts(first), "beside the stale replica's own");
});
