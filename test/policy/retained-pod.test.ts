// What the watcher's cache keeps of a pod: every plan made from it is the plan made from the
// whole pod, and what it drops is what makes a Job pod large.
import t from 'tap';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { ENV_WHEN_JOB_EXIT, mainsFinishedAt, planStop, retainedPod, sidecarsPendingSince, type NodeState, type StopSettings } from '../../src/policy/index.ts';
import { QUICK_EXIT, containerStatus, ignoreExitCodeSidecar, imageSidecar, jobPod, killSidecar, main, normalNode, virtualNode } from '../support/pods.ts';

const signal: StopSettings = { killMechanism: 'signal', signal: { image: 'st:1', command: ['/stop-sidecar'] }, quickExitImageAllowlist: [], quickExitImage: 'quick-exit:1' };
const crr: StopSettings = { ...signal, killMechanism: 'crr' };
const allowlisted: StopSettings = { ...signal, quickExitImageAllowlist: ['registry.example.com/other:*'] };
const NOW = Date.parse('2026-01-01T00:02:00Z');

/** What the API server adds to a Job pod and no decision reads: env values, resources, probes, volumes, managedFields. */
function asServed(pod: V1Pod): V1Pod {
  const noisy = (container: V1Container): V1Container => ({
    ...container,
    env: [...Array.from({ length: 20 }, (_, i) => ({ name: `APP_SETTING_${i}`, value: `value-${i}-https://service.internal.example.com:8443/api/v2` })), ...(container.env ?? [])],
    resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '256Mi' } },
    ports: [{ name: 'metrics', containerPort: 15090, protocol: 'TCP' }],
    readinessProbe: { httpGet: { path: '/ready', port: 8080 }, periodSeconds: 10 },
    volumeMounts: [{ name: 'kube-api-access', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true }],
    terminationMessagePath: '/dev/termination-log',
    imagePullPolicy: 'IfNotPresent',
  });
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      generateName: 'job-',
      annotations: { 'prometheus.io/scrape': 'true' },
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'job', uid: 'job-uid', controller: true, blockOwnerDeletion: true }],
      managedFields: [{ manager: 'kube-controller-manager', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': { 'f:containers': {} } } }],
    },
    spec: {
      ...pod.spec!,
      containers: pod.spec!.containers.map(noisy),
      volumes: [{ name: 'kube-api-access', projected: { sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 3607 } }] } }],
      tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
      serviceAccountName: 'default',
      dnsPolicy: 'ClusterFirst',
      schedulerName: 'default-scheduler',
    },
    status: {
      ...pod.status,
      hostIP: '10.0.0.7',
      podIP: '10.244.1.9',
      qosClass: 'Burstable',
      conditions: [...(pod.status?.conditions ?? []), { type: 'Ready', status: 'False', lastTransitionTime: new Date('2026-01-01T00:01:00Z') }],
      containerStatuses: pod.status?.containerStatuses?.map((s) => ({ ...s, image: 'docker.io/library/busybox:1.36', imageID: 'docker.io/library/busybox@sha256:abc', containerID: 'containerd://0123', started: false })),
    },
  };
}

const signalled = (state: Parameters<typeof containerStatus>[1]) => {
  const pod = jobPod([main(), killSidecar('proxy', { securityContext: { runAsUser: 1000, runAsGroup: 1000 } })], { main: 0, proxy: 'running' }, { spec: { terminationGracePeriodSeconds: 30, ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] } });
  pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', state)];
  return pod;
};

