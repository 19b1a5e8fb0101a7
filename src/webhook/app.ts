// The HTTP layer of the webhook, and the only part that deals with HTTP: bodies, content
// types, size limits, status codes, logs and metrics. The decisions come from the pure
// handlers in validate.ts and mutate.ts. Every answer on an admission route, errors included,
// is a well-formed AdmissionReview carrying the request's uid when the body had a readable one.
import type * as http from 'node:http';
import type * as https from 'node:https';
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { Logger as PinoLogger } from 'pino';
import { Registry } from 'prom-client';
import { healthRoutes, type Readiness } from '../health.ts';
import { WEBHOOK_TIMEOUT_SECONDS } from '../config.ts';
import { isRecord } from '../policy/index.ts';
import { errored, review, type AdmissionDecision, type AdmissionRequest } from './admission.ts';
import { createAdmissionMetrics, ADMISSION_ENDPOINTS, type AdmissionEndpoint, type AdmissionMetrics, type AdmissionResult } from './metrics.ts';
import { mutate, mutateNativeSidecars } from './mutate.ts';
import type { OwnerEventRecorder } from './owner-events.ts';
import { AJV_OPTIONS, admissionReviewSchema, describeSchemaError, parseJsonBody } from './schema.ts';
import { validate, type AdmissionSettings, type Verdict } from './validate.ts';

export interface AppOptions extends AdmissionSettings {
  /** Largest request body in bytes; larger ones get a 413. */
  bodyLimit: number;
  /** pino options (false in tests), or a pino logger to use as it is (fastify needs pino's API, not only the project's Logger). */
  logger: FastifyServerOptions['logger'] | PinoLogger;
  /** The webhooks' registered timeoutSeconds: the API server abandons a call after it, so the server does too. */
  timeoutSeconds?: number;
  /** PEM key and certificate: serve HTTPS (TLS 1.2 at least). Swap them later with app.server.setSecureContext. */
  https?: { key: string; cert: string };
  /** /readyz answers 503 with the reason until this says ready (certificate loaded, ...). */
  readiness: Readiness;
  /** True once shutdown has begun: every response then closes its connection, so clients move to another replica. */
  draining?: () => boolean;
  /** Where the metrics go; a fresh registry per app by default. */
  metrics?: Registry;
  /** The handlers behind the routes; the pure validate and mutate by default. */
  handlers?: Partial<Record<AdmissionEndpoint, AdmissionHandler>>;
  /** Where the events for the owners of objects admitted despite errors go; none without it. */
  ownerEvents?: Pick<OwnerEventRecorder, 'record'>;
}

/** The app; its server is an https.Server when AppOptions.https is given. */
export type WebhookApp = FastifyInstance<http.Server | https.Server>;

export type AdmissionHandler = (request: AdmissionRequest, settings: AdmissionSettings) => Verdict;

const HANDLERS: Record<AdmissionEndpoint, AdmissionHandler> = {
  validate,
  mutate,
  'native-sidecars': mutateNativeSidecars,
};

export function buildApp(options: AppOptions & { https: { key: string; cert: string } }): FastifyInstance<https.Server>;
export function buildApp(options: AppOptions): WebhookApp;
export function buildApp(options: AppOptions): WebhookApp {
  const timeouts = serverTimeouts(options.timeoutSeconds ?? WEBHOOK_TIMEOUT_SECONDS);
  const logging: Pick<FastifyServerOptions, 'logger' | 'loggerInstance'> = isLogger(options.logger) ? { loggerInstance: options.logger } : { logger: options.logger };
  const serverOptions = {
    ...logging,
    bodyLimit: options.bodyLimit,
    connectionTimeout: timeouts.connectionTimeout,
    keepAliveTimeout: timeouts.keepAliveTimeout,
    requestTimeout: timeouts.requestTimeout,
    http: timeouts,
    // One log line per admission decision instead (below); probes and scrapes stay quiet.
    logController: new LogController({ disableRequestLogging: true }),
    ajv: { customOptions: AJV_OPTIONS },
    // A request on a kept-alive connection while closing is answered, not refused with a 503
    // (which the API server would count as a failed webhook call).
    return503OnClosing: false,
  };
  const app: WebhookApp = options.https
    ? Fastify({ ...serverOptions, https: { ...options.https, ...timeouts, minVersion: 'TLSv1.2' } })
    : Fastify(serverOptions);

  const registry = options.metrics ?? new Registry();
  const metrics = createAdmissionMetrics(registry);
  const settings: AdmissionSettings = { enforcement: options.enforcement, quickExitImageAllowlist: options.quickExitImageAllowlist, nativeSidecars: options.nativeSidecars ?? false };

  void app.register(healthRoutes, { readiness: options.readiness, registry });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (options.draining?.()) reply.header('connection', 'close');
    return payload;
  });

  // Only JSON is accepted; any other content type is an error the route answers itself.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(String(body)));
    } catch (error) {
      done(error as Error);
    }
  });

  for (const endpoint of ADMISSION_ENDPOINTS) {
    const answer = answerWith(endpoint, metrics);
    app.post(
      `/${endpoint}`,
      {
        schema: { body: admissionReviewSchema },
        errorHandler: (error: FastifyError, request, reply) => {
          const status = error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? 413 : (error.statusCode ?? 500) < 500 ? 400 : 500;
          if (status === 500) request.log.error({ err: error }, 'admission handler failed');
          const message = protocolErrorMessage(error, status, options.bodyLimit, request.headers['content-type']);
          void answer(request, reply, 'error', errored(status, message), status);
        },
      },
      async (request, reply) => {
        const handle = options.handlers?.[endpoint] ?? HANDLERS[endpoint];
        const { ownerNotice, migration, ...decision } = handle((request.body as { request: AdmissionRequest }).request, settings);
        // Started here, finished in the background: the answer never waits for it.
        if (ownerNotice) options.ownerEvents?.record(ownerNotice);
        if (migration) metrics.migration(migration);
        const result: AdmissionResult = !decision.allowed ? 'denied' : decision.patch ? 'patched' : 'allowed';
        return answer(request, reply, result, decision, 200);
      },
    );
  }
  return app;
}

