// Graceful shutdown. SIGTERM to `serve`: admission requests already in flight are answered
// (every one a 200 AdmissionReview for its own uid) while new connections are refused, and the
// watcher finishes the reconciles it is running: no pod is left half-handled.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import type { ClientRequest } from 'node:http';
import { request } from 'node:https';
import { connect, type TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import type { V1Pod } from '@kubernetes/client-node';
import { ENV_WHEN_JOB_EXIT, MANAGED_LABEL } from '../../src/policy/index.ts';
import type { AdmissionReview } from '../../src/webhook/admission.ts';
import { startControlPlane } from '../support/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { startServe } from '../support/serve-process.ts';
import { apply, startStack } from '../support/stack.ts';
import { jobYaml } from '../support/pods.ts';

interface Held {
  uid: string;
  rest: Buffer;
  req: ClientRequest;
  /** When its headers went out: the server's deadline for it runs from then. */
  sentAt: number;
  /** The answer, with when it came. */
  answer: Promise<{ status: number | string; uid?: string; allowed?: boolean; patched?: boolean; at: number }>;
}

/** A big pod (about 2 MiB: 400 containers with many env vars), as a mutate AdmissionReview. */
function bigReview(uid: string): Buffer {
  const review = JSON.parse(readFileSync(new URL('../fixtures/admission/pod-manageable.json', import.meta.url), 'utf8')) as { request: { uid: string; object: V1Pod } };
  review.request.uid = uid;
  const containers = review.request.object.spec!.containers;
  const main = containers[0]!;
  const env = Array.from({ length: 100 }, (_, i) => ({ name: `SETTING_${i}`, value: 'x'.repeat(40) }));
  for (let i = 0; i < 400; i++) containers.push({ ...main, name: `worker-${i}`, env });
  return Buffer.from(JSON.stringify(review));
}

/** Sends the headers and the first part of the body, and holds the rest back. */
function holdRequest(port: number, uid: string): Held {
  const body = bigReview(uid);
  const req = request({ host: '127.0.0.1', port, path: '/mutate', method: 'POST', rejectUnauthorized: false, agent: false, headers: { 'content-type': 'application/json', 'content-length': body.length } });
  const answer = new Promise<Awaited<Held['answer']>>((resolveAnswer) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        try {
          const review = JSON.parse(text) as AdmissionReview;
          resolveAnswer({ status: res.statusCode ?? 'none', uid: review.response?.uid, allowed: review.response?.allowed, patched: review.response?.patch !== undefined, at: Date.now() });
        } catch {
          resolveAnswer({ status: res.statusCode ?? 'none', at: Date.now() });
        }
      });
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolveAnswer({ status: error.code ?? error.message, at: Date.now() }));
  });
  const sentAt = Date.now();
  const half = Math.floor(body.length / 2);
  req.write(body.subarray(0, half));
  return { uid, rest: body.subarray(half), req, sentAt, answer };
}

function tlsConnects(port: number): Promise<boolean> {
  return new Promise((resolveConnect) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      socket.destroy();
      resolveConnect(true);
    });
    socket.on('error', () => resolveConnect(false));
  });
}

