// The watcher's metrics on /metrics of a running add-on, with their values after known work: five
// Jobs stopped by signal, and one pod whose sidecar cannot be signalled (its user is unknown and
// it must not run as root). The simulator reports no container users here, as runtimes before
// containerd 2 do, so the signal containers run as root with CAP_KILL alone.
import { get } from 'node:https';
import t from 'tap';
import { SERVE_FLAGS } from '../../src/config.ts';
import { simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { apply, eventsOf, podOfJob, startStack, waitForJobsComplete } from '../support/stack.ts';
import { expectJobStoppedBy } from '../support/endings.ts';
import { jobYaml, killSidecar, main } from '../support/pods.ts';

const stack = await startStack(t, {
  serveArgs: ['--kill-mechanism', 'signal'],
  sim: { reportUsers: false, imageUsers: { [SERVE_FLAGS.signalImage.default]: 1000 } },
});
const { cp } = stack;

const containers = [main(), killSidecar()];

function scrape(): Promise<string> {
  return new Promise((resolveText, reject) => {
    get(`${stack.serve.url}/metrics`, { rejectUnauthorized: false }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolveText(text));
    }).on('error', reject);
  });
}

/** The value of one sample (`name{label="value",...}`), summed over the samples matching when `labels` leaves some out. */
function value(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const samples = text.split('\n').flatMap((line) => {
    const match = /^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) return [];
    const sampleLabels: Record<string, string | undefined> = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map(([, key = '', val = '']) => [key, val]));
    return Object.entries(labels).every(([key, val]) => sampleLabels[key] === val) ? [Number(match[3])] : [];
  });
  return samples.length > 0 ? samples.reduce((a, b) => a + b, 0) : undefined;
}

t.test('after five Jobs stopped by signal and one refusal, the metrics say so', async (t) => {
  const namespace = await cp.createNamespace();
  const jobs = 5;
  await apply(cp, namespace, Array.from({ length: jobs }, (_, i) => jobYaml(`job-${i}`, { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers })).join('\n---\n'));
  await waitForJobsComplete(t, stack, namespace, jobs, async () => 'waiting', 180_000);
  await waitFor('every pod to leave the watch', () => stack.serve.logs().filter((l) => l.msg === 'sidecars stopped; the pod left the watch' && String(l.pod).startsWith(`${namespace}/`)).length === jobs);
  const pod = await podOfJob(stack, namespace, 'job-0');
  t.match(pod.spec?.ephemeralContainers?.[0]?.securityContext, { runAsUser: 0, capabilities: { drop: ['ALL'], add: ['KILL'] } }, 'the user unknown: root with CAP_KILL alone');
  for (let i = 0; i < jobs; i++) await expectJobStoppedBy(t, stack, namespace, `job-${i}`, { proxy: 'signal' });

  const refusedNamespace = await cp.createNamespace();
  await apply(cp, refusedNamespace, jobYaml('non-root', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, spec: { securityContext: { runAsNonRoot: true } }, containers }));
  const refusedPod = await podOfJob(stack, refusedNamespace, 'non-root');
  const refusal = await waitFor('the refusal', async () => (await eventsOf(stack, refusedNamespace, refusedPod.metadata!.name!)).find((e) => e.type === 'Warning'));
  t.match(refusal.message, /cannot signal proxy: its user is unknown .* set spec\.containers\[1\]\.securityContext\.runAsUser to the uid the sidecar runs as/);

  const text = await waitFor('the refusal to be counted', async () => {
    const current = await scrape();
    return value(current, 'sidecar_terminator_terminations_total', { mechanism: 'signal', result: 'refused' }) === 1 && current;
  });
  t.equal(value(text, 'sidecar_terminator_terminations_total', { mechanism: 'signal', result: 'ok' }), jobs, 'one signal per Job');
  t.equal(value(text, 'sidecar_terminator_terminations_total', { mechanism: 'signal', result: 'error' }), 0, 'no failed request: the series is there, at 0');
  t.equal(value(text, 'sidecar_terminator_terminations_total', { mechanism: 'crr', result: 'failed' }), 0, 'every mechanism and result is there from the start');
  t.equal(value(text, 'sidecar_terminator_leader'), 1, 'this process runs the watcher');
  const notAfter = value(text, 'sidecar_terminator_certificate_expiration_timestamp_seconds');
  t.ok(notAfter !== undefined && notAfter * 1000 > Date.now(), 'the serving certificate expires later');
  t.equal(value(text, 'sidecar_terminator_termination_latency_seconds_count', { mechanism: 'signal' }), jobs, 'a latency to the request per signal');
  t.equal(value(text, 'sidecar_terminator_stop_duration_seconds_count'), jobs, 'a stop duration per pod seen stopped, the refused one not');
  t.ok(value(text, 'sidecar_terminator_stop_duration_seconds_sum')! > 0, 'durations are positive');
  t.equal(value(text, 'sidecar_terminator_queue_depth'), 0, 'nothing waiting');
  t.equal(value(text, 'sidecar_terminator_queue_retrying'), 0, 'nothing failing');
  t.equal(value(text, 'sidecar_terminator_reconcile_retries_total'), 0);
  t.ok(value(text, 'sidecar_terminator_reconcile_duration_seconds_count', { result: 'done' })! >= jobs, 'reconciles measured');
  // The refused pod is then ended from outside (docs/sidecars.md), soon or late on a busy machine:
  // the pending-pods gauges are not read here.
});
