// What a caller that is not the API server can make the webhook write, on a real API server.
// Anyone who reaches the webhook port can post an AdmissionReview naming any owner, namespace,
// name and value. The webhook then writes an event only about a Job or CronJob it has read back
// with the uid the review names, in a namespace the webhooks serve, in words of its own: every
// event it wrote is checked against the object it is about (docs/security.md).
import { mkdtemp, rm } from 'node:fs/promises';
import { get } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatchV1Api, CoreV1Api, type CoreV1Event } from '@kubernetes/client-node';
import t from 'tap';
import { ENV_WHEN_JOB_EXIT } from '../../src/policy/index.ts';
import { startControlPlane } from '../support/control-plane.ts';
import { podReview } from '../support/reviews.ts';
import { waitFor } from '../support/wait.ts';
import { postJson, startServe } from '../support/serve-process.ts';

const cp = await startControlPlane();
t.teardown(() => cp.stop());
const core = cp.kubeConfig.makeApiClient(CoreV1Api);
const batch = cp.kubeConfig.makeApiClient(BatchV1Api);
const addonNamespace = await cp.createNamespace('sidecar-terminator');
const users = await cp.createNamespace('batch');
const certDir = await mkdtemp(join(tmpdir(), 'st-forged-certs-'));
t.teardown(() => rm(certDir, { recursive: true, force: true }));
// Not registered with the API server: every review below comes straight from the test, as from an attacker in the cluster's network.
const serve = await startServe(['--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, '--no-watcher', '--namespace', addonNamespace]);
t.teardown(() => serve.stop());

/** A real, suspended Job (no pods): an owner the webhook can read back. */
async function realJob(namespace: string, name: string) {
  return batch.createNamespacedJob({ namespace, body: { metadata: { name }, spec: { suspend: true, template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox:1.36' }] } } } } });
}
const owner = await realJob(users, 'nightly');
const inKubeSystem = await realJob('kube-system', 'maintenance');

const FORGED_TEXT = 'CLUSTER-COMPROMISED-visit-evil.example.com';

/** A pod CREATE "from" `ownerReference`, with a marker error and the forger's words wherever a string goes. */
function forgedReview(namespace: string, ownerReference: Record<string, unknown>, index: number) {
  return podReview(
    {
      containers: [
        { name: 'main', image: 'busybox:1.36' },
        { name: FORGED_TEXT.toLowerCase(), image: `registry.example.com/${FORGED_TEXT.toLowerCase()}:1`, env: [{ name: ENV_WHEN_JOB_EXIT, value: FORGED_TEXT }] },
      ],
    },
    { name: `${FORGED_TEXT}-${index}`, ownerReferences: [{ controller: true, ...ownerReference }], annotations: { note: FORGED_TEXT } },
    { namespace, username: 'system:serviceaccount:kube-system:job-controller', uid: `forged-${index}` },
  );
}

async function addonEvents(): Promise<CoreV1Event[]> {
  const events = await core.listEventForAllNamespaces({});
  return events.items.filter((event) => event.source?.component === 'sidecar-terminator' || event.reportingComponent === 'sidecar-terminator');
}

/** sidecar_terminator_admission_owner_events_total by result, from serve's /metrics. */
async function ownerEventCounts(): Promise<Record<string, number>> {
  const text = await new Promise<string>((resolve, reject) => {
    get(`${serve.url}/metrics`, { rejectUnauthorized: false }, (response) => {
      let body = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve(body));
    }).on('error', reject);
  });
  const counts: Record<string, number> = {};
  for (const [, result, value] of text.matchAll(/^sidecar_terminator_admission_owner_events_total\{result="(\w+)"\} (\d+)/gm)) counts[result!] = Number(value);
  return counts;
}

t.test('forged reviews: no event about an object the webhook has not read back, and never the forger\'s words', async (t) => {
  const forgeries: Array<[string, string, Record<string, unknown>]> = [
    ['a Deployment in kube-system (coredns)', 'kube-system', { apiVersion: 'apps/v1', kind: 'Deployment', name: 'coredns', uid: '6a1f0a7e-0000-4000-8000-00000000c0de' }],
    ['a Job that does not exist', users, { apiVersion: 'batch/v1', kind: 'Job', name: 'ghost', uid: '00000000-0000-4000-8000-000000000001' }],
    ['a real Job, with another uid', users, { apiVersion: 'batch/v1', kind: 'Job', name: 'nightly', uid: '00000000-0000-4000-8000-000000000002' }],
    ['a real Job in kube-system, which the webhooks never serve', 'kube-system', { apiVersion: 'batch/v1', kind: 'Job', name: 'maintenance', uid: inKubeSystem.metadata!.uid }],
    ['a real CronJob name that is not there', users, { apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: owner.metadata!.uid }],
    ['a kind the webhook cannot read', users, { apiVersion: 'example.com/v1', kind: 'Workflow', name: 'nightly', uid: owner.metadata!.uid }],
  ];
  for (const [index, [what, namespace, ownerReference]] of forgeries.entries()) {
    // Five of each: the rate limit (30 at once) is not what stops these.
    for (let copy = 0; copy < 5; copy++) {
      const answer = (await postJson(`${serve.url}/validate`, forgedReview(namespace, ownerReference, index * 10 + copy))) as { response?: { allowed?: boolean } };
      t.equal(answer.response?.allowed, true, `${what} (${copy + 1}/5): admitted as a controller's pod, as the API server's would be`);
    }
  }
  // The one forgery that names a real owner, with its uid: an event, in the add-on's words.
  await postJson(`${serve.url}/validate`, forgedReview(users, { apiVersion: 'batch/v1', kind: 'Job', name: 'nightly', uid: owner.metadata!.uid }, 99));

  const events = await waitFor('the event on the real Job', async () => {
    const all = await addonEvents();
    return all.some((event) => event.involvedObject.name === 'nightly') && all;
  });
  // Give the other writes, had any been started, the time to land.
  await waitFor('every owner event to be accounted for', async () => {
    const counts = await ownerEventCounts();
    return (counts.created ?? 0) + (counts.unverified ?? 0) + (counts.dropped ?? 0) + (counts.duplicate ?? 0) >= 31 && counts;
  });
  const after = await addonEvents();
  t.same(after.map((event) => `${event.involvedObject.kind} ${event.involvedObject.namespace}/${event.involvedObject.name}`), ['Job batch/nightly'], 'one event in the whole cluster, about the Job that exists');
  for (const event of after) {
    const read = await batch.readNamespacedJob({ namespace: event.involvedObject.namespace!, name: event.involvedObject.name! });
    t.equal(event.involvedObject.uid, read.metadata?.uid, 'about the object as it is: its uid matches');
    t.notMatch(JSON.stringify(event), /CLUSTER-COMPROMISED|evil/i, 'with none of the forger\'s words');
    t.match(event.message, /^A Pod created by this Job was admitted with 1 sidecar configuration error, /);
  }
  t.equal(events.length, after.length);
  const counts = await ownerEventCounts();
  t.comment(`owner events by result: ${JSON.stringify(counts)}`);
  // Each owner named is read at most once (a repeated claim is remembered); kinds it cannot read
  // and namespaces the webhooks never serve are not even read.
  t.same(counts, { created: 1, duplicate: 12, dropped: 10, unverified: 8, error: 0 }, 'the others: dropped (kube-system), unverified, or repeats of an unverified claim');
});