/** Go's default HTTP transport, which the API server's webhook client uses, drops a connection idle for 90 s. */
const CLIENT_IDLE_TIMEOUT_MS = 90_000;

/**
 * The HTTP server's limits, from the webhooks' timeoutSeconds: a request (headers and body) must
 * arrive within it, and a connection silent that long before its first request is closed, since
 * the API server has given up by then; a slow or stalled sender (a client other than the API
 * server) cannot hold a connection longer. An idle kept-alive connection stays open longer than
 * the API server's client keeps it, so the client, never the server, closes it: a server that
 * closes first races the client's next request on it.
 */
export function serverTimeouts(timeoutSeconds: number) {
  const ms = timeoutSeconds * 1000;
  return {
    requestTimeout: ms,
    headersTimeout: ms,
    connectionTimeout: ms,
    keepAliveTimeout: CLIENT_IDLE_TIMEOUT_MS + 5000,
    // Node checks requestTimeout and headersTimeout every connectionsCheckingInterval (30 s by default).
    connectionsCheckingInterval: Math.min(1000, ms),
  };
}

type Answer = (request: FastifyRequest, reply: FastifyReply, result: AdmissionResult, decision: AdmissionDecision, status: number) => FastifyReply;

/** Sends the AdmissionReview, counts it, and logs one line bound to the request (never the object). */
function answerWith(endpoint: AdmissionEndpoint, metrics: AdmissionMetrics): Answer {
  return (request, reply, result, decision, status) => {
    const { uid, ...context } = requestContext(request.body);
    metrics.observe(endpoint, result, reply.elapsedTime / 1000);
    // Logged clipped: these come from the body, and a caller other than the API server can make them huge.
    // One object rather than a child logger: a child per request costs more than the line itself.
    const line = { uid: clip(uid), ...context, endpoint, result, status, code: decision.status?.code, message: decision.status?.message, warnings: decision.warnings?.length ?? 0 };
    if (result === 'error') request.log.warn(line, 'admission request rejected');
    else request.log.info(line, 'admission decision');
    return reply.code(status).send(review(uid, decision));
  };
}

/** The identifying fields of a body that may be anything (it failed validation when an error is answered). */
function requestContext(body: unknown) {
  const request = isRecord(body) && isRecord(body.request) ? body.request : {};
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const clipped = (value: unknown) => (typeof value === 'string' ? clip(value) : undefined);
  return {
    uid: text(request.uid) ?? '',
    namespace: clipped(request.namespace),
    name: clipped(request.name),
    operation: clipped(request.operation),
    kind: isRecord(request.kind) ? clipped(request.kind.kind) : undefined,
    dryRun: request.dryRun === true,
  };
}

/** Kubernetes names are at most 253 characters; anything longer is cut for the logs. */
function clip(value: string, max = 253): string {
  return value.length > max ? `${value.slice(0, max)}...` : value;
}

function protocolErrorMessage(error: FastifyError, status: number, bodyLimit: number, contentType: string | undefined): string {
  if (status === 413) return `request body is larger than the limit of ${bodyLimit} bytes; raise --body-limit if pods this large are expected`;
  if (status === 500) return 'internal error while handling the admission request';
  if (error.validation) return describeSchemaError(error.validation);
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return `Content-Type must be application/json, got ${contentType === undefined ? 'none' : JSON.stringify(contentType.slice(0, 100))}`;
  return error.message;
}

function isLogger(logger: AppOptions['logger']): logger is PinoLogger {
  return typeof logger === 'object' && logger !== null && typeof (logger as Partial<PinoLogger>).child === 'function';
}
