// Which ContainerRecreateRequest version the watcher and `status` use, from what the cluster's
// discovery serves (the requests themselves are in test/e2e/watcher-crr.test.ts).
import t from 'tap';
import { crrVersionsToTry } from '../../src/kube/discovery.ts';

t.test('OpenKruise up to v1.8: v1alpha1 only', async (t) => {
  t.same(crrVersionsToTry(['v1alpha1'], 'v1alpha1'), ['v1alpha1']);
});

t.test('OpenKruise v1.9.0: v1alpha1 and v1beta1, v1beta1 preferred (stored, no conversion)', async (t) => {
  t.same(crrVersionsToTry(['v1beta1', 'v1alpha1'], 'v1beta1'), ['v1beta1', 'v1alpha1']);
});

t.test("the cluster's preferred version first, when spoken", async (t) => {
  t.same(crrVersionsToTry(['v1alpha1', 'v1beta1'], 'v1alpha1'), ['v1alpha1', 'v1beta1']);
});

t.test('a version the add-on does not speak is never tried, even preferred', async (t) => {
  t.same(crrVersionsToTry(['v1', 'v1beta1', 'v1alpha1'], 'v1'), ['v1beta1', 'v1alpha1'], 'a future v1: the newest spoken first');
  t.same(crrVersionsToTry(['v1'], 'v1'), [], 'nothing spoken: no CRR (auto falls back to the signal mechanism)');
  t.same(crrVersionsToTry(['v1beta1', 'v1alpha1'], undefined), ['v1beta1', 'v1alpha1'], 'no preferred version given');
});
