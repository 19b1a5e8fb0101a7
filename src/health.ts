// /healthz, /readyz and /metrics, served by the webhook's HTTPS server and by the plain-HTTP
// probe listener (--probe-address) that a watcher-only process uses.
import Fastify, { type FastifyInstance, type FastifyPluginCallback } from 'fastify';
import type { Registry } from 'prom-client';

export type Readiness = () => { ready: boolean; reason?: string };

/** A fastify plugin: `app.register(healthRoutes, { readiness, registry })`. */
export const healthRoutes: FastifyPluginCallback<{ readiness: Readiness; registry: Registry }> = (app, { readiness, registry }, done) => {
  app.get('/healthz', () => 'ok');
  app.get('/readyz', (_request, reply) => {
    const { ready, reason } = readiness();
    if (!ready) reply.code(503);
    return ready ? 'ok' : `not ready: ${reason ?? 'starting'}`;
  });
  app.get('/metrics', (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
  done();
};

/** The plain-HTTP probe and metrics listener. */
export function buildProbeApp(readiness: Readiness, registry: Registry): FastifyInstance {
  const app = Fastify({ logger: false });
  void app.register(healthRoutes, { readiness, registry });
  return app;
}
