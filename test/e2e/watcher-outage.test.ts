// Never leave a Job hanging where OpenKruise would finish it: failures that last longer than the
// watcher used to retry (15 attempts, about 4.4 minutes). Two long scenarios, run at the same
// time, each on its own control plane:
// - the API server stopped for 6 minutes just as three Jobs finish, so that every request the
//   watcher makes for them fails all that time, then started again: all three complete;
// - the creation of ContainerRecreateRequests refused (403) by an admission webhook (a small HTTPS
//   server here), as a policy would: a refusal retrying cannot fix, so the pod gets one Warning
//   event and is tried again only every few minutes (src/watcher/retries.ts), not in a loop;
//   once the webhook allows it, the Job completes at the next attempt.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { AdmissionregistrationV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { EVENT_REASONS, MANAGED_LABEL } from '../../src/policy/index.ts';
import { REFUSED_FIRST_RETRY_MS, REFUSED_RETRY_MS } from '../../src/watcher/retries.ts';
import { issueWithNewCa } from '../../src/tls/certificates.ts';
import { CRR, findContainerStatus, simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { apply, eventsOf, startStack, waitForJob, waitForJobsComplete, type Clients, type Stack } from '../support/stack.ts';
import { expectStoppedBy } from '../support/endings.ts';
import { jobYaml, killSidecar, main, signalled } from '../support/pods.ts';

const OUTAGE_MS = 6 * 60_000;
/** Long enough for a loop of fast retries to show (a backoff from 0.5 s would have made eight). */
const DENIAL_MS = 2 * 60_000;
/** The longest the watcher waits between two attempts (src/watcher/queue.ts), plus room. */
const AFTER_OUTAGE_MS = 4 * 60_000;

const containers = [main(), killSidecar()];

/** A log for the simulator, whose failing writes during an outage would flood the output: kept, counted. */
function quietLog(): { log: (message: string) => void; lines: string[] } {
  const lines: string[] = [];
  return { lines, log: (message) => lines.push(message) };
}

const failuresOf = (stack: Stack, pod: string) => stack.serve.logs().filter((line) => line.msg === 'reconcile failed, will retry' && line.pod === pod);

t.test('each failure longer than the old retry cap ends with every Job complete', async (t) => {
  const [outage, denial] = await Promise.all([apiServerStopped(t), crrCreationDenied(t)]);

  t.test('the API server stopped for 6 minutes while three Jobs finish, then started: all three complete', async (t) => {
    t.equal(outage.complete, 3, 'all three Jobs complete');
    for (const pod of outage.pods) {
      t.ok(pod.failedAttempts > 0, `${pod.name}: the watcher tried during the outage and failed (${pod.failedAttempts} attempts)`);
      t.equal(pod.signalContainers, 1, `${pod.name}: signalled once`);
    }
    for (const pod of outage.ended) await expectStoppedBy(t, outage.clients, pod, { proxy: 'signal' });
    t.comment(`all three complete ${Math.round(outage.completedAfterStartMs / 1000)}s after the API server started again`);
  });

  t.test('ContainerRecreateRequests refused for 2 minutes: one event, retries further apart each time; once allowed, the Job completes', async (t) => {
    const gaps = denial.denials.slice(1).map((at, index) => Math.round((at - denial.denials[index]!) / 1000));
    t.ok(denial.denials.length >= 2 && denial.denials.length <= 5, `refused ${denial.denials.length} times in those 2 minutes, not in a loop (gaps: ${gaps.join(', ')} s)`);
    t.ok(gaps[0]! * 1000 >= REFUSED_FIRST_RETRY_MS * 0.8 - 2000, `the first retry after about ${REFUSED_FIRST_RETRY_MS / 1000} s (${gaps[0]} s)`);
    t.ok(gaps.every((gap, index) => index === 0 || gap > gaps[index - 1]! * 1.2), `each retry later than the one before (${gaps.join(', ')} s)`);
    t.equal(denial.complete, true, 'the Job completes');
    t.ok(denial.secondAttemptAfterMs <= REFUSED_RETRY_MS * 1.2 + 5000, `the first allowed attempt came ${Math.round(denial.secondAttemptAfterMs / 1000)}s after the first refusal`);
    t.equal(denial.crrs, 1, 'one ContainerRecreateRequest, created once allowed');
    t.equal(denial.warnings.length, 1, 'one Warning event on the pod');
    t.match(denial.warnings[0], /^the API server refused a request for this pod \(HTTP 403\): admission webhook "deny-crr.test.sidecar-terminator.io" denied the request: not now; retrying cannot fix that by itself, so it is tried again after 15s, then less and less often, up to every 5m/, 'saying what was refused and what happens next');
    // Stopped by the ContainerRecreateRequest once allowed; the refusal its one warning.
    if (denial.complete && denial.pod) await expectStoppedBy(t, denial.clients, denial.pod, { proxy: 'crr' }, { warnings: ['request-refused'] });
    t.comment(`the Job completed ${Math.round(denial.completedAfterAllowMs / 1000)}s after the webhook allowed the request`);
  });
});

interface OutageResult {
  complete: number;
  completedAfterStartMs: number;
  pods: Array<{ name: string; failedAttempts: number; signalContainers: number }>;
  /** The pods as they ended, and the clients that read how. */
  ended: V1Pod[];
  clients: Clients;
}

/**
 * Three Jobs whose main containers finish while the watcher is frozen (SIGSTOP): the watch events
 * wait in its socket while the API server stops, so once thawed it learns of the finished pods
 * and every request it makes for them fails for the whole outage.
 */
async function apiServerStopped(t: Test): Promise<OutageResult> {
  const simLog = quietLog();
  const stack = await startStack(t, { serveArgs: ['--kill-mechanism', 'signal'], sim: { log: simLog.log } });
  const { cp, sim, core } = stack;
  const namespace = await cp.createNamespace();
  const names = ['one', 'two', 'three'];
  await apply(cp, namespace, names.map((name) => jobYaml(name, { annotations: { [simAnnotations.exitAfter('main')]: 'never' }, containers })).join('\n---\n'));
  const pods = await waitFor('three labelled pods with their main container running', async () => {
    const items = (await core.listNamespacedPod({ namespace, labelSelector: `${MANAGED_LABEL}=true` })).items;
    return items.length === 3 && items.every((pod) => findContainerStatus(pod, 'main')?.state?.running) && items;
  });

  process.kill(stack.serve.pid, 'SIGSTOP');
  for (const pod of pods) await sim.exitContainer(namespace, pod.metadata!.name!, 'main', 0);
  await sleep(5000); // the API server sends the watch events to the frozen watcher's socket
  await cp.stopApiServer();
  process.kill(stack.serve.pid, 'SIGCONT');
  t.comment('API server stopped; the watcher thawed, the main containers done');
  await sleep(OUTAGE_MS);
  await cp.startApiServer();
  const startedAt = Date.now();
  t.comment(`API server started again; the simulator logged ${simLog.lines.length} failures meanwhile`);

  await waitForJobsComplete(t, stack, namespace, 3, async () => `${(await core.listNamespacedPod({ namespace })).items.filter(signalled).length} pods signalled`, AFTER_OUTAGE_MS);
  const completedAfterStartMs = Date.now() - startedAt;
  const after = (await core.listNamespacedPod({ namespace })).items;
  return {
    complete: (await stack.batch.listNamespacedJob({ namespace })).items.filter((job) => job.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True')).length,
    completedAfterStartMs,
    pods: after.map((pod) => ({
      name: pod.metadata!.name!,
      failedAttempts: failuresOf(stack, `${namespace}/${pod.metadata!.name}`).length,
      signalContainers: pod.spec?.ephemeralContainers?.length ?? 0,
    })),
    ended: after,
    clients: stack,
  };
}


interface DenialResult {
  denied: number;
  /** When each refused attempt came (epoch ms). */
  denials: number[];
  complete: boolean;
  completedAfterAllowMs: number;
  /** From the first refusal to the first attempt the allowing webhook let through. */
  secondAttemptAfterMs: number;
  crrs: number;
  warnings: string[];
  /** The Job's pod as it was then, and the clients that read how it ended. */
  pod: V1Pod | undefined;
  clients: Clients;
}

async function crrCreationDenied(t: Test): Promise<DenialResult> {
  // No resync in the test's time: the next attempt is the refused reconcile's own.
  const stack = await startStack(t, { installCrrCrd: true, serveArgs: ['--resync-interval', '30m'] });
  const { cp } = stack;
  const gate = await startCrrGate();
  t.teardown(() => gate.close());
  const admission = cp.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  await admission.createValidatingWebhookConfiguration({
    body: {
      metadata: { name: 'deny-crr' },
      webhooks: [
        {
          name: 'deny-crr.test.sidecar-terminator.io',
          clientConfig: { url: `https://127.0.0.1:${gate.port}/`, caBundle: Buffer.from(gate.caBundle).toString('base64') },
          rules: [{ apiGroups: [CRR.group], apiVersions: ['*'], operations: ['CREATE'], resources: [CRR.plural] }],
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: 'Fail',
          timeoutSeconds: 5,
        },
      ],
    },
  });
  // In effect once a server-side dry run is denied.
  const custom = cp.kubeConfig.makeApiClient(CustomObjectsApi);
  const probeNamespace = await cp.createNamespace();
  await waitFor('the denying webhook to be in effect', async () => {
    try {
      await custom.createNamespacedCustomObject({ ...CRR, namespace: probeNamespace, dryRun: 'All', body: { apiVersion: `${CRR.group}/${CRR.version}`, kind: 'ContainerRecreateRequest', metadata: { name: 'probe' }, spec: { podName: 'x', containers: [{ name: 'x' }] } } });
      return false;
    } catch (error) {
      return /not now/.test(String((error as { body?: unknown }).body));
    }
  });
  gate.denials.length = 0;

  const namespace = await cp.createNamespace();
  // A grace period of 10 minutes: the sidecar is ended from outside (crr-not-done) only its grace
  // period and a minute after the main container, well after the refusal is lifted here.
  await apply(cp, namespace, jobYaml('denied', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, spec: '\n      terminationGracePeriodSeconds: 600', containers }));
  await waitFor('the first denial', async () => gate.denials.length > 0, { timeoutMs: 120_000 });
  t.comment('the watcher is denied its ContainerRecreateRequest');
  await sleep(DENIAL_MS);
  gate.allow();
  const allowedAt = Date.now();
  const denied = gate.denials.length;
  t.comment(`the webhook allows ContainerRecreateRequests again, after ${denied} denials`);

  // The next attempt comes after a refused reconcile's delay (or the resync, 5m), then the Job completes.
  const job = await waitForJob(stack, namespace, 'denied', 'Complete', REFUSED_RETRY_MS * 1.2 + 60_000).catch(() => undefined);
  const pod = (await stack.core.listNamespacedPod({ namespace, labelSelector: 'job-name=denied' })).items[0];
  const crrs = ((await custom.listNamespacedCustomObject({ ...CRR, namespace })) as { items: unknown[] }).items;
  const warnings = pod ? (await eventsOf(stack, namespace, pod.metadata!.name!)).filter((e) => e.reason === EVENT_REASONS.failed).map((e) => e.message ?? '') : [];
  return { denied, denials: [...gate.denials], complete: job !== undefined, completedAfterAllowMs: Date.now() - allowedAt, secondAttemptAfterMs: (gate.allowed[0] ?? Infinity) - gate.denials[0]!, crrs: crrs.length, warnings, pod, clients: stack };
}

/** An admission webhook that denies every request until told to allow them, and counts its denials. */
async function startCrrGate(): Promise<{ port: number; caBundle: string; denials: number[]; allowed: number[]; allow(): void; close(): Promise<void> }> {
  const bundle = await issueWithNewCa({ hosts: ['127.0.0.1'], validityMs: 24 * 3_600_000, now: new Date() });
  let allowing = false;
  const denials: number[] = [];
  const allowed: number[] = [];
  const server: Server = createServer({ key: bundle.key, cert: bundle.cert }, (request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const review = JSON.parse(body) as { request: { uid: string; dryRun?: boolean } };
      if (!review.request.dryRun) (allowing ? allowed : denials).push(Date.now());
      const answer = allowing ? { allowed: true } : { allowed: false, status: { code: 403, message: 'not now' } };
      response.setHeader('Content-Type', 'application/json');
      response.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: review.request.uid, ...answer } }));
    });
  });
  await new Promise<void>((resolveListen) => server.listen(0, '127.0.0.1', resolveListen));
  return {
    port: (server.address() as AddressInfo).port,
    caBundle: bundle.caBundle,
    denials,
    allowed,
    allow: () => (allowing = true),
    close: () => new Promise((resolveClose) => server.close(() => resolveClose())),
  };
}
