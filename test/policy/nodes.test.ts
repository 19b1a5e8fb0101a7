// Virtual-kubelet nodes (src/policy/nodes.ts): which nodes are virtual, by label or taint, and by
// which field a pod spec asks for them.
import t from 'tap';
import { nodeKindOf, targetsVirtualNodes, virtualNodeField, type PodSpec } from '../../src/policy/index.ts';
import { normalNode, onVirtualNode, virtualNode, virtualNodeByTaint } from '../support/pods.ts';

t.test('nodeKindOf: virtual by the label type=virtual-kubelet or a virtual-kubelet.io/provider taint, normal otherwise', async (t) => {
  t.equal(nodeKindOf(virtualNode), 'virtual');
  t.equal(nodeKindOf(virtualNodeByTaint), 'virtual');
  t.equal(nodeKindOf(normalNode), 'normal');
  t.equal(nodeKindOf({ metadata: { labels: { type: 'gpu' } }, spec: { taints: [{ key: 'dedicated', value: 'virtual-kubelet.io/provider' }] } }), 'normal', 'another label value, the key in a taint value');
  t.equal(nodeKindOf({ metadata: { labels: { 'virtual-kubelet': 'type' } } }), 'normal', 'key and value swapped');
  t.equal(nodeKindOf(undefined), 'normal', 'no node (not scheduled yet): a normal one');
});

t.test('nodeKindOf: labels and taints of the wrong shape count for nothing', async (t) => {
  t.equal(nodeKindOf({ metadata: { labels: ['type', 'virtual-kubelet'] }, spec: { taints: 'virtual-kubelet.io/provider' } }), 'normal');
  t.equal(nodeKindOf({ metadata: null, spec: { taints: [null, 'virtual-kubelet.io/provider', { key: 'virtual-kubelet.io/provider' }] } }), 'virtual', 'a well-formed taint among others');
});

t.test('virtualNodeField: the node selector before the tolerations before the affinity', async (t) => {
  const affinity = { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'type', operator: 'In', values: ['gpu', 'virtual-kubelet'] }] }] } } };
  t.equal(virtualNodeField({ ...onVirtualNode, affinity }), 'nodeSelector');
  t.equal(virtualNodeField({ tolerations: onVirtualNode.tolerations, affinity }), 'tolerations');
  t.equal(virtualNodeField({ affinity }), 'affinity', 'required affinity, the value among others');
});

t.test('virtualNodeField: only an In expression on the type label asks for virtual nodes', async (t) => {
  const expression = (operator: string, key = 'type', values: unknown = ['virtual-kubelet']) => ({
    affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key, operator, values }] }] } } },
  });
  t.equal(virtualNodeField(expression('NotIn')), undefined, 'NotIn keeps the pod away');
  t.equal(virtualNodeField(expression('Exists')), undefined);
  t.equal(virtualNodeField(expression('In', 'kubernetes.io/role')), undefined, 'another label');
  t.equal(virtualNodeField(expression('In', 'type', 'virtual-kubelet')), undefined, 'values that are not a list');
  t.equal(virtualNodeField({ tolerations: [{ key: 'virtual-kubelet.io/other', operator: 'Exists' }] }), undefined, 'a toleration of another taint');
  t.equal(virtualNodeField({ nodeSelector: { type: 'virtual' } }), undefined);
});

t.test('targetsVirtualNodes: whether any field asks for them', async (t) => {
  t.equal(targetsVirtualNodes(onVirtualNode as PodSpec), true);
  t.equal(targetsVirtualNodes({ nodeSelector: { 'kubernetes.io/os': 'linux' } }), false);
  t.equal(targetsVirtualNodes({}), false);
});
