// validateExits (src/policy/validate-exits.ts) called as validate.ts calls it: a pod spec, the roles
// of its containers, where the spec sits in its object, the Job spec if any, and the report each
// finding goes to (with whether the rule's milder severity applies).
import t from 'tap';
import type { V1Container } from '@kubernetes/client-node';
import { validateExits } from '../../src/policy/validate-exits.ts';
import { POD_ANNOTATIONS, classifyContainers, type Finding, type JobSpecLocation } from '../../src/policy/index.ts';
import { QUICK_EXIT, ignoreExitCodeSidecar, imageSidecar, killSidecar, main, podSpec } from '../support/pods.ts';

type Reported = Omit<Finding, 'severity'> & { milder: boolean };

/** What validateExits reports of these containers, the roles read with `annotations`. */
function exits(containers: V1Container[], options: { restartPolicy?: string; fieldPrefix?: string; job?: JobSpecLocation; annotations?: Record<string, string> } = {}): Reported[] {
  const spec = podSpec(containers, options.restartPolicy ?? 'Never');
  const reported: Reported[] = [];
  validateExits(spec, classifyContainers(spec, options.annotations), options.fieldPrefix ?? 'spec.template.spec', options.job, (finding, milder) => reported.push({ ...finding, milder: milder === true }));
  return reported;
}

/** The one finding reported; anything else (none, or more) matches no finding's pattern. */
const only = (reported: Reported[]) => (reported.length === 1 ? reported[0] : reported);

t.test('a sidecar with its own restartPolicy Always: milder when the kill mechanism stops it, not when only its image does', async (t) => {
  t.match(only(exits([main(), killSidecar('proxy', { restartPolicy: 'Always' })])), { rule: 'sidecar-restart-policy-always', field: 'spec.template.spec.containers[1].restartPolicy', type: 'Unsupported value', value: 'Always', milder: true });
  t.match(only(exits([main(), imageSidecar('logs', QUICK_EXIT, { restartPolicy: 'Always' })])), { rule: 'sidecar-restart-policy-always', milder: false });
  t.same(exits([main(), ignoreExitCodeSidecar('sql', { restartPolicy: 'Always' })]), [], 'its exit code ignored: the phase is set before it is stopped');
});

t.test('the paths follow where the spec sits: containers under it, the annotation in the metadata next to it', async (t) => {
  const named = { name: 'istio-proxy', image: 'istio/proxyv2:1.24' };
  const annotations = { [POD_ANNOTATIONS.sidecars]: 'istio-proxy' };
  t.match(only(exits([main(), named], { restartPolicy: 'OnFailure', annotations })), { rule: 'on-failure-kill-exit-code', field: `spec.template.metadata.annotations[${POD_ANNOTATIONS.sidecars}]` }, 'named by the annotation alone: the annotation is where to look');
  t.match(only(exits([main(), named], { restartPolicy: 'OnFailure', annotations, fieldPrefix: 'spec' })), { field: `metadata.annotations[${POD_ANNOTATIONS.sidecars}]` }, 'a pod');
  t.match(only(exits([main(), killSidecar('proxy')], { restartPolicy: 'OnFailure', fieldPrefix: 'spec.jobTemplate.spec.template.spec' })), { field: 'spec.jobTemplate.spec.template.spec.containers[1].env[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT]' }, 'marked: its marker');
  t.match(only(exits([main('main', 'busybox:1.36', { restartPolicy: 'Always' }), killSidecar()], { fieldPrefix: 'spec' })), { rule: 'main-restarted-after-success', field: 'spec.containers[0].restartPolicy' });
});

t.test('the roles given decide which containers are sidecars', async (t) => {
  const named = { name: 'istio-proxy', image: 'istio/proxyv2:1.24', restartPolicy: 'Always' };
  t.match(only(exits([main(), named], { annotations: { [POD_ANNOTATIONS.sidecars]: 'istio-proxy' } })), { rule: 'sidecar-restart-policy-always', milder: true }, 'a sidecar by the annotation');
  t.match(only(exits([main(), named])), { rule: 'main-restarted-after-success', field: 'spec.template.spec.containers[1].restartPolicy' }, 'unnamed: a main container that Always restarts');
});

t.test("only a sidecar whose exit code counts is judged by the Job's podFailurePolicy, and only with a Job", async (t) => {
  const job: JobSpecLocation = { spec: { podFailurePolicy: { rules: [{ action: 'FailJob', onExitCodes: { operator: 'NotIn', values: [0] } }] } }, fieldPrefix: 'spec.jobTemplate.spec' };
  t.match(only(exits([main(), killSidecar('proxy')], { job })), { rule: 'pod-failure-policy-sidecar-exit-code', field: 'spec.jobTemplate.spec.podFailurePolicy.rules[0].onExitCodes', milder: false });
  t.same(exits([main(), killSidecar('proxy')]), [], 'no Job: nothing judges the pod');
  t.same(exits([main(), imageSidecar('logs'), ignoreExitCodeSidecar('sql')], { job }), [], 'a quick-exit image exits 0; an ignored exit code comes after the phase');
  t.same(exits([main(), killSidecar('proxy')], { job: { spec: 'FailJob', fieldPrefix: 'spec' } }), [], 'a Job spec that is not an object');
});
