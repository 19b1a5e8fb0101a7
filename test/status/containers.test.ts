// Each container as src/status/containers.ts tells it, called directly: what stops a sidecar
// (stopMeansOf, from its route and the objects on the pod), its story and status line, the
// trigger rule, and the main containers with a restartPolicy of their own.
import type { CoreV1Event, V1Container, V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { CRR, classifyContainers, type ContainerRole } from '../../src/policy/index.ts';
import { containerStatus, containerStory, ownRestartPolicies, stopMeansOf, triggerRule } from '../../src/status/containers.ts';
import { containerStatus as kubeletStatus, imageSidecar, jobPod, killSidecar, main, type State } from '../support/pods.ts';

const roleOf = (pod: V1Pod, name: string): ContainerRole => classifyContainers(pod.spec!).find((role) => role.name === name)!;
const both = killSidecar('both', { env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: 'quick:1' }] });
const stopRequested = (relatedKind: string): CoreV1Event => ({ metadata: {}, involvedObject: {}, action: 'stop-requested', related: { kind: relatedKind, name: 'x' } });

t.test('stopMeansOf: the route on the node, kill or image; nothing for a kill sidecar on a virtual node', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy'), imageSidecar('logs'), both], {});
  const means = (name: string, kind: 'normal' | 'virtual' | 'unknown') => stopMeansOf(roleOf(pod, name), kind, pod, [], undefined);
  t.equal(means('proxy', 'normal'), 'kill');
  t.equal(means('proxy', 'unknown'), 'kill', 'an unknown node is taken for a normal one');
  t.equal(means('proxy', 'virtual'), 'none');
  t.equal(means('logs', 'normal'), 'image');
  t.equal(means('logs', 'virtual'), 'image');
  t.equal(means('both', 'normal'), 'kill', "on a normal node the kill marker wins, as in Kruise");
  t.equal(means('both', 'virtual'), 'image');
});

t.test("stopMeansOf: a kill sidecar's mechanism as the objects show it", async (t) => {
  const pod = jobPod([main(), killSidecar('proxy'), killSidecar('other')], {});
  const proxy = roleOf(pod, 'proxy');
  t.equal(stopMeansOf(proxy, 'normal', pod, [], { name: 'crr', containers: ['proxy'] }), 'crr', 'named by the ContainerRecreateRequest');
  t.equal(stopMeansOf(proxy, 'normal', pod, [], { name: 'crr', containers: ['other'] }), 'kill', 'a request for another sidecar');
  t.equal(stopMeansOf(proxy, 'normal', pod, [stopRequested(CRR.kind)], undefined), 'crr', 'the request out of sight, its event naming it');
  t.equal(stopMeansOf(proxy, 'normal', pod, [stopRequested('Pod')], undefined), 'kill', 'an event about something else');
  pod.spec!.ephemeralContainers = [{ name: 'stop-proxy', image: 'stop', targetContainerName: 'proxy' }];
  t.equal(stopMeansOf(proxy, 'normal', pod, [], undefined), 'signal', 'an ephemeral container aimed at it');
  t.equal(stopMeansOf(roleOf(pod, 'other'), 'normal', pod, [], undefined), 'kill', 'aimed at another sidecar');
});

t.test('containerStory: its role, its marker lines with valueFrom hidden, and the mechanism only when given', async (t) => {
  const fromField = killSidecar('proxy', { env: [{ name: 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }, { name: 'OTHER', value: 'x' }] });
  const pod = jobPod([main(), fromField], { proxy: 'running' });
  t.same(containerStory(roleOf(pod, 'proxy'), pod, 'kill'), {
    name: 'proxy',
    role: 'sidecar',
    markers: ['KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true"', 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=(valueFrom)'],
    status: 'running since 2026-01-01T00:00:00Z',
    mechanism: 'kill',
  });
  t.same(containerStory(roleOf(pod, 'main'), pod, undefined), { name: 'main', role: 'main', markers: [], status: 'not started' });
});

t.test("containerStatus: the kubelet's state in a line, with its restarts", async (t) => {
  const status = (state: State, extra: Parameters<typeof kubeletStatus>[2] = {}) => {
    const pod = jobPod([main()], {});
    pod.status!.containerStatuses = [kubeletStatus('main', state, extra)];
    return containerStatus(pod, 'main');
  };
  t.equal(status('running'), 'running since 2026-01-01T00:00:00Z');
  t.equal(status('running', { restartCount: 2 }), 'running since 2026-01-01T00:00:00Z, 2 restarts');
  t.equal(status(0, { restartCount: 1 }), 'exited 0 at 2026-01-01T00:01:00Z, 1 restart');
  t.equal(status(137, { state: { terminated: { exitCode: 137, reason: 'OOMKilled', finishedAt: new Date('2026-01-01T00:01:00Z') } } }), 'exited 137 (OOMKilled) at 2026-01-01T00:01:00Z');
  t.equal(status(0, { state: { terminated: { exitCode: 0, reason: 'Completed', finishedAt: new Date('2026-01-01T00:01:00Z') } } }), 'exited 0 at 2026-01-01T00:01:00Z', 'Completed goes without saying');
  t.equal(status({ waiting: 'ErrImagePull', message: 'not found' }), 'waiting (ErrImagePull: not found)');
  t.equal(status('running', { state: {} }), 'waiting (unknown)', 'a state without any of the three');
  t.equal(containerStatus(jobPod([main()], {}), 'main'), 'not started', 'no status yet');
});

t.test("triggerRule: the pod's restartPolicy, and the main containers that decide for themselves", async (t) => {
  t.match(triggerRule('Never', []), /^restartPolicy Never: the sidecars are stopped once every main container has exited, whatever its exit code$/);
  t.match(triggerRule('OnFailure', []), /^restartPolicy OnFailure: .*exited 0/);
  t.equal(triggerRule('Always', ['a']), 'restartPolicy Always: no trigger applies (only Never and OnFailure pods have their sidecars stopped)');
  t.match(triggerRule('Never', ['a']), /; a sets its own restartPolicy, which decides instead, with its restartPolicyRules, whether the kubelet restarts it: /);
  t.match(triggerRule('OnFailure', ['a', 'b']), /; a, b set their own restartPolicy, which decides instead, with their restartPolicyRules, whether the kubelet restarts them: /);
});

t.test('ownRestartPolicies: the main containers that set a restartPolicy, never a sidecar', async (t) => {
  const own = (container: V1Container): V1Container => ({ ...container, restartPolicy: 'Never' });
  const pod = jobPod([own(main('a')), main('b'), own(killSidecar('proxy'))], {});
  t.same(ownRestartPolicies(pod.spec!, classifyContainers(pod.spec!)), ['a']);
});
