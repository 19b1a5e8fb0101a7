// assertAdmittedThroughService (test/support/real-stack.ts) waits out a Service that kube-proxy
// does not route yet, and nothing else: judged here on the answers kubectl gives, one per try.
import t from 'tap';
import { MANAGED, MANAGED_LABEL } from '../../src/policy/index.ts';
import type { KubectlResult } from '../support/control-plane.ts';
import { assertAdmittedThroughService } from '../support/real-stack.ts';

const REFUSED = 'Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed calling webhook "mutate.sidecar-terminator.io": failed to call webhook: Post "https://sidecar-terminator.sidecar-terminator.svc:443/mutate?timeout=3s": dial tcp 10.0.0.216:443: connect: connection refused';
const UNTRUSTED = 'Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed calling webhook "mutate.sidecar-terminator.io": failed to call webhook: Post "https://sidecar-terminator.sidecar-terminator.svc:443/mutate?timeout=3s": tls: failed to verify certificate: x509: certificate signed by unknown authority';
const refused = (stderr: string): KubectlResult => ({ code: 1, stdout: '', stderr });
const admitted = (labels: Record<string, string> = {}): KubectlResult => ({ code: 0, stdout: JSON.stringify({ metadata: { name: 'through-the-service', labels } }), stderr: '' });
const labelled = admitted({ [MANAGED_LABEL]: MANAGED });

/** The assertions it makes, given kubectl's answers in turn (the last one repeated). */
async function judged(answers: KubectlResult[], timeoutMs = 10_000) {
  const calls: string[][] = [];
  const kubectl = (args: string[]) => {
    calls.push(args);
    return Promise.resolve(answers[Math.min(calls.length, answers.length) - 1]!);
  };
  const results: Array<{ ok: boolean; message: string }> = [];
  const recorder = { ok: (value: unknown, message?: string) => (results.push({ ok: Boolean(value), message: message ?? '' }), Boolean(value)) };
  await assertAdmittedThroughService(recorder, { kubectl }, 'team', timeoutMs);
  return { results, calls };
}

t.test('labelled at the first try: both pass, one server dry run', async (t) => {
  const { results, calls } = await judged([labelled]);
  t.same(results.map((result) => result.ok), [true, true]);
  t.match(calls, [['apply', '--dry-run=server', '-o', 'json', '-f', '-']]);
});

t.test('refused while not routed (Fail), admitted unlabelled (Ignore), then labelled: both pass, the tries named', async (t) => {
  const { results } = await judged([refused(REFUSED), admitted(), labelled]);
  t.same(results.map((result) => result.ok), [true, true]);
  t.match(results[0]?.message, /after [\d.]+ s; 2 tries before: .*connect: connection refused \| admitted unlabelled/);
});

t.test('any other refusal fails, though the pod is admitted later', async (t) => {
  const { results } = await judged([refused(UNTRUSTED), labelled]);
  t.same(results.map((result) => result.ok), [true, false]);
  t.match(results[0]?.message, /x509: certificate signed by unknown authority/);
});

t.test('never labelled: fails, naming what each try got', async (t) => {
  const { results } = await judged([admitted()], 1200);
  t.equal(results[0]?.ok, false);
  t.match(results[0]?.message, /not within [\d.]+ s; \d+ tries before: admitted unlabelled: the webhook was not called\)$/);
});
