// What the cluster offers for a kill, followed while the watcher runs (src/watcher/kill-mechanism-follower.ts):
// which nodes a kruise-daemon serves, said once and then only when it changes.
import t from 'tap';
import type { ClusterKillMechanism } from '../../src/policy/index.ts';
import { KillMechanismFollower } from '../../src/watcher/kill-mechanism-follower.ts';
import { capturingLogger } from '../support/logger.ts';

/** A follower whose cluster answers `answers` in turn (the last one repeats), checked every few ms. */
async function follow(answers: Array<ClusterKillMechanism | Error>, checks: number) {
  const { logger, lines } = capturingLogger();
  const changes: string[] = [];
  let asked = 0;
  const follower = new KillMechanismFollower({
    kubeConfig: undefined as never,
    option: 'auto',
    kruiseNamespace: 'kruise-system',
    intervalMs: 1,
    logger,
    resolve: async (_source, errors) => {
      const answer = answers[Math.min(asked++, answers.length - 1)]!;
      if (answer instanceof Error) {
        if (errors === 'unknown') return { mechanism: 'crr', crrVersion: 'v1beta1', daemons: { unknown: `listing them failed: ${answer.message}` } };
        throw answer;
      }
      return answer;
    },
    onChange: (previous, next) => changes.push(`${previous.mechanism} -> ${next.mechanism}`),
  });
  await follower.start();
  while (asked <= checks) await new Promise((resolve) => setTimeout(resolve, 2));
  follower.stop();
  const said = lines.filter((line) => line.level !== 'debug').map((line) => `${line.level}: ${line.message.split(':')[0]} ${JSON.stringify(line.fields)}`);
  return { follower, said, changes };
}

const served = (...nodes: string[]): ClusterKillMechanism => ({ mechanism: 'crr', crrVersion: 'v1beta1', daemons: { nodes: new Set(nodes) } });

t.test('the follower says which nodes a daemon serves once, then only what changed; none is a warning; a failed read keeps what it knew', async (t) => {
  const { follower, said, changes } = await follow([served('a', 'b'), served('b', 'a'), new Error('etcd slow'), served('a'), served(), served(), served('c')], 7);
  t.same(changes, [], 'the mechanism stayed crr throughout');
  t.same(said, [
    'info: nodes a kruise-daemon serves {"kruiseNamespace":"kruise-system","daemonNodes":2,"nodes":["a","b"]}',
    'info: nodes a kruise-daemon serves {"kruiseNamespace":"kruise-system","daemonNodes":1,"added":[],"removed":["b"]}',
    'warn: no ready kruise-daemon pod (control-plane=daemon) in namespace kruise-system {"kruiseNamespace":"kruise-system"}',
    'info: nodes a kruise-daemon serves {"kruiseNamespace":"kruise-system","daemonNodes":1,"added":["c"],"removed":[]}',
  ], 'the same set in another order is no change; a failed read says nothing and keeps the set; an empty set warns once');
  t.same(follower.current, served('c'));
});

t.test('a read of the daemons that fails at start does not fail the start: every node gets requests until a read succeeds', async (t) => {
  const { said } = await follow([new Error('connection reset'), served('a')], 1);
  t.same(said, [
    'warn: cannot tell which nodes a kruise-daemon serves (listing them failed {"kruiseNamespace":"kruise-system"}',
    'info: nodes a kruise-daemon serves {"kruiseNamespace":"kruise-system","daemonNodes":1,"nodes":["a"]}',
  ]);
});

t.test('the daemons are said again after the mechanism changed back to crr', async (t) => {
  const { said, changes } = await follow([served('a'), { mechanism: 'signal' }, served('a')], 2);
  t.same(changes, ['crr -> signal', 'signal -> crr']);
  t.equal(said.filter((line) => line.startsWith('info: nodes a kruise-daemon serves')).length, 2);
});
