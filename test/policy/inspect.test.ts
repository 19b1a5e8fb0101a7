// Judging whole objects: who created them (their controller), what admission makes of their
// findings, and which pods the watcher gets.
import t from 'tap';
import { ENV_WITH_IMAGE, controllerOf, enforcedFindings, inspectObject, shouldManageObject } from '../../src/policy/index.ts';
import { killSidecar, main, podSpec } from '../support/pods.ts';

const jobOwner = { apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-29120', uid: '0f7c1a52-5d2e-4c43-9d47-8b1e3b1f2a10', controller: true, blockOwnerDeletion: true };
const pod = (spec: Record<string, unknown>, ownerReferences?: unknown) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', ...(ownerReferences ? { ownerReferences } : {}) }, spec });
/** The sidecar's quick-exit image is its own image: an error, which OpenKruise accepts (and kills the sidecar on a normal node). */
const ownImageSidecar = { ...killSidecar(), env: [...killSidecar().env!, { name: ENV_WITH_IMAGE, value: killSidecar().image }] };

t.test('controllerOf: the ownerReference with controller: true', async (t) => {
  t.same(controllerOf(pod({}, [jobOwner])), { apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-29120', uid: jobOwner.uid });
  const gcOnly = { ...jobOwner, controller: false };
  t.same(controllerOf(pod({}, [gcOnly, { ...jobOwner, kind: 'Workflow', apiVersion: 'argoproj.io/v1alpha1' }]))?.kind, 'Workflow', 'the controller among several owners');
  t.equal(controllerOf(pod({}, [gcOnly])), undefined, 'an owner that is not the controller');
  t.equal(controllerOf(pod({}, [{ ...jobOwner, controller: 'true' }])), undefined, 'controller must be the boolean true');
  t.equal(controllerOf(pod({}, [{ ...jobOwner, uid: undefined }])), undefined, 'an incomplete reference');
  t.equal(controllerOf(pod({}, 'garbage')), undefined, 'malformed ownerReferences');
  t.equal(controllerOf(pod({})), undefined, 'none');
  t.equal(controllerOf(null), undefined);
});

t.test('enforcedFindings: errors of an object a controller created are warnings, whatever the mode', async (t) => {
  const spec = podSpec([main(), ownImageSidecar]);
  const bare = inspectObject(pod(spec), [])!;
  const fromJob = inspectObject(pod(spec, [jobOwner]), [])!;
  t.same(bare.findings, fromJob.findings, 'the same findings, with the severity the rules give them');
  t.match(bare.findings, [{ rule: 'quick-exit-image-own', severity: 'error' }]);
  t.match(enforcedFindings(bare, 'deny'), [{ rule: 'quick-exit-image-own', severity: 'error' }], 'a bare pod: denied');
  t.match(enforcedFindings(bare, 'warn'), [{ severity: 'warning' }], 'a bare pod in warn mode: a warning');
  t.match(enforcedFindings(fromJob, 'deny'), [{ rule: 'quick-exit-image-own', severity: 'warning' }], 'from a controller: a warning even in deny mode');
  t.same(fromJob.controller?.kind, 'Job');
  const job = { apiVersion: 'batch/v1', kind: 'Job', metadata: { ownerReferences: [{ ...jobOwner, kind: 'CronJob', name: 'nightly' }] }, spec: { template: { spec } } };
  t.match(enforcedFindings(inspectObject(job, [])!, 'deny'), [{ severity: 'warning' }], "a CronJob's Job: a warning");
});

t.test('shouldManageObject: a pod from a controller is handled as OpenKruise handles it, errors or not', async (t) => {
  const withError = podSpec([main(), ownImageSidecar]);
  t.ok(shouldManageObject(pod(withError, [jobOwner]), []), 'an error, from a Job: managed');
  t.notOk(shouldManageObject(pod(withError), []), 'an error, bare (admitted only in warn mode): not managed');
  t.ok(shouldManageObject(pod(podSpec([main(), killSidecar()])), []), 'valid, bare: managed');
  t.notOk(shouldManageObject(pod(podSpec([main(), ownImageSidecar], 'Always'), [jobOwner]), []), 'restartPolicy Always: never, as in OpenKruise');
  t.notOk(shouldManageObject(pod(podSpec([main(), main('b')]), [jobOwner]), []), 'no sidecar');
  const notTrue = podSpec([main(), { ...killSidecar(), env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'yes' }] }]);
  t.notOk(shouldManageObject(pod(notTrue, [jobOwner]), []), '"yes" is not "true": no sidecar, as in OpenKruise');
  const allowlisted = pod(podSpec([main(), { ...killSidecar(), env: [...killSidecar().env!, { name: ENV_WITH_IMAGE, value: 'busybox:1.36' }] }]), [jobOwner]);
  t.ok(shouldManageObject(allowlisted, ['registry.example.com/*']), 'an image outside the allowlist, from a Job: managed (the watcher refuses the image, the kill still works)');
});