t.test('SIGTERM drains the admission requests in flight and refuses new connections', async (t) => {
  const cp = await startControlPlane();
  t.teardown(() => cp.stop());
  const certDir = await mkdtemp(join(tmpdir(), 'st-e2e-certs-'));
  t.teardown(() => rm(certDir, { recursive: true, force: true }));
  // Requests held half-sent through the whole drain: the API server's limit raised to 10 s, as the
  // server gives a request no longer than that to arrive.
  const timeoutSeconds = 10;
  const serve = await startServe(['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, '--no-watcher', '--webhook-timeout-seconds', String(timeoutSeconds)]);
  t.teardown(() => serve.stop());

  // Go's HTTP client (the API server's) keeps connections it dialled but never used in its pool.
  const unused = await new Promise<TLSSocket>((resolveSocket, reject) => {
    const socket = connect({ host: '127.0.0.1', port: serve.port, rejectUnauthorized: false }, () => resolveSocket(socket));
    socket.on('error', reject);
  });
  t.teardown(() => unused.destroy());
  const count = 24;
  const held = Array.from({ length: count }, (_, i) => holdRequest(serve.port, `drain-${i}`));
  t.comment(`${count} requests of ${(bigReview('x').length / 1024 / 1024).toFixed(1)} MiB each, half sent`);
  await sleep(1500); // the server has read their headers and started on their bodies

  process.kill(serve.pid, 'SIGTERM');
  await waitFor('serve to start shutting down', () => serve.logs().some((line) => line.msg === 'shutting down'), { intervalMs: 20 });
  await waitFor('the listener to close', async () => !(await tlsConnects(serve.port)), { timeoutMs: 10_000, intervalMs: 50 });
  t.notOk(await tlsConnects(serve.port), 'new connections are refused once shutting down');

  for (const request of held) request.req.end(request.rest);
  const answers = await Promise.all(held.map((request) => request.answer));
  // Each is judged, or, when its turn in the worker came after its deadline (the webhook timeout
  // from its first byte, past which the API server has given up), answered 503 at once. Which
  // happens depends on the CPU the worker gets (it runs at nice 10, behind busy processes of the
  // host), not on the drain: a 503 before the deadline, a reset or no answer is the drain failing.
  const judged = answers.filter((answer, i) => answer.status === 200 && answer.uid === held[i]!.uid && answer.allowed === true && answer.patched);
  const expired = answers.filter((answer, i) => answer.status === 503 && answer.at >= held[i]!.sentAt + timeoutSeconds * 1000);
  t.same(
    answers.flatMap((answer, i) => (judged.includes(answer) || expired.includes(answer) ? [] : [`${held[i]!.uid}: ${JSON.stringify({ ...answer, afterMs: answer.at - held[i]!.sentAt })}`])),
    [],
    `all ${count} requests in flight answered: a 200 AdmissionReview with their uid and the label patch, or a 503 once past their deadline`,
  );
  t.ok(judged.length > 0, `the drain judged requests in flight (${judged.length} judged, ${expired.length} past their deadline in the worker's queue)`);
  const exit = await serve.exited;
  t.same(exit, { code: 0, signal: null }, 'serve exits 0 afterwards');
  const messages = serve.logs().map((line) => line.msg);
  t.equal(messages.at(-1), 'stopped', 'logged');
  t.equal(messages.slice(messages.indexOf('shutting down')).filter((msg) => msg === 'admission decision').length, judged.length, 'the decisions came after the SIGTERM');
  t.notOk(
    messages.includes('shutdown grace period over; closing the remaining connections'),
    'within the grace period: a connection opened but never used does not hold the shutdown for the whole --shutdown-grace',
  );
});

t.test('SIGTERM lets the watcher finish the reconciles it is running', async (t) => {
  const stack = await startStack(t, { serveArgs: ['--kill-mechanism', 'signal', '--concurrency', '8'] });
  const { cp, core } = stack;
  const namespace = await cp.createNamespace();
  const sidecars = ['proxy', 'sql', 'logs'];
  const containers = `        - name: main
          image: busybox:1.36
${sidecars.map((name) => `        - name: ${name}\n          image: envoyproxy/envoy:v1.31.0\n          env:\n            - name: ${ENV_WHEN_JOB_EXIT}\n              value: "true"`).join('\n')}`;
  const count = 80;
  // Every main container is told to exit at the same moment, once all pods run.
  const manifests = Array.from({ length: count }, (_, i) => jobYaml(`finish-${i}`, { containers })).join('\n---\n');
  await apply(cp, namespace, manifests);
  const running = await waitFor(
    `${count} running labelled pods`,
    async () => {
      const pods = (await core.listNamespacedPod({ namespace, labelSelector: `${MANAGED_LABEL}=true` })).items;
      return pods.length === count && pods.every((pod) => pod.status?.phase === 'Running') && pods;
    },
    { timeoutMs: 180_000, intervalMs: 1000 },
  );
  await Promise.all(running.map((pod) => stack.sim.exitContainer(namespace, pod.metadata!.name!, 'main', 0)));

  await waitFor('the watcher to start acting', () => stack.serve.logs().some((line) => line.msg === 'stopping sidecars'), { timeoutMs: 60_000, intervalMs: 10 });
  process.kill(stack.serve.pid, 'SIGTERM');
  const exit = await stack.serve.exited;
  t.same(exit, { code: 0, signal: null }, 'serve exits 0', { output: stack.serve.output().slice(-2000) });
  const messages = stack.serve.logs().map((line) => line.msg);
  t.equal(messages.at(-1), 'stopped', 'logged', { last: messages.slice(-5) });
  const afterSignal = stack.serve.logs().slice(messages.lastIndexOf('shutting down'));
  // Among them the grace period running out: a connection the API server opened but never used kept the webhook from closing.
  t.same(afterSignal.filter((line) => Number(line.level) >= 40).map((line) => line.msg), [], 'no warning or error while stopping');

  await sleep(2000); // let the simulated kubelet report what the last ephemeral containers did
  const pods: V1Pod[] = (await core.listNamespacedPod({ namespace })).items;
  const signalled = pods.filter((pod) => (pod.spec?.ephemeralContainers?.length ?? 0) > 0);
  // The pods whose stop had begun when the SIGTERM came, by the watcher's own lines before it.
  const begun = new Set(stack.serve.logs().slice(0, messages.lastIndexOf('shutting down')).filter((line) => line.msg === 'stopping sidecars').map((line) => line.pod));
  t.comment(`${signalled.length} of ${count} pods handled before serve stopped, ${begun.size} begun before the SIGTERM`);
  // Stopping takes a while (the webhook drains meanwhile); the watcher must not use it to go on
  // taking pods: those are left to the next replica. At most the reconciles in flight at the
  // SIGTERM (--concurrency 8) finish after it.
  t.ok(signalled.length > 0 && signalled.length < count, `the watcher left pods to the next replica (${signalled.length} of ${count} handled)`);
  t.ok(signalled.length <= begun.size + 8, `no reconcile began after the SIGTERM (${signalled.length} handled, ${begun.size} begun before it, 8 at most in flight)`);
  const events = (await core.listNamespacedEvent({ namespace })).items.filter((e) => e.reason === 'SidecarTerminator');
  const halfDone = signalled.flatMap((pod) => {
    const targets = (pod.spec?.ephemeralContainers ?? []).map((c) => c.targetContainerName).sort();
    const problems = [
      JSON.stringify(targets) === JSON.stringify([...sidecars].sort()) ? '' : `signalled ${targets.join(', ')} only`,
      events.some((e) => e.involvedObject.name === pod.metadata?.name) ? '' : 'no SidecarTerminator event',
    ].filter(Boolean);
    return problems.length > 0 ? [`${pod.metadata?.name}: ${problems.join('; ')}`] : [];
  });
  t.same(halfDone, [], 'every pod the watcher started on was finished: all sidecars signalled, the event recorded');
});
