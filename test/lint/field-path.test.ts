// Kubernetes field paths as src/lint/field-path.ts reads and follows them, called directly: the
// steps of a path (keys, positions, names in brackets), the item a name picks, and the container
// a path leads into, in a pod or a template.
import t from 'tap';
import { containerOf, lastIndexNamed, parseFieldPath } from '../../src/lint/field-path.ts';

t.test('parseFieldPath: a bracket holds a position when it is digits, else a name, dots and slashes included', async (t) => {
  t.same(parseFieldPath('metadata.annotations[sidecar-terminator.io/sidecars]'), [{ key: 'metadata' }, { key: 'annotations' }, { name: 'sidecar-terminator.io/sidecars' }]);
  t.same(parseFieldPath('spec.template.spec.initContainers[12]'), [{ key: 'spec' }, { key: 'template' }, { key: 'spec' }, { key: 'initContainers' }, { index: 12 }]);
  t.same(parseFieldPath('env[1a]'), [{ key: 'env' }, { name: '1a' }], 'digits and more: a name');
  t.same(parseFieldPath('env[]'), [{ key: 'env' }, { name: '' }]);
  t.same(parseFieldPath(''), []);
});

t.test('lastIndexNamed: the last item of that name, -1 when none has it', async (t) => {
  const items = [{ name: 'A' }, { name: 'B' }, { name: 'A' }, 'A'];
  const nameOf = (item: unknown) => (typeof item === 'object' && item !== null ? (item as { name?: unknown }).name : undefined);
  t.equal(lastIndexNamed(items, 'A', nameOf), 2, 'the definition that takes effect');
  t.equal(lastIndexNamed(items, 'C', nameOf), -1);
});

t.test('containerOf: the container a path leads into, in any of the three lists, at any depth', async (t) => {
  const pod = {
    spec: {
      initContainers: [{ name: 'setup' }],
      containers: [{ name: 'main', env: [{ name: 'X' }] }, { name: 'proxy' }, { name: 'proxy', image: 'later' }],
      ephemeralContainers: [{ name: 'stop-proxy' }],
      volumes: [{ name: 'data' }],
    },
  };
  const of = (path: string) => containerOf(pod, parseFieldPath(path));
  t.equal(of('spec.containers[0].env[X].value'), 'main');
  t.equal(of('spec.containers[1]'), 'proxy');
  t.equal(of('spec.initContainers[0].restartPolicy'), 'setup');
  t.equal(of('spec.ephemeralContainers[0]'), 'stop-proxy');
  t.equal(of('spec.volumes[0].name'), undefined, 'a named item of another list is no container');
  t.equal(of('spec.containers[7].image'), undefined, 'past the end');
  t.equal(of('spec.restartPolicy'), undefined);
  const job = { spec: { template: { spec: { containers: [{ name: 'work' }] } } } };
  t.equal(containerOf(job, parseFieldPath('spec.template.spec.containers[0].env[A]')), 'work', "a template's container");
});

t.test('containerOf: a container picked by name is the last of that name; one without a name is none', async (t) => {
  const pod = { spec: { containers: [{ name: 'proxy', image: 'a' }, { image: 'nameless' }, { name: 'proxy', image: 'b' }] } };
  t.equal(containerOf(pod, parseFieldPath('spec.containers[proxy].image')), 'proxy');
  t.equal(containerOf(pod, parseFieldPath('spec.containers[1].image')), undefined);
  t.equal(containerOf({ spec: { containers: 'not a list' } }, parseFieldPath('spec.containers[0]')), undefined);
});
