// The chart's webhook.tls.certManager option on a real node, against cert-manager's real CRDs
// (v1.21.2, from its root Go module: scripts/fetch-cert-manager-crds.sh). cert-manager's
// controller and cainjector cannot be built here (their Go modules are not on the proxy), so they
// do not run: the test makes, by hand and in the open, the two writes they would make, and
// nothing else. What is real: the API server judging the chart's Certificate and Issuer against
// cert-manager's CRD schemas (server-side apply, strict field validation), the add-on's own image
// installed with helm, the kubelet mounting the Secret into the webhook pods and updating it, the
// API server calling the webhook through its Service with the caBundle, and the webhook reading
// the renewed files while pods are being admitted.
import { X509Certificate } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { connect } from 'node:tls';
import { promisify } from 'node:util';
import { AdmissionregistrationV1Api, ApiextensionsV1Api, type V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { issueServing, issueWithNewCa, servingHosts, type CertificateBundle } from '../../src/tls/certificates.ts';
import { chartDir, helm, helmEnv, template, valuesFile } from '../chart/helm.ts';
import { repoRoot } from '../support/repo.ts';
import { apiFeatures, kubernetesVersion } from '../support/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { assertAdmittedThroughService, startRealCluster } from '../support/real-stack.ts';
import { killSidecar, main, podYaml } from '../support/pods.ts';

const RELEASE = 'sidecar-terminator';
const NS = 'sidecar-terminator';
const SECRET = `${RELEASE}-tls`;
const CERTIFICATE = `${RELEASE}-serving`;
const MANAGED = 'sidecar-terminator.io/managed';
const version = await kubernetesVersion();

/** The serial number of the certificate served at ip:port. */
function servedSerial(ip: string, port: number): Promise<string> {
  return new Promise((resolveSerial, reject) => {
    const socket = connect({ host: ip, port, rejectUnauthorized: false, servername: `${RELEASE}.${NS}.svc` }, () => {
      resolveSerial(socket.getPeerX509Certificate()!.serialNumber);
      socket.destroy();
    });
    socket.on('error', reject);
  });
}

const serialOf = (bundle: CertificateBundle) => new X509Certificate(bundle.cert).serialNumber;

if (!apiFeatures(version).validatingAdmissionPolicy) t.plan(0, `Kubernetes ${version.gitVersion} is older than the chart's kubeVersion (>=1.30): helm refuses to install it`);
else if (canRunRealNode(t)) {
  const cluster = await startRealCluster(t, { reachableFromPods: true, node: { images: ['sidecar-terminator', 'busybox'] } });
  const { cp, core } = cluster;
  const env = helmEnv(cp.kubeconfigPath, t);
  const kubectl = (args: string[], input?: string, namespace?: string) => cp.kubectl(args, { ...(input !== undefined ? { input } : {}), ...(namespace ? { namespace } : {}) });
  const values = {
    webhook: { failurePolicy: 'Fail', tls: { checkInterval: '5s', certManager: { enabled: true, issuerRef: { name: 'team-ca', kind: 'Issuer', group: 'cert-manager.io' }, duration: '2160h', renewBefore: '360h' } } },
  };
  const hosts = servingHosts(RELEASE, NS);
  const issue = { hosts, validityMs: 90 * 24 * 3_600_000, now: new Date() };
  // The CA the Issuer signs with, and the certificate cert-manager would issue from it.
  const issued = await issueWithNewCa(issue);
  /** What the API server logged about calling webhooks or failing a write, for a failure to name its cause. */
  const apiServerLogLines = () => readFileSync(join(cp.dir, 'kube-apiserver.log'), 'utf8').split('\n').filter((line) => /webhook|Internal error|etcdserver/i.test(line)).slice(-6).join('\n');

  t.test("cert-manager's CRDs judge the chart's Certificate and an Issuer on the API server (server-side apply)", async (t) => {
    const { stdout } = await promisify(execFile)('bash', [join(repoRoot, 'scripts/fetch-cert-manager-crds.sh')], { cwd: repoRoot });
    const crdDir = stdout.trim().split('\n').pop()!;
    const files = readdirSync(crdDir).filter((file) => file.endsWith('.yaml'));
    const installed = await kubectl(['apply', '--server-side', ...files.flatMap((file) => ['-f', join(crdDir, file)])]);
    t.equal(installed.code, 0, `cert-manager's CRDs installed: ${installed.stderr}`);
    const extensions = cp.kubeConfig.makeApiClient(ApiextensionsV1Api);
    await waitFor("cert-manager's CRDs to be established", async () => {
      const crd = await extensions.readCustomResourceDefinition({ name: 'certificates.cert-manager.io' }).catch(() => undefined);
      return crd?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    });
    await kubectl(['create', 'namespace', NS]);
    // The team's CA Issuer (its key in a Secret, as cert-manager's CA issuer reads it).
    const caSecret = { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: 'team-ca', namespace: NS }, stringData: { 'tls.crt': issued.caBundle, 'tls.key': issued.caKey } };
    const issuer = { apiVersion: 'cert-manager.io/v1', kind: 'Issuer', metadata: { name: 'team-ca', namespace: NS }, spec: { ca: { secretName: 'team-ca' } } };
    const applied = await kubectl(['apply', '--server-side', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [caSecret, issuer] }));
    t.equal(applied.code, 0, `the Issuer applied: ${applied.stderr}`);

    const rendered = await template(values, { release: RELEASE, namespace: NS });
    t.equal(rendered.code, 0, rendered.stderr);
    const dryRun = await kubectl(['apply', '--server-side', '--dry-run=server', '-f', '-'], rendered.stdout);
    t.equal(dryRun.code, 0, `every object of the release, the Certificate among them, passes its schema: ${dryRun.stderr}`);
    t.match(dryRun.stdout, new RegExp(`certificate\\.cert-manager\\.io/${CERTIFICATE} serverside-applied \\(server dry run\\)`));
    // The same schema refuses a field cert-manager does not know: the dry run above was judged.
    const misspelt = rendered.stdout.replace('  issuerRef:\n', '  issuerReference:\n');
    const refused = await kubectl(['apply', '--server-side', '--dry-run=server', '-f', '-'], misspelt);
    t.not(refused.code, 0, 'a misspelt field of the Certificate is refused');
    t.match(refused.stderr, /issuerReference|issuerRef/, refused.stderr);
  });

  t.test('helm install: the webhook serves the mounted Secret; cainjector\'s caBundle is what the API server trusts', async (t) => {
    // What cert-manager's controller does for the Certificate: the Secret, with the keys and annotations it writes.
    const secret = (bundle: CertificateBundle) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'kubernetes.io/tls',
      metadata: { name: SECRET, namespace: NS, annotations: { 'cert-manager.io/certificate-name': CERTIFICATE, 'cert-manager.io/issuer-name': 'team-ca', 'cert-manager.io/issuer-kind': 'Issuer', 'cert-manager.io/issuer-group': 'cert-manager.io' } },
      stringData: { 'tls.crt': bundle.cert, 'tls.key': bundle.key, 'ca.crt': bundle.caBundle },
    });
    t.equal((await kubectl(['apply', '-f', '-'], JSON.stringify(secret(issued)))).code, 0, "cert-manager's part: the Secret");
    const file = valuesFile(values);
    t.teardown(file.cleanup);
    const installed = await helm(['install', RELEASE, chartDir, '--namespace', NS, '--values', file.path], { env });
    t.equal(installed.code, 0, `helm install: ${installed.stderr}`);

    // cainjector's part: the CA of the Secret of the Certificate the annotation names, into every webhook's caBundle.
    const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    for (const kind of ['mutatingwebhookconfiguration', 'validatingwebhookconfiguration']) {
      const configuration = JSON.parse((await kubectl(['get', kind, RELEASE, '-o', 'json'])).stdout) as { metadata: { annotations?: Record<string, string> }; webhooks: unknown[] };
      const [namespace, certificate] = configuration.metadata.annotations?.['cert-manager.io/inject-ca-from']?.split('/') ?? [];
      t.same([namespace, certificate], [NS, CERTIFICATE], `${kind}: cert-manager.io/inject-ca-from names the Certificate`);
      const { spec } = JSON.parse((await kubectl(['get', 'certificate', certificate!, '-o', 'json'], undefined, namespace)).stdout) as { spec: { secretName: string } };
      const ca = JSON.parse((await kubectl(['get', 'secret', spec.secretName, '-o', 'json'], undefined, namespace)).stdout) as { data: Record<string, string> };
      const ops = configuration.webhooks.map((_, index) => ({ op: 'add', path: `/webhooks/${index}/clientConfig/caBundle`, value: ca.data['ca.crt'] }));
      t.equal((await kubectl(['patch', kind, RELEASE, '--type=json', '-p', JSON.stringify(ops)])).code, 0, `${kind}: caBundle injected`);
    }
    t.ok((await admission.readMutatingWebhookConfiguration({ name: RELEASE })).webhooks?.every((webhook) => webhook.clientConfig.caBundle), 'every webhook has it');

    const rolled = await kubectl(['rollout', 'status', `deployment/${RELEASE}-webhook`, '--timeout=300s'], undefined, NS);
    t.equal(rolled.code, 0, `the webhook pods run, the Secret mounted: ${rolled.stderr}`);
    const webhookPods = (await core.listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/component=webhook' })).items;
    for (const pod of webhookPods) t.equal(await servedSerial(pod.status!.podIP!, 9443), serialOf(issued), `${pod.metadata!.name} serves the certificate of the Secret`);
    await assertAdmittedThroughService(t, cp, await cp.createNamespace());
    const logs = await kubectl(['logs', '--selector', 'app.kubernetes.io/component=webhook', '--tail', '-1'], undefined, NS);
    t.notMatch(logs.stdout, /issued a new CA|caBundle of|forbidden/i, 'the webhook issued nothing, patched nothing, was refused nothing');
    t.equal((await kubectl(['auth', 'can-i', 'get', `secret/${SECRET}`, '-n', NS, '--as', `system:serviceaccount:${NS}:${RELEASE}-webhook`])).stdout.trim(), 'no', 'nor may it read the Secret through the API');
  });

  t.test('a renewal replaces the Secret while pods are admitted: the webhook serves the new certificate without a restart, no admission fails', async (t) => {
    const namespace = await cp.createNamespace();
    // From the moment the Service is routed: what is counted below is the renewal's doing.
    await assertAdmittedThroughService(t, cp, namespace);
    const marked = (index: number) => podYaml(`during-renewal-${index}`, [main('main', 'busybox:1.35', { command: ['true'] }), killSidecar('proxy', { image: 'busybox:1.35', command: ['sleep', '5'] })]);
    const before = (await core.listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/component=webhook' })).items;
    let admitting = true;
    const created: number[] = [];
    const failures: string[] = [];
    const load = (async () => {
      for (let index = 0; admitting; index++) {
        const result = await kubectl(['create', '-f', '-'], marked(index), namespace);
        if (result.code === 0) created.push(Date.now());
        else failures.push(`${new Date().toISOString()} ${result.stderr.trim()}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    // Counted in pods admitted, not in seconds: a loaded machine creates fewer a second.
    const admitted = (count: number, since: number) => waitFor(`${count} pods admitted`, () => created.filter((at) => at >= since).length >= count || failures.length > 0, { timeoutMs: 120_000 });
    await admitted(3, 0);
    // cert-manager's renewal: a new key and certificate from the same CA, written over the Secret's data.
    const renewed = await issueServing(issued, { ...issue, now: new Date() });
    const replaced = await kubectl(['patch', 'secret', SECRET, '--type=merge', '-p', JSON.stringify({ stringData: { 'tls.crt': renewed.cert, 'tls.key': renewed.key } })], undefined, NS);
    t.equal(replaced.code, 0, `the Secret renewed: ${replaced.stderr}`);
    const renewedAt = Date.now();
    const renewedSerial = serialOf(renewed);
    await waitFor('every webhook pod to serve the renewed certificate', async () => {
      const serials = await Promise.all(before.map((pod) => servedSerial(pod.status!.podIP!, 9443).catch(() => '')));
      return serials.every((serial) => serial === renewedSerial);
    }, { timeoutMs: 180_000, intervalMs: 1000 });
    const servedAt = Date.now();
    t.comment(`served ${Math.round((servedAt - renewedAt) / 1000)} s after the Secret changed (the kubelet's sync, then the webhook's check interval)`);
    await admitted(3, servedAt);
    admitting = false;
    await load;

    t.same(failures, [], `no admission failed (${created.length} pods created)`, failures.length ? { apiServer: apiServerLogLines() } : {});
    const during = created.filter((at) => at >= renewedAt && at < servedAt).length;
    t.ok(created.filter((at) => at < renewedAt).length >= 3 && created.filter((at) => at >= servedAt).length >= 3, `pods were created before the renewal, while it spread (${during}) and after it was served`);
    const pods = (await core.listNamespacedPod({ namespace })).items;
    t.same(pods.filter((pod: V1Pod) => pod.metadata?.labels?.[MANAGED] !== 'true').map((pod) => pod.metadata?.name), [], 'every pod went through the mutating webhook');
    const after = (await core.listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/component=webhook' })).items;
    t.same(after.map((pod) => [pod.metadata!.name, pod.status?.containerStatuses?.[0]?.restartCount]), before.map((pod) => [pod.metadata!.name, 0]), 'the same webhook pods, never restarted');
    const logs = await kubectl(['logs', '--selector', 'app.kubernetes.io/component=webhook', '--tail', '-1'], undefined, NS);
    t.equal(logs.stdout.match(/serving the renewed certificate/g)?.length, before.length, 'each replica said so once');
    t.notMatch(logs.stdout, /admission request rejected|admission handler failed/, 'and answered every review');
  });
}
