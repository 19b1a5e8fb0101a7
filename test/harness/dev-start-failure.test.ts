// `make dev` when a component cannot start: scripts/dev.ts tries once more on new ports, saying so,
// then ends with one line naming the component, the cause and what to do, and exits 1; the
// component's log stays where that line says. The control plane's binaries here are stand-ins in a
// cache of their own (scripts/build-control-plane.sh finds them there and builds nothing): a
// kube-apiserver that fails as a real one fails when its port is taken, and an etcd that waits.
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t from 'tap';
import { repoRoot } from '../support/repo.ts';

const scratch = mkdtempSync(join(tmpdir(), 'st-dev-failure-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
const versions = { K8S_VERSION: 'v0.0.0-stand-in', ETCD_VERSION: 'v0.0.0-stand-in' };
const bin = join(scratch, `control-plane-${versions.K8S_VERSION}-etcd-${versions.ETCD_VERSION}`, 'bin');
mkdirSync(bin, { recursive: true });
const stand = (name: string, script: string) => {
  writeFileSync(join(bin, name), `#!/bin/sh\n${script}\n`);
  chmodSync(join(bin, name), 0o755);
};
// kube-apiserver's own words (k8s.io/component-base's run.go) for a port another program holds.
stand('kube-apiserver', `port=$(echo "$*" | sed -n 's/.*--secure-port \\([0-9]*\\).*/\\1/p')
echo "E1125 10:00:00.000000    4242 run.go:72] \\"command failed\\" err=\\"failed to create listener: failed to listen on 127.0.0.1:$port: listen tcp 127.0.0.1:$port: bind: address already in use\\""
exit 1`);
stand('etcd', 'exec sleep 600');
for (const name of ['kube-controller-manager', 'kube-scheduler', 'kubectl', 'kubelet', 'kube-proxy']) stand(name, 'exec sleep 600');

const run = await new Promise<{ code: number | null; output: string }>((resolveRun) => {
  const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', process.execPath, join(repoRoot, 'scripts/dev.ts'), '--cert-dir', join(scratch, 'certs')], {
    cwd: repoRoot,
    env: { ...process.env, ...versions, SIDECAR_TERMINATOR_CACHE: scratch, SIDECAR_TERMINATOR_DEV_DIR: join(scratch, 'dev'), KUBECONFIG: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.on('close', (code) => resolveRun({ code, output }));
});
const lines = run.output.trimEnd().split('\n');
const last = lines.at(-1)!;
const logPath = / Its log: (\S+)$/.exec(last)?.[1];
// The kept logs of both tries go with this test.
for (const path of [logPath, /log of the first try: (\S+)\)/.exec(run.output)?.[1]]) {
  if (path) t.teardown(() => rmSync(dirname(path), { recursive: true, force: true }));
}

t.test('it exits 1 and ends with one line: the component, the cause, what to do, its log', async (t) => {
  t.equal(run.code, 1, run.output);
  t.match(last, /^\[dev\] kube-apiserver did not start: listen tcp 127\.0\.0\.1:(\d+): bind: address already in use \(also after a second try on new ports\)\. What to do: port \1 was taken by a program that does not lease its ports \(`ss -ltnp 'sport = :\1'` names it\); stop it, or run again\. Its log: \/\S+\/kube-apiserver\.log$/);
  t.ok(logPath && existsSync(logPath), `the log is where the line says (${logPath})`);
  t.match(readFileSync(logPath!, 'utf8'), 'bind: address already in use');
});

t.test('before it, the second try on new ports is announced', async (t) => {
  const retry = lines.filter((line) => line.includes('starting again on new ports'));
  t.equal(retry.length, 1, run.output);
  t.match(retry[0], /^\[dev\] control plane: kube-apiserver could not bind port (\d+) \(listen tcp 127\.0\.0\.1:\1: bind: address already in use\); starting again on new ports \(log of the first try: \S+\)$/);
  t.notMatch(run.output, /\n\s+at /, 'no stack trace');
});
