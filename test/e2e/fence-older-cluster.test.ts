// On a cluster without admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (here an API
// server with that API turned off, as discovery then shows it), the chart does not install
// without the fence unless told so (fence.enabled=false), and its notes then say what that leaves
// open; `serve --register-webhooks` runs on with a warning.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { helm, helmEnv, helmRelease } from '../chart/helm.ts';
import { startControlPlane } from '../support/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { registeringWebhooks, startServe } from '../support/serve-process.ts';

// The admission plugin goes too: it waits for the API it enforces, and would keep the server unready.
const cp = await startControlPlane({
  apiServerArgs: [
    '--runtime-config=admissionregistration.k8s.io/v1/validatingadmissionpolicies=false,admissionregistration.k8s.io/v1/validatingadmissionpolicybindings=false',
    '--disable-admission-plugins=ValidatingAdmissionPolicy',
  ],
});
t.teardown(() => cp.stop());

t.test('the API server does not serve ValidatingAdmissionPolicy', async (t) => {
  const resources = await cp.kubectl(['api-resources', '--api-group=admissionregistration.k8s.io', '-o', 'name']);
  t.equal(resources.code, 0, resources.stderr || 'kubectl api-resources');
  t.match(resources.stdout, /validatingwebhookconfigurations/, 'webhooks are served');
  t.notMatch(resources.stdout, /validatingadmissionpolicies/, 'admission policies are not');
});

t.test('helm install: refused without the fence; with fence.enabled=false installed, and the notes say what that leaves open', async (t) => {
  const env = helmEnv(cp.kubeconfigPath, t);
  await cp.createNamespace('sidecar-terminator');
  await t.rejects(helmRelease(env, 'install', 'sidecar-terminator', 'sidecar-terminator', {}), /no matches for kind "ValidatingAdmissionPolicy" in version "admissionregistration.k8s.io\/v1"/, 'the fence is not silently left out');
  await helm(['uninstall', 'sidecar-terminator', '--namespace', 'sidecar-terminator', '--no-hooks'], { env });
  const manifests = await helmRelease(env, 'install', 'sidecar-terminator', 'sidecar-terminator', { fence: { enabled: false } });
  t.same(manifests.filter((m) => m.kind.startsWith('ValidatingAdmissionPolicy')), [], 'no policy, no binding');
  t.ok(manifests.some((m) => m.kind === 'ClusterRole'), 'the rest of the chart is installed');
  const notes = await helm(['get', 'notes', 'sidecar-terminator', '--namespace', 'sidecar-terminator'], { env });
  t.match(notes.stdout, /WARNING: fence.enabled is false, so the ServiceAccounts are not fenced: a stolen token of the\s+watcher's can patch any pod it may patch/, 'a warning saying what it costs');
  t.match(notes.stdout, /Set fence.enabled=true\s+\(Kubernetes 1.30\+\) to add the fence/, 'and the way back');
});

t.test('serve --register-webhooks registers the webhooks and warns that nothing is fenced', async (t) => {
  const certDir = await mkdtemp(join(tmpdir(), 'st-fence-certs-'));
  t.teardown(() => rm(certDir, { recursive: true, force: true }));
  const serve = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, '--no-watcher', ...registeringWebhooks(port, 'Ignore')]);
  t.teardown(() => serve.stop());
  // Registered after the server listens: /readyz may answer before.
  const warning = await waitFor('the warning', () => serve.logs().find((line) => typeof line.msg === 'string' && line.msg.includes('the service accounts are not fenced')));
  t.match(warning, { level: 40 }, 'a warning');
  t.ok(serve.logs().some((line) => line.msg === 'webhook configurations registered'), 'the webhooks are registered');
  t.ok(serve.running(), 'and serve runs on');
});
