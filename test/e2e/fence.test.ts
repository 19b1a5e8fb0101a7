// The fence against an attacker, on a real API server: the chart installed (its ServiceAccounts,
// RBAC and ValidatingAdmissionPolicies), then kubectl with a token of the watcher's or the
// webhook's ServiceAccount tries every write those accounts' RBAC allows but the add-on never
// makes: each is refused by the API server with the policy's message. And the add-on's own
// writes still pass: the watcher runs as its ServiceAccount with the chart's args and stops
// sidecars by signal, by ContainerRecreateRequest, by quick-exit image and with ignore-exit-code,
// labels what the sweeper finds; the webhook, as its own, stores its
// certificate, patches the caBundle and records an event on an owner.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, BatchV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions, type V1EnvVar, type V1EphemeralContainer, type V1Pod } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { SERVE_FLAGS } from '../../src/config.ts';
import { desiredFence } from '../../src/kube/fence.ts';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, MANAGED_LABEL, PHASE_SET_ANNOTATION, SIGNAL_COMMAND, readStopRecord, signalUser, stopArguments } from '../../src/policy/index.ts';
import { argsOf, helmEnv, helmRelease, type Manifest } from '../chart/helm.ts';
import { serviceAccountKubeconfig } from '../support/service-account.ts';
import { apiFeatures, kubernetesVersion } from '../support/control-plane.ts';
import { expectJobStoppedBy, expectStoppedBy, type StopPath } from '../support/endings.ts';
import { simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { postJson, registeringWebhooks, startServe, startWatcherProcess, type ServeProcess } from '../support/serve-process.ts';
import { apply, finishedByWatcher, podOfJob, startCluster, waitForJob } from '../support/stack.ts';
import { jobYaml } from '../support/pods.ts';
import { podReview } from '../support/reviews.ts';

const NS = 'sidecar-terminator';
const WATCHER = 'sidecar-terminator-watcher';
const WEBHOOK = 'sidecar-terminator-webhook';
const SIGNAL_IMAGE = SERVE_FLAGS.signalImage.default;
const QUICK_EXIT = 'registry.example.com/quick-exit:1.0';

// Before Kubernetes 1.30 the chart and serve install no fence (test/e2e/fence-older-cluster.test.ts).
const version = await kubernetesVersion();
if (!apiFeatures(version).validatingAdmissionPolicy) {
  t.plan(0, `skipped: Kubernetes ${version.gitVersion} serves no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy, so there is no fence`);
} else {
  const cluster = await startCluster(t, { installCrrCrd: true });
  const { cp, core } = cluster;
  const custom = cp.kubeConfig.makeApiClient(CustomObjectsApi);

  await cp.createNamespace(NS);
  const jobs = await cp.createNamespace('jobs');
  const victims = await cp.createNamespace('victims');

  // The namespace of the Jobs opts in (the chart's webhook.namespaceLabels below): the sweeper
  // labels pods there only. The chart's webhook configurations then serve it too, with nothing
  // answering behind their Service: failurePolicy Ignore lets each call go after its timeout.
  await cp.kubectl(['label', 'namespace', jobs, 'sidecar-terminator.io/test=enabled']);

  /** A pod the webhook missed (created before it was registered): the sweeper must label it. */
  await core.createNamespacedPod({
    namespace: jobs,
    body: {
      metadata: { name: 'missed', annotations: { [simAnnotations.exitAfter('main')]: '3s' } },
      spec: {
        restartPolicy: 'Never',
        containers: [
          { name: 'main', image: 'busybox:1.36' },
          { name: 'proxy', image: 'envoyproxy/envoy:v1.31.0', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }] },
        ],
      },
    },
  });

  // The chart, as installed: the webhook configurations it creates serve no namespace here (no
  // pod runs its Service); a webhook run as admin labels the pods instead, and fences nobody.
  const installed: Manifest[] = await helmRelease(helmEnv(cp.kubeconfigPath, t), 'install', 'sidecar-terminator', NS, {
    webhook: { namespaceLabels: { 'sidecar-terminator.io/test': 'enabled' } },
  });
  const certDir = await mkdtemp(join(tmpdir(), 'st-fence-certs-'));
  t.teardown(() => rm(certDir, { recursive: true, force: true }));
  const admin = await startServe((port) => [
    '--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, '--no-watcher', '--namespace', 'labeller',
    ...registeringWebhooks(port, 'Fail', 'fence-e2e'),
  ]);
  t.teardown(() => admin.stop());

  const watcherKubeconfig = await serviceAccountKubeconfig(cp, NS, WATCHER, t);
  const webhookKubeconfig = await serviceAccountKubeconfig(cp, NS, WEBHOOK, t);

  interface Outcome {
    code: number;
    stderr: string;
  }

  /** kubectl as the holder of a stolen token would run it. */
  function kubectlAs(kubeconfig: string, args: string[], input?: string): Promise<Outcome> {
    return new Promise((resolveOutcome, reject) => {
      const child = spawn(join(cp.binDir, 'kubectl'), ['--kubeconfig', kubeconfig, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      child.stdout.resume();
      child.stdin.end(input ?? '');
      child.on('error', reject);
      child.on('close', (code) => resolveOutcome({ code: code ?? 1, stderr }));
    });
  }

  /** The Deployment's args without `serve` and the addresses, which the test chooses. */
  const chartArgs = (component: 'webhook' | 'watcher') =>
    argsOf(installed, component)
      .slice(1)
      .filter((arg) => !/^--(listen|probe)-address=/.test(arg));

  /** The watcher Deployment's process, as its ServiceAccount; stopped (and its log shown if `t` failed) at `t`'s end. */
  async function startFencedWatcher(t: Test, killMechanism: 'signal' | 'crr'): Promise<ServeProcess> {
    const watcher = await startWatcherProcess([...chartArgs('watcher'), `--kill-mechanism=${killMechanism}`, `--kubeconfig=${watcherKubeconfig}`], { readyTimeoutMs: 90_000 });
    t.teardown(async () => {
      if (!t.passing()) t.comment(watcher.output().slice(-20_000));
      await watcher.stop();
    });
    await waitFor('the watcher to lead and start', () => watcher.logs().some((line) => line.msg === 'watcher starting'), { timeoutMs: 60_000 });
    return watcher;
  }

  /**
   * A bare pod with a main container and a sidecar marked for the kill, labelled by the webhook;
   * resolves once the sidecar runs and the main container has exited after `mainExitsAfter`.
   */
  async function runningPod(namespace: string, name: string, options: { sidecarEnv?: V1EnvVar[]; mainExitsAfter?: string } = {}): Promise<V1Pod> {
    const { sidecarEnv = [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }], mainExitsAfter = 'never' } = options;
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name, annotations: { [simAnnotations.exitAfter('main')]: mainExitsAfter } },
        spec: {
          restartPolicy: 'Never',
          volumes: [{ name: 'data', emptyDir: {} }],
          containers: [
            { name: 'main', image: 'busybox:1.36', volumeMounts: [{ name: 'data', mountPath: '/data' }] },
            { name: 'proxy', image: 'envoyproxy/envoy:v1.31.0', env: sidecarEnv },
          ],
        },
      },
    });
    return waitFor(`pod ${namespace}/${name} to run`, async () => {
      const pod = await core.readNamespacedPod({ namespace, name });
      const state = (container: string) => pod.status?.containerStatuses?.find((status) => status.name === container)?.state;
      return state('proxy')?.running && (mainExitsAfter === 'never' ? state('main')?.running : state('main')?.terminated) && pod;
    });
  }

  const FENCE = /ValidatingAdmissionPolicy '[^']+' with binding '[^']+' denied request: sidecar-terminator fence: /;

  /** Each attempt must be refused by the fence, with the message of the rule it breaks. */
  async function refused(t: Test, kubeconfig: string, what: string, attempt: string[] | (() => Promise<Outcome>), message: RegExp, input?: string) {
    const outcome = Array.isArray(attempt) ? await kubectlAs(kubeconfig, attempt, input) : await attempt();
    t.not(outcome.code, 0, `${what}: refused`);
    t.match(outcome.stderr, FENCE, `${what}: by the fence`);
    t.match(outcome.stderr, message, `${what}: ${message.source}`);
  }

  /** The kubectl arguments of a JSON patch of a pod in the victims' namespace. */
  const patch = (pod: string, operations: object[]) => ['patch', 'pod', pod, '-n', victims, '--type=json', '-p', JSON.stringify(operations)];

  /**
   * A JSON patch of a pod's status or ephemeral containers, sent as the watcher sends it (kubectl
   * would read the subresource first, which the watcher's RBAC does not allow).
   */
  async function subresourcePatchAs(kubeconfig: string, subresource: 'status' | 'ephemeralcontainers', pod: string, operations: object[]): Promise<Outcome> {
    const config = new KubeConfig();
    config.loadFromFile(kubeconfig);
    const api = config.makeApiClient(CoreV1Api);
    const target = { name: pod, namespace: victims, body: operations };
    const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
    try {
      if (subresource === 'status') await api.patchNamespacedPodStatus(target, jsonPatch);
      else await api.patchNamespacedPodEphemeralcontainers(target, jsonPatch);
      return { code: 0, stderr: '' };
    } catch (error) {
      const body = String((error as { body?: unknown }).body ?? error);
      return { code: 1, stderr: (JSON.parse(body) as { message?: string }).message ?? body };
    }
  }

  /** Its main container runs. */
  const managed = await runningPod(victims, 'managed');
  /** Its main container exited 0: the watcher would now stop its sidecar. */
  const finished = await runningPod(victims, 'finished', { mainExitsAfter: '1s' });
  const unlabelled = await runningPod(victims, 'unlabelled', { mainExitsAfter: '1s' });
  await cp.kubectl(['label', 'pod', 'unlabelled', '-n', victims, `${MANAGED_LABEL}-`]);

  /** The signal container the watcher itself would add to the pod, and variants of it. */
  function signalContainer(pod: V1Pod, changes: Partial<V1EphemeralContainer> = {}): V1EphemeralContainer {
    const user = signalUser(pod, 'proxy');
    if ('refused' in user) throw new Error(user.refused.message);
    const args = stopArguments({ stop: { kind: 'signal' }, gracePeriodSeconds: 30 });
    return { name: 'stop-proxy', image: SIGNAL_IMAGE, command: [...SIGNAL_COMMAND], args, targetContainerName: 'proxy', terminationMessagePolicy: 'FallbackToLogsOnError', securityContext: user.securityContext, ...changes };
  }
  const addEphemeral = (pod: string, container: V1EphemeralContainer) => () =>
    subresourcePatchAs(watcherKubeconfig, 'ephemeralcontainers', pod, [{ op: 'add', path: '/spec/ephemeralContainers', value: [container] }]);
  const patchStatus = (pod: string, operations: object[]) => () => subresourcePatchAs(watcherKubeconfig, 'status', pod, operations);

  t.test('serve --register-webhooks registers the same fence, for the ServiceAccounts it is told', async (t) => {
    // Registered after the server listens: /readyz may answer before.
    await waitFor('the fence to be registered', () => admin.output().includes('admission policies fencing the service accounts registered'));
    const api = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    const desired = desiredFence({
      namespace: 'labeller',
      serviceAccounts: { watcher: SERVE_FLAGS.watcherServiceAccount.default, webhook: SERVE_FLAGS.webhookServiceAccount.default },
      leaseName: SERVE_FLAGS.leaderElectionLease.default,
      signalImage: SERVE_FLAGS.signalImage.default,
      quickExitImage: SERVE_FLAGS.quickExitImage.default,
      tlsSecret: SERVE_FLAGS.tlsSecret.default,
      configurationName: 'fence-e2e',
    });
    for (const { policy, binding } of Object.values(desired)) {
      const stored = await api.readValidatingAdmissionPolicy({ name: policy.metadata!.name! });
      t.same(stored.spec?.validations, policy.spec?.validations, `${policy.metadata!.name}: its rules`);
      t.same(stored.spec?.variables, policy.spec?.variables, `${policy.metadata!.name}: its parameters`);
      t.same(stored.spec?.matchConditions, policy.spec?.matchConditions, `${policy.metadata!.name}: its ServiceAccount`);
      t.same((await api.readValidatingAdmissionPolicyBinding({ name: binding.metadata!.name! })).spec?.validationActions, ['Deny']);
    }
  });

  t.test("the watcher's token: ephemeral containers other than its signal container are refused", async (t) => {
    const shape = /may only add its signal container to a pod labelled sidecar-terminator.io\/managed=true: named stop-<sidecar>, image ghcr.io\/sidecar-terminator\/stop-sidecar:0.1.0, command \/stop-sidecar, arguments --grace-period, --method, --url \(http:\/\/localhost, 127.0.0.1 or \[::1\] only\)/;
    await refused(t, watcherKubeconfig, 'another image', addEphemeral('finished', signalContainer(finished, { image: 'busybox:1.36' })), shape);
    await refused(t, watcherKubeconfig, 'another command', addEphemeral('finished', signalContainer(finished, { command: ['sh', '-c', 'cat /proc/1/environ'] })), shape);
    await refused(t, watcherKubeconfig, 'arguments of another form', addEphemeral('finished', signalContainer(finished, { args: ['--inspect'] })), shape);
    for (const url of ['http://10.0.0.7:15020/quitquitquit', 'http://kubernetes.default.svc:443/', 'https://localhost:15020/', 'http://localhost.evil.example.com:80/', 'http://127.0.0.1:80/ x']) {
      await refused(t, watcherKubeconfig, `a shutdown request to ${url}`, addEphemeral('finished', signalContainer(finished, { args: ['--grace-period=30', '--method=POST', `--url=${url}`] })), shape);
    }
    await refused(t, watcherKubeconfig, 'another method', addEphemeral('finished', signalContainer(finished, { args: ['--grace-period=30', '--method=CONNECT', '--url=http://localhost:1/'] })), shape);
    await refused(t, watcherKubeconfig, "the pod's environment", addEphemeral('finished', signalContainer(finished, { env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } }] })), shape);
    await refused(t, watcherKubeconfig, "a mount of the pod's volumes", addEphemeral('finished', signalContainer(finished, { volumeMounts: [{ name: 'data', mountPath: '/loot' }] })), shape);
    await refused(t, watcherKubeconfig, 'another name', addEphemeral('finished', signalContainer(finished, { name: 'debugger' })), shape);
    await refused(t, watcherKubeconfig, 'a pod without the managed label', addEphemeral('unlabelled', signalContainer(unlabelled)), shape);
    await refused(t, watcherKubeconfig, 'the main container as target', addEphemeral('finished', signalContainer(finished, { targetContainerName: 'main' })), /signal container must target a container marked KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true/);
    const securityContext = (changes: object) => signalContainer(finished, { securityContext: { ...signalContainer(finished).securityContext, ...changes } });
    const user = /signal container runs as the sidecar's runAsUser\/runAsGroup, else as the user the kubelet reports for it, else as root with only CAP_KILL added/;
    await refused(t, watcherKubeconfig, 'an SELinux type of its own', addEphemeral('finished', securityContext({ seLinuxOptions: { type: 'spc_t' } })), user);
    await refused(t, watcherKubeconfig, 'CAP_SYS_ADMIN', addEphemeral('finished', securityContext({ capabilities: { drop: ['ALL'], add: ['KILL', 'SYS_ADMIN'] } })), user);
    await refused(t, watcherKubeconfig, 'privilege escalation', addEphemeral('finished', securityContext({ allowPrivilegeEscalation: true })), user);
    await refused(t, watcherKubeconfig, 'no seccomp profile', addEphemeral('finished', securityContext({ seccompProfile: { type: 'Unconfined' } })), user);
    await refused(t, watcherKubeconfig, 'another user', addEphemeral('finished', securityContext({ runAsUser: 4242 })), user);
    await refused(t, watcherKubeconfig, 'while the main container runs', addEphemeral('managed', signalContainer(managed)), /may add a signal container only once every main container of the pod has exited/);
    for (const name of ['finished', 'managed']) t.notOk((await core.readNamespacedPod({ namespace: victims, name })).spec?.ephemeralContainers, `${name}: nothing was added`);

    const allowed = await runningPod(victims, 'signal-by-hand', { mainExitsAfter: '1s' });
    const http = stopArguments({ stop: { kind: 'http', method: 'POST', url: 'http://[::1]:15020/quitquitquit' }, gracePeriodSeconds: 30, containerId: '0123abcd' });
    const sent = await addEphemeral('signal-by-hand', signalContainer(allowed, { args: http }))();
    t.equal(sent.code, 0, `the signal container the watcher sends, with a loopback shutdown request, is allowed: ${sent.stderr}`);
  });

  t.test("the watcher's token: pod updates other than the quick-exit image and the managed label are refused", async (t) => {
    const spec = /may change the spec of a pod labelled sidecar-terminator.io\/managed=true only to replace a sidecar's image with the first KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE of that container, or a sidecar's with ghcr.io\/sidecar-terminator\/quick-exit:0.1.0 where it sets no command or the pod's phase is terminal/;
    await refused(t, watcherKubeconfig, "a sidecar's image", patch('finished', [{ op: 'replace', path: '/spec/containers/1/image', value: 'evil.example.com/miner:1' }]), spec);
    await refused(t, watcherKubeconfig, "the main container's image", patch('finished', [{ op: 'replace', path: '/spec/containers/0/image', value: 'evil.example.com/miner:1' }]), spec);
    await refused(t, watcherKubeconfig, 'activeDeadlineSeconds', patch('managed', [{ op: 'add', path: '/spec/activeDeadlineSeconds', value: 1 }]), spec);
    await refused(t, watcherKubeconfig, 'a toleration', patch('managed', [{ op: 'add', path: '/spec/tolerations/-', value: { key: 'dedicated', operator: 'Exists' } }]), spec);
    const label = /may change only the sidecar-terminator.io\/managed label of a pod/;
    await refused(t, watcherKubeconfig, 'another label', ['label', 'pod', 'managed', '-n', victims, 'app=evil'], label);
    await refused(t, watcherKubeconfig, 'the managed label changed', ['label', 'pod', 'managed', '-n', victims, `${MANAGED_LABEL}=false`, '--overwrite'], label);
    await refused(t, watcherKubeconfig, 'the managed label removed', ['label', 'pod', 'managed', '-n', victims, `${MANAGED_LABEL}-`], label);
    await refused(t, watcherKubeconfig, 'done (what earlier versions wrote)', ['label', 'pod', 'managed', '-n', victims, `${MANAGED_LABEL}=done`, '--overwrite'], label);
    await core.createNamespacedPod({ namespace: victims, body: { metadata: { name: 'plain' }, spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox:1.36' }] } } });
    await refused(t, watcherKubeconfig, 'managed on a pod without sidecar markers', ['label', 'pod', 'plain', '-n', victims, `${MANAGED_LABEL}=true`], label);
    await refused(t, watcherKubeconfig, 'an annotation', ['annotate', 'pod', 'managed', '-n', victims, 'owner=evil'], /may not change the annotations, owners, finalizers or other metadata of a pod/);
    await refused(t, watcherKubeconfig, 'a finalizer', patch('managed', [{ op: 'add', path: '/metadata/finalizers', value: ['evil.example.com/keep'] }]), /may not change the annotations, owners, finalizers/);
  });

  t.test("the watcher's token: a pod with a quick-exit image may get that image and no other", async (t) => {
    const sidecarEnv = [{ name: ENV_WITH_IMAGE, value: QUICK_EXIT }, { name: ENV_WITH_IMAGE, value: 'evil.example.com/second:1' }];
    const early = await runningPod(victims, 'quick-exit-early', { sidecarEnv });
    t.equal(early.metadata?.labels?.[MANAGED_LABEL], 'true');
    await refused(t, watcherKubeconfig, 'while the main container runs', patch('quick-exit-early', [{ op: 'replace', path: '/spec/containers/1/image', value: QUICK_EXIT }]), /once every main container has exited/);
    await runningPod(victims, 'quick-exit', { sidecarEnv, mainExitsAfter: '1s' });
    await refused(t, watcherKubeconfig, 'the second definition', patch('quick-exit', [{ op: 'replace', path: '/spec/containers/1/image', value: 'evil.example.com/second:1' }]), /only to replace a sidecar's image with the first/);
    const allowed = await kubectlAs(watcherKubeconfig, patch('quick-exit', [{ op: 'replace', path: '/spec/containers/1/image', value: QUICK_EXIT }]));
    t.equal(allowed.code, 0, `the first definition, as OpenKruise reads it, is allowed: ${allowed.stderr}`);
  });

  t.test("the watcher's token: a kill sidecar without command may get --quick-exit-image, once the main containers are done", async (t) => {
    const escalation = (pod: string) => patch(pod, [{ op: 'replace', path: '/spec/containers/1/image', value: SERVE_FLAGS.quickExitImage.default }]);
    await refused(t, watcherKubeconfig, 'while the main container runs', escalation('managed'), /once every main container has exited/);
    await refused(t, watcherKubeconfig, 'on a container that is no sidecar', patch('finished', [{ op: 'replace', path: '/spec/containers/0/image', value: SERVE_FLAGS.quickExitImage.default }]), /or a sidecar's with/);
    const ended = await runningPod(victims, 'ended-from-outside', { mainExitsAfter: '1s' });
    t.equal(ended.metadata?.labels?.[MANAGED_LABEL], 'true');
    const allowed = await kubectlAs(watcherKubeconfig, escalation('ended-from-outside'));
    t.equal(allowed.code, 0, `--quick-exit-image in place of a kill sidecar's image is allowed: ${allowed.stderr}`);
  });

  t.test("the watcher's token: status writes other than the terminal phase and the SidecarTerminated condition are refused", async (t) => {
    const fields = /may change only the phase and the SidecarTerminated condition \(reason SidecarsStopped or QuickExitImageNotPulled\) of a pod's status/;
    await refused(t, watcherKubeconfig, 'Succeeded while the main container runs', patchStatus('managed', [{ op: 'replace', path: '/status/phase', value: 'Succeeded' }]), /may set the phase of a running pod only from its main containers once all have exited/);
    await refused(t, watcherKubeconfig, 'Failed while the main container runs', patchStatus('managed', [{ op: 'replace', path: '/status/phase', value: 'Failed' }]), /only from its main containers/);
    await refused(t, watcherKubeconfig, 'Failed when the main container exited 0', patchStatus('finished', [{ op: 'replace', path: '/status/phase', value: 'Failed' }]), /Succeeded when every one exited 0, else Failed/);
    await refused(t, watcherKubeconfig, 'another condition', patchStatus('managed', [{ op: 'add', path: '/status/conditions/-', value: { type: 'Ready', status: 'False' } }]), fields);
    await refused(t, watcherKubeconfig, 'another reason', patchStatus('managed', [{ op: 'add', path: '/status/conditions/-', value: { type: 'SidecarTerminated', status: 'True', reason: 'Evil' } }]), fields);
    await refused(t, watcherKubeconfig, 'the pod IP', patchStatus('managed', [{ op: 'replace', path: '/status/podIP', value: '10.9.9.9' }, { op: 'replace', path: '/status/podIPs', value: [{ ip: '10.9.9.9' }] }]), fields);
    await refused(t, watcherKubeconfig, 'a container status', patchStatus('managed', [{ op: 'replace', path: '/status/containerStatuses/0/ready', value: false }]), fields);
    const metadata = /may write the status only of a pod labelled sidecar-terminator.io\/managed=true, and no metadata through it but the sidecar-terminator.io\/phase-set annotation, set to the phase it sets/;
    await refused(t, watcherKubeconfig, 'labels through the status', patchStatus('managed', [{ op: 'add', path: '/metadata/labels/app', value: 'evil' }]), metadata);
    const annotations = (added: Record<string, string>) => ({ op: 'add', path: '/metadata/annotations', value: { ...finished.metadata?.annotations, ...added } });
    await refused(t, watcherKubeconfig, 'another annotation through the status', patchStatus('finished', [annotations({ owner: 'evil' })]), metadata);
    await refused(t, watcherKubeconfig, 'the phase-set annotation without the phase', patchStatus('finished', [annotations({ [PHASE_SET_ANNOTATION]: 'Succeeded' })]), metadata);
    await refused(t, watcherKubeconfig, 'the phase-set annotation naming another phase', patchStatus('finished', [{ op: 'replace', path: '/status/phase', value: 'Succeeded' }, annotations({ [PHASE_SET_ANNOTATION]: 'Failed' })]), metadata);
    await refused(t, watcherKubeconfig, 'a pod it does not manage', patchStatus('unlabelled', [{ op: 'add', path: '/status/conditions/-', value: { type: 'SidecarTerminated', status: 'True', reason: 'SidecarsStopped' } }]), /may write the status only of a pod labelled/);
    const allowed = await patchStatus('managed', [{ op: 'add', path: '/status/conditions/-', value: { type: 'SidecarTerminated', status: 'False', reason: 'QuickExitImageNotPulled', message: 'waiting' } }])();
    t.equal(allowed.code, 0, `its own condition is allowed: ${allowed.stderr}`);
    await runningPod(victims, 'phase-set', { mainExitsAfter: '1s' });
    const phaseSet = await patchStatus('phase-set', [{ op: 'replace', path: '/status/phase', value: 'Succeeded' }, { op: 'add', path: `/metadata/annotations/${PHASE_SET_ANNOTATION.replace('/', '~1')}`, value: 'Succeeded' }])();
    t.equal(phaseSet.code, 0, `the phase from the main containers, with the phase-set annotation, is allowed: ${phaseSet.stderr}`);
    // A pod without annotations: the write creates the map.
    await runningPod(victims, 'phase-set-first', { mainExitsAfter: '1s' });
    await core.patchNamespacedPod({ namespace: victims, name: 'phase-set-first', body: [{ op: 'remove', path: '/metadata/annotations' }] }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch));
    const created = await patchStatus('phase-set-first', [{ op: 'replace', path: '/status/phase', value: 'Succeeded' }, { op: 'add', path: '/metadata/annotations', value: { [PHASE_SET_ANNOTATION]: 'Succeeded' } }])();
    t.equal(created.code, 0, `the same on a pod without annotations, the map created: ${created.stderr}`);
    t.same((await core.readNamespacedPod({ namespace: victims, name: 'phase-set-first' })).metadata?.annotations, { [PHASE_SET_ANNOTATION]: 'Succeeded' });
  });

  t.test("the watcher's token: ContainerRecreateRequests other than OpenKruise's for a pod are refused", async (t) => {
    const crr = (changes: { name?: string; owner?: object; spec?: object } = {}) =>
      JSON.stringify({
        apiVersion: 'apps.kruise.io/v1alpha1',
        kind: 'ContainerRecreateRequest',
        metadata: {
          name: changes.name ?? `sidecar-termination-${managed.metadata!.uid}`,
          namespace: victims,
          ownerReferences: [changes.owner ?? { apiVersion: 'v1', kind: 'Pod', name: 'managed', uid: managed.metadata!.uid, controller: true, blockOwnerDeletion: true }],
        },
        spec: changes.spec ?? { podName: 'managed', containers: [{ name: 'proxy' }], strategy: { failurePolicy: 'Ignore', forceRecreate: true } },
      });
    const create = ['create', '-f', '-'];
    const identity = /may create a ContainerRecreateRequest only named sidecar-termination-<pod uid>, owned by that pod alone/;
    await refused(t, watcherKubeconfig, 'another name', create, identity, crr({ name: 'restart-everything' }));
    await refused(t, watcherKubeconfig, 'another owner', create, identity, crr({ owner: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'managed', uid: managed.metadata!.uid, controller: true } }));
    const shape = /may create a ContainerRecreateRequest only with podName, the containers by name, and the strategy failurePolicy Ignore, forceRecreate true/;
    await refused(t, watcherKubeconfig, 'failurePolicy Fail', create, shape, crr({ spec: { podName: 'managed', containers: [{ name: 'proxy' }], strategy: { failurePolicy: 'Fail', forceRecreate: true } } }));
    await refused(t, watcherKubeconfig, 'an activeDeadlineSeconds', create, shape, crr({ spec: { podName: 'managed', containers: [{ name: 'proxy' }], strategy: { failurePolicy: 'Ignore', forceRecreate: true }, activeDeadlineSeconds: 60 } }));
    await refused(t, watcherKubeconfig, 'ordered recreation', create, shape, crr({ spec: { podName: 'managed', containers: [{ name: 'proxy' }], strategy: { failurePolicy: 'Ignore', forceRecreate: true, orderedRecreate: true } } }));
    const list = (await custom.listNamespacedCustomObject({ group: 'apps.kruise.io', version: 'v1alpha1', namespace: victims, plural: 'containerrecreaterequests' })) as { items: unknown[] };
    t.same(list.items, [], 'none was created');
  });

  t.test("the watcher's token: events, Leases and writes it never makes are refused", async (t) => {
    const event = (reason: string, involvedObject: object) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name: 'managed.spoofed', namespace: victims },
        involvedObject,
        reason,
        message: 'spoofed',
        type: 'Normal',
        source: { component: 'sidecar-terminator' },
        reportingComponent: 'sidecar-terminator',
      });
    const pod = { kind: 'Pod', apiVersion: 'v1', namespace: victims, name: 'managed', uid: managed.metadata!.uid };
    const own = /may create only its own events \(component sidecar-terminator\): SidecarTerminator or SidecarTerminationFailed or SidecarExitFailedPod on a pod of the event's namespace, KillMechanismChanged on its Lease/;
    await refused(t, watcherKubeconfig, 'another reason', ['create', '-f', '-'], own, event('Killing', pod));
    await refused(t, watcherKubeconfig, 'an event about a Secret', ['create', '-f', '-'], own, event('SidecarTerminator', { kind: 'Secret', apiVersion: 'v1', namespace: victims, name: 'managed' }));
    await refused(t, watcherKubeconfig, "the Lease's reason on a pod", ['create', '-f', '-'], own, event('KillMechanismChanged', pod));
    const leaseEvent = (name: string, namespace: string) =>
      JSON.stringify({ ...(JSON.parse(event('KillMechanismChanged', { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', namespace, name })) as object), metadata: { name: `${name}.changed`, namespace } });
    await refused(t, watcherKubeconfig, 'an event on another Lease', ['create', '-f', '-'], own, leaseEvent('another', NS));
    await refused(t, watcherKubeconfig, 'an event on a Lease of that name elsewhere', ['create', '-f', '-'], own, leaseEvent('sidecar-terminator-watcher', victims));
    const ownLease = await kubectlAs(watcherKubeconfig, ['create', '-f', '-'], leaseEvent('sidecar-terminator-watcher', NS));
    t.equal(ownLease.code, 0, 'KillMechanismChanged on its own Lease passes', { stderr: ownLease.stderr });
    const lease = JSON.stringify({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'another', namespace: NS }, spec: {} });
    await refused(t, watcherKubeconfig, 'another Lease', ['create', '-f', '-'], /may write only the Lease sidecar-terminator\/sidecar-terminator-watcher/, lease);

    // RBAC widened by mistake: the fence still refuses what the watcher never writes.
    await cp.kubectl(['create', 'role', 'too-broad', '-n', victims, '--verb=create', '--resource=configmaps']);
    await cp.kubectl(['create', 'rolebinding', 'too-broad', '-n', victims, '--role=too-broad', `--serviceaccount=${NS}:${WATCHER}`]);
    await waitFor('the wider RBAC to apply', async () => (await cp.kubectl(['auth', 'can-i', 'create', 'configmaps', '-n', victims, '--as', `system:serviceaccount:${NS}:${WATCHER}`])).stdout.trim() === 'yes');
    await refused(t, watcherKubeconfig, 'a ConfigMap, granted by another Role', ['create', 'configmap', 'x', '-n', victims], /the watcher's ServiceAccount makes no such write/);
  });

  let webhook: ServeProcess | undefined;

  t.test("the webhook's token: its own writes pass (certificate Secret, caBundle, an owner's event)", async (t) => {
    webhook = await startServe([...chartArgs('webhook'), `--kubeconfig=${webhookKubeconfig}`], { readyTimeoutMs: 90_000 });
    t.teardown(() => webhook?.stop());
    const secret = await core.readNamespacedSecret({ namespace: NS, name: 'sidecar-terminator-tls' });
    t.equal(secret.type, 'kubernetes.io/tls', 'the Secret was created');
    const api = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    const configuration = await api.readValidatingWebhookConfiguration({ name: 'sidecar-terminator' });
    t.equal(configuration.webhooks?.[0]?.clientConfig.caBundle, secret.data!['ca.crt'], 'the caBundle was patched');

    // A pod a Job created with a marker error: admitted, and an event on the Job, once read back.
    const job = await cp.kubeConfig.makeApiClient(BatchV1Api).createNamespacedJob({
      namespace: jobs,
      body: { metadata: { name: 'owner' }, spec: { suspend: true, template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox:1.36' }] } } } },
    });
    const review = podReview(
      { containers: [{ name: 'main', image: 'busybox:1.36' }, { name: 'proxy', image: 'envoyproxy/envoy:v1.31.0', env: [{ name: ENV_WHEN_JOB_EXIT, value: 'yes' }] }] },
      { name: 'owned-1', ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'owner', uid: job.metadata!.uid!, controller: true }] },
      { namespace: jobs, username: 'system:serviceaccount:kube-system:job-controller', uid: 'fence-e2e' },
    );
    const answer = await postJson(`${webhook.url}/validate`, review);
    t.match(answer, { response: { allowed: true } }, 'admitted');
    const events = await waitFor('the event on the owner', async () => {
      const list = await core.listNamespacedEvent({ namespace: jobs, fieldSelector: 'involvedObject.name=owner,reason=InvalidSidecarConfiguration' });
      return list.items.length > 0 && list.items;
    });
    t.equal(events[0]!.reason, 'InvalidSidecarConfiguration');
    t.notMatch(webhook.output(), /denied request|forbidden/i, 'no write was refused');
  });

  t.test("the webhook's token: any other Secret, configuration change or event is refused", async (t) => {
    const secret = /may write only the Secret sidecar-terminator\/sidecar-terminator-tls of type kubernetes.io\/tls, not immutable, with the keys ca.crt, ca.key, tls.crt, tls.key and the label app.kubernetes.io\/managed-by=sidecar-terminator alone, and no other field/;
    await refused(t, webhookKubeconfig, 'another Secret', ['create', 'secret', 'generic', 'loot', '-n', NS, '--from-literal=a=b'], secret);
    const stored = await core.readNamespacedSecret({ namespace: NS, name: 'sidecar-terminator-tls' });
    const replaced = (changes: object) => JSON.stringify({ ...stored, ...changes });
    await refused(t, webhookKubeconfig, 'another key in its Secret', ['replace', '-f', '-'], secret, replaced({ data: { ...stored.data, extra: 'eA==' } }));
    await refused(t, webhookKubeconfig, 'an annotation on its Secret', ['replace', '-f', '-'], secret, replaced({ metadata: { ...stored.metadata, annotations: { a: 'b' } } }));
    await refused(t, webhookKubeconfig, 'an owner of its Secret', ['replace', '-f', '-'], secret, replaced({ metadata: { ...stored.metadata, ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'managed', uid: managed.metadata!.uid }] } }));
    // Frozen, no replica could renew it, and the webhook cannot delete it.
    await refused(t, webhookKubeconfig, 'its Secret made immutable', ['replace', '-f', '-'], secret, replaced({ immutable: true }));
    await refused(t, webhookKubeconfig, 'a finalizer on its Secret', ['replace', '-f', '-'], secret, replaced({ metadata: { ...stored.metadata, finalizers: ['example.com/keep'] } }));
    t.notOk((await core.readNamespacedSecret({ namespace: NS, name: 'sidecar-terminator-tls' })).immutable, 'the Secret is not immutable');
    const caBundle = /may change only the caBundle of the webhook configurations sidecar-terminator/;
    const configurationPatch = (operations: object[]) => ['patch', 'validatingwebhookconfiguration', 'sidecar-terminator', '--type=json', '-p', JSON.stringify(operations)];
    await refused(t, webhookKubeconfig, 'the Service path', configurationPatch([{ op: 'replace', path: '/webhooks/0/clientConfig/service/path', value: '/allow-all' }]), caBundle);
    await refused(t, webhookKubeconfig, 'the failure policy', configurationPatch([{ op: 'replace', path: '/webhooks/0/failurePolicy', value: 'Fail' }]), caBundle);
    await refused(t, webhookKubeconfig, 'the namespace selector', configurationPatch([{ op: 'replace', path: '/webhooks/0/namespaceSelector', value: { matchLabels: { none: 'none' } } }]), caBundle);
    await refused(t, webhookKubeconfig, 'a label', ['label', 'mutatingwebhookconfiguration', 'sidecar-terminator', 'a=b'], caBundle);
    const event = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: 'spoofed', namespace: jobs },
      involvedObject: { kind: 'Job', apiVersion: 'batch/v1', namespace: jobs, name: 'owner' },
      reason: 'Completed',
      message: 'spoofed',
      type: 'Normal',
      source: { component: 'sidecar-terminator' },
      reportingComponent: 'sidecar-terminator',
    });
    await refused(t, webhookKubeconfig, 'another event', ['create', '-f', '-'], /may create only its InvalidSidecarConfiguration Warning events/, event);
  });

  t.test('the watcher as its ServiceAccount, fenced: signal, quick-exit image, ignore-exit-code and the sweeper', async (t) => {
    const watcher = await startFencedWatcher(t, 'signal');
    const exitAfter = (container: string) => ({ [simAnnotations.exitAfter(container)]: '2s' });
    const kill = `        - name: main\n          image: busybox:1.36\n        - name: proxy\n          image: envoyproxy/envoy:v1.31.0\n          env:\n            - name: ${ENV_WHEN_JOB_EXIT}\n              value: "true"`;
    await apply(cp, jobs, jobYaml('signal', { annotations: exitAfter('main'), containers: kill }));
    await apply(cp, jobs, jobYaml('signal-as-user', { annotations: exitAfter('main'), containers: `${kill}\n          securityContext:\n            runAsUser: 1234\n            runAsGroup: 1234` }));
    await apply(cp, jobs, jobYaml('ignore-exit-code', {
      annotations: { ...exitAfter('main'), [simAnnotations.onSigterm('proxy')]: 'exit143' },
      containers: `${kill}\n            - name: ${ENV_IGNORE_EXIT_CODE}\n              value: "true"`,
    }));
    await apply(cp, jobs, jobYaml('quick-exit', {
      annotations: exitAfter('main'),
      spec: '\n      nodeSelector:\n        type: virtual-kubelet\n      tolerations:\n        - key: virtual-kubelet.io/provider\n          operator: Exists',
      containers: `        - name: main\n          image: busybox:1.36\n        - name: logs\n          image: fluent/fluent-bit:3.1\n          env:\n            - name: ${ENV_WITH_IMAGE}\n              value: ${QUICK_EXIT}`,
    }));

    const done = async (name: string) =>
      waitFor(`the watcher to be finished with pod ${name}`, async () => finishedByWatcher({ core }, [await core.readNamespacedPod({ namespace: jobs, name })]), { timeoutMs: 120_000 });
    /** How each Job's sidecar was stopped: its signal container; ignore-exit-code, the phase set too; on the virtual node, its quick-exit image. */
    const paths: Record<string, Record<string, StopPath | StopPath[]>> = {
      signal: { proxy: 'signal' },
      'signal-as-user': { proxy: 'signal' },
      'ignore-exit-code': { proxy: 'phase' },
      'quick-exit': { logs: 'image' },
    };
    for (const job of ['signal', 'signal-as-user', 'ignore-exit-code', 'quick-exit']) {
      await waitForJob(cluster, jobs, job, 'Complete', 120_000);
      const name = (await podOfJob(cluster, jobs, job)).metadata!.name!;
      await done(name);
      // Written through the fence once the pod has ended: the stop record, in the condition.
      const pod = await waitFor(`the stop record of pod ${name}`, async () => {
        const read = await core.readNamespacedPod({ namespace: jobs, name });
        return readStopRecord(read) && read;
      }, { timeoutMs: 60_000 });
      t.match(pod.status?.conditions?.find((c) => c.type === 'SidecarTerminated'), { status: 'True', reason: 'SidecarsStopped' }, `${job}: the stop record in the condition`);
      t.equal(pod.metadata?.labels?.[MANAGED_LABEL], 'true', `${job}: the label untouched`);
      if (job.startsWith('signal')) t.same(pod.spec?.ephemeralContainers?.map((c) => c.targetContainerName), ['proxy'], `${job}: stopped by its signal container`);
      if (job === 'signal-as-user') t.match(pod.spec?.ephemeralContainers?.[0]?.securityContext, { runAsUser: 1234, runAsGroup: 1234 }, `${job}: as the sidecar's user`);
      if (job === 'ignore-exit-code') {
        t.equal(pod.status?.phase, 'Succeeded', `${job}: the phase from the main container, whatever the sidecar's exit code`);
        t.equal(pod.metadata?.annotations?.[PHASE_SET_ANNOTATION], 'Succeeded', `${job}: the ${PHASE_SET_ANNOTATION} annotation, written with the phase`);
      }
      if (job === 'quick-exit') t.equal(pod.spec?.containers.find((c) => c.name === 'logs')?.image, QUICK_EXIT, `${job}: the quick-exit image, in place`);
      await expectStoppedBy(t, cluster, pod, paths[job]!);
    }
    const missed = await done('missed');
    t.same(missed.spec?.ephemeralContainers?.map((c) => c.targetContainerName), ['proxy'], 'the pod the webhook missed: labelled by the sweeper, then stopped');
    await expectStoppedBy(t, cluster, missed, { proxy: 'signal' });
    t.notMatch(watcher.output(), /denied request|forbidden/i, 'no write was refused');
  });

  t.test('the watcher as its ServiceAccount, fenced: a ContainerRecreateRequest', async (t) => {
    const watcher = await startFencedWatcher(t, 'crr');
    await apply(cp, jobs, jobYaml('crr', {
      annotations: { [simAnnotations.exitAfter('main')]: '2s' },
      containers: `        - name: main\n          image: busybox:1.36\n        - name: proxy\n          image: envoyproxy/envoy:v1.31.0\n          env:\n            - name: ${ENV_WHEN_JOB_EXIT}\n              value: "true"`,
    }));
    await waitForJob(cluster, jobs, 'crr', 'Complete', 120_000);
    const pod = await podOfJob(cluster, jobs, 'crr');
    const crr = (await custom.getNamespacedCustomObject({ group: 'apps.kruise.io', version: 'v1alpha1', namespace: jobs, plural: 'containerrecreaterequests', name: `sidecar-termination-${pod.metadata!.uid}` })) as {
      spec?: { containers?: Array<{ name?: string }> };
    };
    t.same(crr.spec?.containers?.map((container) => container.name), ['proxy'], 'created through the fence, for the sidecar');
    t.notOk(pod.spec?.ephemeralContainers, 'no signal container');
    await expectJobStoppedBy(t, cluster, jobs, 'crr', { proxy: 'crr' });
    t.notMatch(watcher.output(), /denied request|forbidden/i, 'no write was refused');
  });
}
