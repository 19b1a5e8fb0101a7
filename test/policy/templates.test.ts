import t from 'tap';
import { podSpecOf } from '../../src/policy/index.ts';

const spec = { containers: [] };

t.test('pod specs are found in every supported kind', async (t) => {
  t.match(podSpecOf({ apiVersion: 'v1', kind: 'Pod', spec }), { spec, fieldPrefix: 'spec', strictRestartPolicy: false });
  t.match(podSpecOf({ apiVersion: 'v1', kind: 'Pod', metadata: { annotations: { 'sidecar-terminator.io/validation': 'strict' } }, spec }), { strictRestartPolicy: true }, 'a pod asks for strict validation');
  t.match(podSpecOf({ apiVersion: 'batch/v1', kind: 'Job', spec: { template: { spec } } }), { spec, fieldPrefix: 'spec.template.spec', strictRestartPolicy: true });
  t.match(podSpecOf({ apiVersion: 'batch/v1', kind: 'CronJob', spec: { jobTemplate: { spec: { template: { spec } } } } }), { spec, fieldPrefix: 'spec.jobTemplate.spec.template.spec', strictRestartPolicy: true });
  t.match(podSpecOf({ apiVersion: 'apps/v1', kind: 'Deployment', spec: { template: { spec } } }), { spec, strictRestartPolicy: false });
  t.match(podSpecOf({ apiVersion: 'v1', kind: 'PodTemplate', template: { spec } }), { spec, fieldPrefix: 'template.spec' });
  t.equal(podSpecOf({ apiVersion: 'v1', kind: 'ConfigMap', data: {} }), undefined);
  t.match(podSpecOf({ apiVersion: 'apps/v1', kind: 'StatefulSet', spec: { template: { spec } } }), { advisory: true }, 'workloads are never denied');
  t.match(podSpecOf({ apiVersion: 'batch/v1', kind: 'Job', spec: { template: { spec } } }), { advisory: false });
  t.equal(podSpecOf({ apiVersion: 'batch/v1beta1', kind: 'CronJob' }), undefined, 'only batch/v1');
  t.equal(podSpecOf('text'), undefined);
  t.match(podSpecOf({ apiVersion: 'batch/v1', kind: 'Job' }), { spec: undefined }, 'missing template');
});
