// The signal container's name (never one a container of the pod has, the same on every
// reconcile, and recognised when an earlier version sent it) and its user (one that may signal
// the sidecar, or a refusal that names the field to set).
import t from 'tap';
import { existingSignalContainer, signalContainerName, signalUser, signalUserNote } from '../../src/policy/index.ts';
import { containerStatus, jobPod, killSidecar, main } from '../support/pods.ts';

t.test('the name: stop-<sidecar>, unless a container of the pod has it', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy'), killSidecar('stop-proxy')], {});
  t.equal(signalContainerName(pod, 'proxy'), 'stop-proxy-2', 'the container stop-proxy has the first name');
  t.equal(signalContainerName(pod, 'stop-proxy'), 'stop-stop-proxy');
  t.equal(signalContainerName(jobPod([main(), killSidecar('proxy')], {}), 'proxy'), 'stop-proxy');

  const crowded = jobPod([main(), killSidecar('proxy')], {}, { spec: {
    initContainers: [{ name: 'stop-proxy', image: 'busybox' }],
    ephemeralContainers: [{ name: 'stop-proxy-2', image: 'busybox' }],
  } });
  t.equal(signalContainerName(crowded, 'proxy'), 'stop-proxy-3', 'init and ephemeral containers count too');
  t.equal(signalContainerName(jobPod([main(), killSidecar('x'), killSidecar('x-2')], {}), 'x-2', new Set(['stop-x-2'])), 'stop-x-2-2', 'nor a name taken by another signal container of the same request');
});

t.test('long names stay valid DNS labels; the first one is the name earlier versions gave', async (t) => {
  const long = 'a'.repeat(63);
  const pod = jobPod([main(), killSidecar(long)], {});
  const first = signalContainerName(pod, long);
  t.equal(first.length, 63);
  t.match(first, /^stop-a{45}-[0-9a-f]{12}$/);
  const taken = jobPod([main(), killSidecar(long)], {}, { spec: { ephemeralContainers: [{ name: first, image: 'x', targetContainerName: 'other' }] } });
  const second = signalContainerName(taken, long);
  t.not(second, first);
  t.ok(second.length <= 63);
});

t.test('a signal container already sent is recognised, by its target and one of its names', async (t) => {
  const sent = (name: string, target: string) => jobPod([main(), killSidecar('proxy')], {}, { spec: { ephemeralContainers: [{ name, image: 'old-image:0.0.9', targetContainerName: target }] } });
  t.equal(existingSignalContainer(sent('stop-proxy', 'proxy'), 'proxy')?.name, 'stop-proxy', 'the name earlier versions used, whatever its image');
  t.equal(existingSignalContainer(sent('stop-proxy-2', 'proxy'), 'proxy')?.name, 'stop-proxy-2');
  t.equal(existingSignalContainer(sent('debugger', 'proxy'), 'proxy'), undefined, 'kubectl debug --target is not ours');
  t.equal(existingSignalContainer(sent('stop-proxy', 'main'), 'proxy'), undefined, 'another target is not ours');
});

t.test('its user: the sidecar runAsUser, then the pod, then what the kubelet reports, then root with CAP_KILL', async (t) => {
  const hardened = { allowPrivilegeEscalation: false, seccompProfile: { type: 'RuntimeDefault' } };
  const own = jobPod([main(), killSidecar('proxy', { securityContext: { runAsUser: 1337, runAsGroup: 1338 } })], {}, { spec: { securityContext: { runAsUser: 1000 } } });
  t.same(signalUser(own, 'proxy'), { basis: 'spec', securityContext: { runAsUser: 1337, runAsGroup: 1338, capabilities: { drop: ['ALL'] }, ...hardened } });

  const podLevel = jobPod([main(), killSidecar('proxy')], {}, { spec: { securityContext: { runAsUser: 1000, runAsGroup: 3000 } } });
  t.same(signalUser(podLevel, 'proxy'), { basis: 'spec', securityContext: { runAsUser: 1000, runAsGroup: 3000, capabilities: { drop: ['ALL'] }, ...hardened } });

  const reported = jobPod([main(), killSidecar('proxy')], {});
  reported.status!.containerStatuses = [containerStatus('proxy', 'running', { user: { linux: { uid: 101, gid: 102, supplementalGroups: [102] } } })];
  t.same(signalUser(reported, 'proxy'), { basis: 'status', securityContext: { runAsUser: 101, runAsGroup: 102, capabilities: { drop: ['ALL'] }, ...hardened } });

  const unknown = jobPod([main(), killSidecar('proxy')], { proxy: 'running' });
  t.same(signalUser(unknown, 'proxy'), { basis: 'root', securityContext: { runAsUser: 0, capabilities: { drop: ['ALL'], add: ['KILL'] }, ...hardened } }, 'root with CAP_KILL alone can signal any user');
});

t.test('unknown user under runAsNonRoot: no container, a refusal naming the field and the fix', async (t) => {
  for (const [label, pod] of [
    ['on the sidecar', jobPod([main(), killSidecar('proxy', { securityContext: { runAsNonRoot: true } })], { proxy: 'running' })],
    ['on the pod', jobPod([main(), killSidecar('proxy')], { proxy: 'running' }, { spec: { securityContext: { runAsNonRoot: true } } })],
  ] as const) {
    const user = signalUser(pod, 'proxy');
    t.ok('refused' in user, label);
    if (!('refused' in user)) continue;
    t.equal(user.refused.field, 'spec.containers[1].securityContext.runAsUser', `${label}: the field`);
    t.match(user.refused.message, /set spec\.containers\[1\]\.securityContext\.runAsUser to the uid the sidecar runs as/, `${label}: the fix`);
  }
  const reported = jobPod([main(), killSidecar('proxy', { securityContext: { runAsNonRoot: true } })], {});
  reported.status!.containerStatuses = [containerStatus('proxy', 'running', { user: { linux: { uid: 65532, gid: 65532 } } })];
  t.match(signalUser(reported, 'proxy'), { basis: 'status', securityContext: { runAsUser: 65532 } }, 'a reported user is enough');
});

t.test('its user: runAsUser alone sets no group; a pod without a spec has no names to avoid', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy', { securityContext: { runAsUser: 1337 } })], {});
  t.same(signalUser(pod, 'proxy'), { basis: 'spec', securityContext: { runAsUser: 1337, capabilities: { drop: ['ALL'] }, allowPrivilegeEscalation: false, seccompProfile: { type: 'RuntimeDefault' } } });
  const bare = { metadata: { name: 'p' } };
  t.equal(signalContainerName(bare, 'proxy'), 'stop-proxy');
  t.match(signalUser(bare, 'proxy'), { basis: 'root' });
});
t.test('signalUserNote: said where the API server drops the user kubelet reports (before 1.33), nothing from 1.33', async (t) => {
  t.match(signalUserNote({ gitVersion: 'v1.29.15', major: 1, minor: 29 }), /^Kubernetes v1\.29\.15 drops the user a container runs as .* kept from 1\.33.*runAsNonRoot.*--kill-mechanism crr/);
  t.match(signalUserNote({ gitVersion: 'v1.32.0', major: 1, minor: 32 }), /v1\.32\.0 drops/);
  t.equal(signalUserNote({ gitVersion: 'v1.33.4', major: 1, minor: 33 }), undefined);
  t.equal(signalUserNote({ gitVersion: 'v2.0.0', major: 2, minor: 0 }), undefined);
});
