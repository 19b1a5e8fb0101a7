// The time an admission request takes grows with its body no faster than linearly, whatever
// its shape (test/support/hostile-reviews.ts): each shape is judged at 1x, 10x and 100x a count,
// 100x being the most that fits in the API server's 3 MiB request limit, for every endpoint. The
// time per unit (container, env entry, character, ...) may not grow from one size to the next
// by more than GROWTH_LIMIT: a quadratic step grows it about tenfold, a linear one not at all.
//
// What is timed is judge() (src/webhook/review.ts: parse, check, decide), which the app runs
// for every body, on the event loop or in its worker thread; the HTTP layer around it only
// collects the body. Not a timing assertion against a clock: a ratio of two times measured in
// this thread seconds apart, each the best of several runs, and a ratio over the limit is
// measured again before it fails, so that a loaded machine (two shared cores) does not fail it.
// A run judges the body as many times as last RUN_MS, and is timed by the thread's CPU time
// (when it lasts longer than LONG_RUN_MS, as it does but on a clock that jumped): on a loaded
// machine a run of 1 ms fits between two preemptions and a run of 10 ms often does not, which
// would make the larger bodies seem to cost more per unit. (Linux counts a thread's CPU time in
// clock ticks of 4 ms, too coarse for a single short judgement.) The names judged are forgotten
// before each judgement (src/policy/near-miss.ts remembers
// them across requests): a body of a few hundred names would otherwise be judged from memory and
// a larger one, with more names than are kept, not, which is no measure of the work per unit.
import t from 'tap';
import { HOSTILE_SHAPES, countWithin, hostileBody } from '../support/hostile-reviews.ts';
import { ADMISSION_ENDPOINTS, type AdmissionEndpoint } from '../../src/webhook/routes.ts';
import { HANDLERS, judge } from '../../src/webhook/review.ts';
import { forgetJudgedNames } from '../../src/policy/near-miss.ts';
import type { AdmissionSettings } from '../../src/webhook/admission.ts';

const GROWTH_LIMIT = 3;
/** Timed runs at 1x, 10x and 100x: the best of them is the time. */
const RUNS = [10, 8, 5];
const ATTEMPTS = 5;
const SETTINGS: AdmissionSettings = { enforcement: 'deny', quickExitImageAllowlist: [], nativeSidecars: true };

t.setTimeout(600_000);

/** Runs longer than this are timed by the thread's CPU time, whose ticks are then a small part of them. */
const LONG_RUN_MS = 20;
/**
 * A timed run judges the body as many times as last about this long: every size is then timed
 * alike, by the thread's CPU time, which a preemption does not inflate. Timed by the wall clock,
 * a 1x judgement (a fraction of a millisecond) fits between two preemptions on a loaded machine
 * and a 10x one (a few milliseconds) often does not, which made the 10x seem to cost more per unit.
 */
const RUN_MS = 30;

/** One judgement, which must be an answer, not a failure; the names judged are forgotten first. */
function judgeOnce(endpoint: AdmissionEndpoint, body: Buffer): void {
  forgetJudgedNames();
  const { status } = judge(body, HANDLERS[endpoint], SETTINGS);
  if (status !== 200 && status !== 400) throw new Error(`${endpoint}: status ${status}`);
}

/** The best of `runs` timed runs of `body` by `endpoint`'s handler, in ms per judgement. */
function bestTime(endpoint: AdmissionEndpoint, body: Buffer, runs: number): number {
  const started = performance.now();
  judgeOnce(endpoint, body);
  const repeat = Math.max(1, Math.ceil(RUN_MS / Math.max(performance.now() - started, 0.01)));
  let best = Number.POSITIVE_INFINITY;
  for (let run = 0; run < runs; run++) {
    const runStarted = performance.now();
    const cpu = process.threadCpuUsage();
    for (let judged = 0; judged < repeat; judged++) judgeOnce(endpoint, body);
    const wall = performance.now() - runStarted;
    const used = process.threadCpuUsage(cpu);
    best = Math.min(best, (wall <= LONG_RUN_MS ? wall : Math.min(wall, (used.user + used.system) / 1000)) / repeat);
  }
  return best;
}

// Warm-up: the JIT.
for (const endpoint of ADMISSION_ENDPOINTS) bestTime(endpoint, Buffer.from(hostileBody(HOSTILE_SHAPES[0]!, countWithin(HOSTILE_SHAPES[0]!))), 2);

for (const shape of HOSTILE_SHAPES) {
  t.test(`${shape.id}: time per unit does not grow with size`, async (t) => {
    const largest = countWithin(shape);
    const counts = [Math.max(1, Math.round(largest / 100)), Math.max(1, Math.round(largest / 10)), largest];
    const bodies = counts.map((count) => Buffer.from(hostileBody(shape, count)));
    t.ok(bodies[2]!.length <= 3 * 1024 * 1024, `the largest body fits the API server's limit (${(bodies[2]!.length / 1024 / 1024).toFixed(2)} MiB, ${largest} ${shape.unit})`);
    for (const endpoint of ADMISSION_ENDPOINTS) {
      let growth: number[] = [];
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        const times: number[] = [];
        for (const [index, body] of bodies.entries()) times.push(bestTime(endpoint, body, RUNS[index]!));
        const perUnit = times.map((time, index) => time / counts[index]!);
        growth = [perUnit[1]! / perUnit[0]!, perUnit[2]! / perUnit[1]!];
        t.comment(
          `${shape.id} /${endpoint}: ${counts.map((count, index) => `${count} in ${(bodies[index]!.length / 1024).toFixed(0)} KiB: ${times[index]!.toFixed(1)} ms`).join(', ')}; ` +
            `per unit ${perUnit.map((value) => `${(value * 1000).toFixed(2)} us`).join(' / ')}; growth ${growth.map((value) => `${value.toFixed(2)}x`).join(', ')}${attempt > 1 ? ` (attempt ${attempt})` : ''}`,
        );
        if (growth.every((value) => value <= GROWTH_LIMIT)) break;
      }
      t.ok(growth[0]! <= GROWTH_LIMIT, `/${endpoint}: 1x to 10x, the time per unit grows ${growth[0]!.toFixed(2)}x (limit ${GROWTH_LIMIT}x)`);
      t.ok(growth[1]! <= GROWTH_LIMIT, `/${endpoint}: 10x to 100x, the time per unit grows ${growth[1]!.toFixed(2)}x (limit ${GROWTH_LIMIT}x)`);
    }
  });
}
