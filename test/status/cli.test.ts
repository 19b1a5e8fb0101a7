// The status command line: --help lists every flag, short flags as kubectl's, and the errors
// that need no cluster.
import t from 'tap';
import { STATUS_FLAGS } from '../../src/status/flags.ts';
import { runCli } from '../cli/run.ts';

t.test('status --help lists every flag with its help and default', async (t) => {
  const { code, stdout } = await runCli(['status', '--help']);
  t.equal(code, 0);
  for (const spec of Object.values(STATUS_FLAGS)) {
    const form = `${'short' in spec ? `-${spec.short}, ` : ''}--${spec.name}`;
    const block = stdout.split(/\n(?= {2}-)/).find((part) => part.startsWith(`  ${form} `) || part.startsWith(`  ${form}[`));
    t.ok(block, `${form} is listed`);
    t.match(block?.replace(/\s+/g, ' '), spec.help.replace(/\s+/g, ' '), `${form}: its help`);
    t.match(block, /default: /);
  }
  t.match(stdout, /Exit status: 0 nothing is stuck, 1 a pod has waited longer than --fail-after/);
  t.same((await runCli(['help', 'status'])).stdout, stdout, '"help status" is the same');
  t.same((await runCli(['explain', '--help'])).stdout, stdout, 'explain shares it');
  t.match((await runCli(['--help'])).stdout, /sidecar-terminator status \[flags\] \[pod\/NAME\]/);
});

t.test('usage errors before any cluster is asked', async (t) => {
  const env = { KUBECONFIG: '/nonexistent/kubeconfig' };
  const flag = await runCli(['status', '--fail-after', 'soon']);
  t.equal(flag.code, 2);
  t.match(flag.stderr, /--fail-after: expected a duration such as 90s/);
  const output = await runCli(['status', '-o', 'table']);
  t.match(output.stderr, /--output: expected one of text, wide, json, yaml, got "table"/);
  const two = await runCli(['status', 'pod/a', 'pod/b']);
  t.equal(two.code, 2);
  t.match(two.stderr, /status takes at most one pod \(pod\/NAME\), got 2 arguments/);
  const explain = await runCli(['explain']);
  t.match(explain.stderr, /explain needs a pod: sidecar-terminator explain pod\/NAME/);
  const kubeconfig = await runCli(['status'], { env });
  t.equal(kubeconfig.code, 2);
  t.match(kubeconfig.stderr, /cannot load the kubeconfig: .*\/nonexistent\/kubeconfig/);
  const none = await runCli(['status'], { env: { KUBECONFIG: '', HOME: '/nonexistent' } });
  t.equal(none.code, 2);
  t.match(none.stderr, /no kubeconfig: set \$KUBECONFIG, pass --kubeconfig, or create ~\/\.kube\/config/);
});
