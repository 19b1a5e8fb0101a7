// The test harness itself: a real control plane, a Job applied with kubectl, the simulated
// kubelet running its pod, the real Job controller completing it, and a clean teardown.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { BatchV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { startControlPlane } from '../support/control-plane.ts';
import { KubeletSimulator } from '../support/kubelet-simulator.ts';
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
