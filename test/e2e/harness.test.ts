// The test harness itself: a real control plane, a Job applied with kubectl, the simulated
// kubelet running its pod, the real Job controller completing it, and a clean teardown; the
// ports it listens on, and a start whose port is taken.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { BatchV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { startControlPlane } from '../support/control-plane.ts';
import { KubeletSimulator } from '../support/kubelet-simulator.ts';
import { ComponentStartError } from '../support/managed-process.ts';
import { ephemeralPortRange } from '../support/net.ts';
import { waitFor } from '../support/wait.ts';

const cp = await startControlPlane();
t.teardown(() => cp.stop());
const sim = new KubeletSimulator(cp.kubeConfig, { defaultMainExitAfterMs: 500 });
await sim.start();
t.teardown(() => sim.stop());

const jobYaml = `
apiVersion: batch/v1
kind: Job
metadata:
  name: hello
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: busybox:1.36
          command: [sh, -c, "echo hello"]
`;

t.test('a Job applied with kubectl completes on the real API server', async (t) => {
  const namespace = await cp.createNamespace();
  const applied = await cp.kubectl(['apply', '-f', '-'], { namespace, input: jobYaml });
  t.equal(applied.code, 0, applied.stderr);
  t.match(applied.stdout, 'job.batch/hello created');

  const batch = cp.kubeConfig.makeApiClient(BatchV1Api);
  const job = await waitFor('Job hello to complete', async () => {
    const current = await batch.readNamespacedJob({ name: 'hello', namespace });
    return current.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True') && current;
  });
  t.equal(job.status?.succeeded, 1);

  const listed = await cp.kubectl(['get', 'pods', '-l', 'job-name=hello', '-o', 'jsonpath={.items[0].status.phase} {.items[0].spec.nodeName}'], { namespace });
  t.equal(listed.stdout, `Succeeded ${sim.normalNodes[0]}`);
});

t.test('the control plane listens on one TCP port, leased, outside the ephemeral range', async (t) => {
  const pids = new Set(processesMentioning(cp.dir));
  const listening = execFileSync('ss', ['-ltnpH'], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => [...line.matchAll(/pid=(\d+)/g)].some((match) => pids.has(Number(match[1]))));
  const port = Number(new URL(cp.serverUrl).port);
  t.same(listening.map((line) => Number(/:(\d+)\s/.exec(line)?.[1])), [port], `only kube-apiserver listens on TCP (etcd on Unix sockets):\n${listening.join('\n')}`);
  const { low, high } = ephemeralPortRange();
  t.ok(port < low || port > high, `port ${port} is outside the ephemeral range ${low}-${high}`);
  const lock = createServer();
  const leased = await new Promise<boolean>((resolveLock) => {
    lock.once('error', () => resolveLock(true));
    lock.listen(`\0sidecar-terminator-port-${port}`, () => resolveLock(false));
  });
  lock.close();
  t.ok(leased, 'the port is leased: no other lease on this host can take it');
});

t.test('stop() leaves no process and no directory behind', async (t) => {
  await sim.stop();
  const before = processesMentioning(cp.dir);
  t.equal(before.length, 3, 'etcd, kube-apiserver and kube-controller-manager run from the temp dir');
  await cp.stop();
  t.same(processesMentioning(cp.dir), [], 'no process left');
  t.notOk(existsSync(cp.dir), 'temp dir removed');
  await cp.stop(); // idempotent
});

/** Pids of the processes whose command line contains `text` (every control-plane process names its temp dir). */
function processesMentioning(text: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
      } catch {
        return false; // exited meanwhile
      }
    })
    .map(Number);
}

t.test('a port taken by a program that does not lease is tried once more on a new one, then named with its log', async (t) => {
  // A listener of this process, not leased: kube-apiserver is told to bind it (the last --secure-port wins), on both tries.
  const squatter = createServer();
  await new Promise<void>((resolveListen) => squatter.listen(0, '127.0.0.1', resolveListen));
  t.teardown(() => squatter.close());
  const port = (squatter.address() as { port: number }).port;
  const logged: string[] = [];
  const error = await startControlPlane({ apiServerArgs: ['--bind-address', '127.0.0.1', '--secure-port', String(port)], log: (line) => logged.push(line) }).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.ok(error instanceof ComponentStartError, `a ComponentStartError: ${String(error)}`);
  const failure = error as ComponentStartError;
  // Both tries' directories, kept for their logs, go with this test.
  for (const path of [...logged, failure.message].flatMap((text) => /(\/\S+)\/kube-apiserver\.log/.exec(text)?.[1] ?? [])) {
    t.teardown(() => rmSync(path, { recursive: true, force: true }));
  }
  t.equal(logged.length, 1, 'one retry, said once');
  t.match(logged[0], new RegExp(`^control plane: kube-apiserver could not bind port ${port} \\(.*address already in use\\); starting again on new ports \\(log of the first try: \\S+/kube-apiserver.log\\)$`));
  t.equal(failure.component, 'kube-apiserver');
  t.equal(failure.portTaken, port);
  t.notMatch(failure.message, /\n/, 'one line');
  t.match(failure.message, `kube-apiserver did not start: listen tcp 127.0.0.1:${port}: bind: address already in use (also after a second try on new ports). What to do: port ${port} was taken`);
  t.match(failure.message, `ss -ltnp 'sport = :${port}'`);
  t.match(failure.message, / Its log: (\S+)$/);
  const logPath = / Its log: (\S+)$/.exec(failure.message)![1]!;
  t.match(readFileSync(logPath, 'utf8'), 'bind: address already in use', 'the log stays where the line says');
  const dir = logPath.slice(0, logPath.lastIndexOf('/'));
  t.ok(readdirSync(dir).every((file) => file.endsWith('.log')), `only logs are kept in ${dir}`);
  t.match(failure.logTails, '--- kube-apiserver', 'the processes\' last log lines come with it');
});