const cases: Array<[string, V1Pod, NodeState, StopSettings]> = [
  ['main at work', jobPod([main(), killSidecar()], { main: 'running', proxy: 'running' }), normalNode, crr],
  ['crr, two sidecars', jobPod([main(), killSidecar('proxy'), killSidecar('sql')], { main: 0, proxy: 'running', sql: 'running' }), normalNode, crr],
  ['signal, the sidecar user from its securityContext', jobPod([main(), killSidecar('proxy', { securityContext: { runAsUser: 1000 } })], { main: 0, proxy: 'running' }), normalNode, signal],
  ['signal, the user reported in the status', (() => {
    const pod = jobPod([main(), killSidecar()], { main: 0, proxy: 'running' });
    pod.status!.containerStatuses![1]!.user = { linux: { uid: 65532, gid: 65532 } };
    return pod;
  })(), normalNode, signal],
  ['signal refused under runAsNonRoot', jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }, { spec: { securityContext: { runAsNonRoot: true } } }), normalNode, signal],
  ['signal refused with shareProcessNamespace', jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }, { spec: { shareProcessNamespace: true } }), normalNode, signal],
  ['a container named like a signal container', jobPod([main(), killSidecar('proxy'), killSidecar('stop-proxy')], { main: 0, proxy: 'running', 'stop-proxy': 'running' }, { spec: { initContainers: [{ name: 'stop-proxy-2', image: 'busybox:1.36' }] } }), normalNode, signal],
  ['signal sent, running', signalled('running'), normalNode, signal],
  ['signal sent, exited 0 a minute ago', signalled(0), normalNode, signal],
  ['signal container failed', signalled(1), normalNode, signal],
  ['signal container cannot start', signalled({ waiting: 'ImagePullBackOff', message: 'Back-off' }), normalNode, signal],
  ['quick-exit image on a virtual node', jobPod([main(), imageSidecar()], { main: 0, logs: 'running' }), virtualNode, signal],
  ['quick-exit image outside the allowlist', jobPod([main(), imageSidecar()], { main: 0, logs: 'running' }), normalNode, allowlisted],
  ['quick-exit image that cannot be pulled', jobPod([main(), { ...imageSidecar(), image: QUICK_EXIT }, killSidecar()], { main: 0, logs: { waiting: 'ErrImagePull', message: 'not found' }, proxy: 0 }, { spec: { restartPolicy: 'OnFailure' } }), normalNode, signal],
  ['ignore exit code', jobPod([main(), ignoreExitCodeSidecar()], { main: 1, sql: 'running' }), normalNode, crr],
  ['a virtual node without quick-exit image', jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }), virtualNode, signal],
  ['a missing node', jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }), 'missing', crr],
  ['duplicate markers', jobPod([main(), { ...killSidecar('proxy'), env: [{ name: ENV_WHEN_JOB_EXIT, value: 'false' }, { name: ENV_WHEN_JOB_EXIT, value: 'TRUE' }] }], { main: 0, proxy: 'running' }), normalNode, crr],
  ['every sidecar stopped', jobPod([main(), killSidecar()], { main: 0, proxy: 143 }), normalNode, signal],
  ['a main its restart rule restarts (Kubernetes 1.35+)', jobPod([main('main', 'busybox:1.36', { restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] }), killSidecar()], { main: 42, proxy: 'running' }), normalNode, signal],
  ["a main its own restartPolicy restarts", jobPod([main('main', 'busybox:1.36', { restartPolicy: 'OnFailure' }), ignoreExitCodeSidecar()], { main: 1, sql: 'running' }), normalNode, crr],
  ['a sidecar its own restartPolicy brings back', jobPod([main(), killSidecar('proxy', { restartPolicy: 'Always' })], { main: 0, proxy: 143 }), normalNode, signal],
  ['being deleted', (() => {
    const pod = jobPod([main(), killSidecar()], { main: 0, proxy: 'running' });
    pod.metadata!.deletionTimestamp = new Date('2026-01-01T00:01:30Z');
    return pod;
  })(), normalNode, crr],
];

