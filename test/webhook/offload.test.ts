// The worker that judges large bodies: a body still queued when the API server stops waiting is
// dropped unjudged, so a burst of costly bodies cannot keep later ones waiting without end.
import t from 'tap';
import { buildApp } from '../../src/webhook/app.ts';
import { Offload, ReviewExpired } from '../../src/webhook/offload.ts';
import { HOSTILE_SHAPES, countWithin, hostileBody } from '../support/hostile-reviews.ts';
import { DEFAULT_OPTIONS, loadReview } from './support.ts';

const SETTINGS = { enforcement: 'deny' as const, quickExitImageAllowlist: [], nativeSidecars: true };
const shape = HOSTILE_SHAPES.find((each) => each.id === 'many-sidecars')!;
const largeBody = hostileBody(shape, countWithin(shape));

t.test('a body whose deadline has passed is not judged; the next one is', async (t) => {
  const offload = new Offload();
  t.teardown(() => offload.close());
  const late = await offload.judge('validate', Buffer.from(largeBody), SETTINGS, Date.now() - 1).then(
    () => undefined,
    (error: unknown) => error,
  );
  t.ok(late instanceof ReviewExpired, 'past its deadline: ReviewExpired');
  const judgement = await offload.judge('validate', Buffer.from(largeBody), SETTINGS, Date.now() + 60_000);
  t.equal(judgement.status, 200, 'within its deadline: judged');
});

t.test("a small body from Node's buffer pool, which cannot be moved to the worker, is copied and judged", async (t) => {
  const offload = new Offload();
  t.teardown(() => offload.close());
  const pooled = Buffer.from(JSON.stringify(loadReview('job-valid')).slice(0, 1000));
  t.not(pooled.byteLength, pooled.buffer.byteLength, 'the body shares its memory with the pool');
  const judgement = await offload.judge('validate', pooled, SETTINGS, Date.now() + 60_000);
  t.equal(judgement.status, 400, 'judged: a truncated review is a bad request');
});

t.test('a burst of 3 MiB reviews with a 1 s timeout: those queued past it get a 503 at once, the rest are judged, and the webhook carries on', async (t) => {
  // The worker started and its code loaded before the burst: its start (most of a second from
  // the TypeScript sources, several on a loaded machine) would otherwise expire the whole burst.
  const offload = new Offload();
  t.equal((await offload.judge('validate', Buffer.from(largeBody), SETTINGS, Date.now() + 60_000)).status, 200, 'the worker is started');
  const app = buildApp({ ...DEFAULT_OPTIONS, nativeSidecars: true, timeoutSeconds: 1, offload });
  t.teardown(() => app.close());
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: 30 }, () => app.inject({ method: 'POST', url: '/native-sidecars', headers: { 'content-type': 'application/json' }, payload: largeBody })),
  );
  const elapsed = performance.now() - started;
  const statuses = answers.map((answer) => answer.statusCode);
  const judged = statuses.filter((status) => status === 200).length;
  const expired = statuses.filter((status) => status === 503).length;
  t.equal(judged + expired, statuses.length, `every answer is 200 or 503 (${statuses.join(' ')})`);
  t.ok(judged >= 1, `${judged} judged`);
  t.ok(expired >= 1, `${expired} dropped after waiting past the timeout`);
  const dropped = answers.find((answer) => answer.statusCode === 503);
  t.match(JSON.parse(dropped!.body), { response: { allowed: false, status: { code: 503, message: /longer than the webhook timeout/ } } }, 'the answer says why');
  t.comment(`30 reviews of ${(largeBody.length / 1024 / 1024).toFixed(2)} MiB: ${judged} judged, ${expired} dropped, all answered in ${elapsed.toFixed(0)} ms`);
  const next = await app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(loadReview('job-valid')) });
  t.equal(next.statusCode, 200, 'an ordinary review after the burst is answered');
});
