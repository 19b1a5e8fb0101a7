// The probe and metrics routes of src/health.ts, on the plain-HTTP probe app, called through
// fastify's inject (no port is opened): liveness whatever the readiness, readiness with its
// reason, and the registry's metrics in its own content type.
import { Counter, Registry } from 'prom-client';
import t, { type Test } from 'tap';
import { buildProbeApp, type Readiness } from '../src/health.ts';

function probeApp(t: Test, readiness: Readiness, registry = new Registry()) {
  const app = buildProbeApp(readiness, registry);
  t.teardown(() => app.close());
  return app;
}

t.test('/healthz: ok while the process serves, ready or not', async (t) => {
  const response = await probeApp(t, () => ({ ready: false, reason: 'no leader yet' })).inject('/healthz');
  t.equal(response.statusCode, 200);
  t.equal(response.body, 'ok');
});

t.test('/readyz: asked at every request; 503 with the reason, or starting when none is given; 200 once ready', async (t) => {
  const states = [{ ready: false, reason: 'caches not synced' }, { ready: false }, { ready: true }];
  const app = probeApp(t, () => states.shift()!);
  const answers = [];
  for (let i = 0; i < 3; i++) {
    const response = await app.inject('/readyz');
    answers.push([response.statusCode, response.body]);
  }
  t.same(answers, [[503, 'not ready: caches not synced'], [503, 'not ready: starting'], [200, 'ok']]);
  t.equal(states.length, 0);
});

t.test("/metrics: the registry's metrics, in the registry's content type", async (t) => {
  const registry = new Registry();
  new Counter({ name: 'probe_test_total', help: 'a counter of this test', registers: [registry] }).inc(3);
  const response = await probeApp(t, () => ({ ready: true }), registry).inject('/metrics');
  t.equal(response.statusCode, 200);
  t.equal(response.headers['content-type'], registry.contentType);
  t.match(response.body, /^probe_test_total 3$/m);
});

t.test('nothing else is served', async (t) => {
  t.equal((await probeApp(t, () => ({ ready: true })).inject('/')).statusCode, 404);
});