t.test('the plan from what the cache keeps is the plan from the whole pod', async (t) => {
  for (const [name, pod, node, settings] of cases) {
    const served = asServed(pod);
    const retained = retainedPod(served);
    t.same(planStop(retained, node, settings, NOW), planStop(served, node, settings, NOW), name);
    t.equal(sidecarsPendingSince(retained), sidecarsPendingSince(served), `${name}: pending since`);
    t.equal(mainsFinishedAt(retained), mainsFinishedAt(served), `${name}: mains finished at`);
  }
});

t.test('what the writes address by position stays complete and in order', async (t) => {
  const served = asServed(jobPod([main(), killSidecar('proxy'), imageSidecar('logs')], { main: 0, proxy: 'running', logs: 'running' }));
  const retained = retainedPod(served);
  t.same(retained.spec?.containers.map((c) => c.name), ['main', 'proxy', 'logs'], 'every container');
  t.same(retained.status?.conditions, served.status?.conditions, 'every condition');
  t.same(retained.metadata, { name: 'job-abc', namespace: 'default', uid: 'uid-1', resourceVersion: '100', labels: served.metadata?.labels, annotations: {} }, 'identity and version, the labels; that it has annotations (a write adds to them)');
  t.same(retained.spec?.containers[1]?.env, [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }], 'the sidecar markers alone of the env');
  t.notOk(retained.spec?.containers[0]?.env, 'no env where there is no marker');
  const size = (pod: V1Pod) => JSON.stringify(pod).length;
  t.ok(size(retained) * 4 < size(served), `a fraction of the pod is kept (${size(retained)} of ${size(served)} bytes of JSON)`);
});

t.test('a pod without metadata, spec or status keeps nothing; a spec without containers keeps an empty list, a container without env none', async (t) => {
  t.same(retainedPod({}), {});
  t.same(retainedPod({ spec: {} as V1Pod['spec'] }), { spec: { containers: [] } });
  t.same(retainedPod({ status: {} }), { status: {} });
  t.same(retainedPod({ spec: { containers: [{ name: 'main', image: 'busybox:1.36' }] } }), { spec: { containers: [{ name: 'main', image: 'busybox:1.36' }] } }, 'a container without env');
});

t.test("the pod's sidecar annotations, a container's command and ID are kept; other annotations are not", async (t) => {
  const pod: V1Pod = {
    metadata: {
      name: 'p',
      annotations: {
        'sidecar-terminator.io/sidecars': 'istio-proxy',
        'sidecar-terminator.io/ignore-exit-code': 'istio-proxy',
        'stop.sidecar-terminator.io/istio-proxy': 'istio-proxy',
        'grace-period-seconds.sidecar-terminator.io/istio-proxy': '5',
        'kubectl.kubernetes.io/last-applied-configuration': '{"a": "large document"}',
      },
    },
    spec: { containers: [{ name: 'main', image: 'app:1', command: ['sh', '-c', 'a long script'] }, { name: 'istio-proxy', image: 'istio/proxyv2:1.24' }] },
    status: { containerStatuses: [{ name: 'istio-proxy', containerID: 'containerd://abc', image: '', imageID: '', ready: true, restartCount: 0 }] },
  };
  const retained = retainedPod(pod);
  t.same(Object.keys(retained.metadata?.annotations ?? {}), ['sidecar-terminator.io/sidecars', 'sidecar-terminator.io/ignore-exit-code', 'stop.sidecar-terminator.io/istio-proxy', 'grace-period-seconds.sidecar-terminator.io/istio-proxy']);
  t.same(retained.spec?.containers.map((c) => c.command), [[], undefined], 'whether it sets a command, not the command');
  t.equal(retained.status?.containerStatuses?.[0]?.containerID, 'containerd://abc');
  t.same(retainedPod({ metadata: { name: 'q', annotations: { other: 'x' } } }).metadata?.annotations, {}, 'no annotation of its own: none kept, the map kept empty (a write adds to it)');
  t.same(retainedPod({ metadata: { name: 'r' } }).metadata, { name: 'r' }, 'no annotations at all');
});
