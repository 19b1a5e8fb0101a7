// The HTTP layer of the webhook, and the only part that deals with HTTP: bodies, content
// types, size limits, status codes, logs and metrics. The answers come from the pure
// handlers in validate.ts and mutate.ts. Every answer on an admission route, errors included,
// is a well-formed AdmissionReview carrying the request's uid when the body had a readable one.
import type * as http from 'node:http';
import type * as https from 'node:https';
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { Logger as PinoLogger } from 'pino';
import { Registry } from 'prom-client';
import { healthRoutes, type Readiness } from '../health.ts';
import { WEBHOOK_TIMEOUT_SECONDS } from '../config.ts';
import { secureContextOptions } from '../tls/secure-context.ts';
import { clip, policyNeedsNamespaceLabels } from '../policy/index.ts';
import { errored, type AdmissionHandler, type AdmissionSettings, type InjectedSidecarSettings } from './admission.ts';
import type { Judgement } from './judgement.ts';
import { createAdmissionMetrics, type AdmissionMetrics } from './admission-metrics.ts';
import { trackConnections } from './connections.ts';
import { OFFLOAD_BODY_BYTES, Offload, ReviewExpired, WorkerFailure } from './offload.ts';
import type { OwnerEventRecorder } from './owner-events.ts';
import { HANDLERS, judge, review } from './review.ts';
import { ADMISSION_ENDPOINTS, type AdmissionEndpoint } from './routes.ts';

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
  /** Connections open at once (MAX_CONNECTIONS by default); more are closed as they arrive. */
  maxConnections?: number;
  /** The worker that judges large bodies; one of the app's own by default. Closed with the app. */
  offload?: Offload;
  /**
   * What the webhooks read of the cluster in the background (src/kube/pod-mutating-webhooks.ts):
   * its other mutating webhooks for pods (undefined until read), and the nodes whose kubelets run
   * no native sidecars ('unread' until read).
   */
  cluster?: () => Pick<AdmissionSettings, 'podMutatingWebhooks' | 'oldKubelets'>;
  /** The injected-sidecar policy in force and the namespaces' labels, read at each request; none without --injected-sidecars. */
  injectedSidecarsNow?: () => InjectedSidecarSettings;
  /**
   * Reads one namespace's labels from the API server, giving up after timeoutMs (rejects): for a
   * pod whose namespace injectedSidecarsNow's labels lack. Without it, such a pod gets nothing from
   * the entries that select namespaces.
   */
  readNamespaceLabels?: (namespace: string, timeoutMs: number) => Promise<Readonly<Record<string, string>>>;
}

/** The app; its server is an https.Server when AppOptions.https is given. */
export type WebhookApp = FastifyInstance<http.Server | https.Server>;

/**
 * Connections open at once, each costing the server about 60 KiB before its TLS handshake is
 * done: at this many, the webhook stays well within the chart's 384 MiB. The API servers open
 * one per request in flight (HTTP/1.1), a few hundred at most.
 */
export const MAX_CONNECTIONS = 1000;

/** A denial's message in a log line: the answer lists at most a few findings, the log a few KiB of them. */
const MAX_LOGGED_MESSAGE = 2048;

/** The longest wait for a namespace read at admission (never more than half the time left before the API server gives up). */
export const NAMESPACE_READ_TIMEOUT_MS = 2000;

export function buildApp(options: AppOptions & { https: { key: string; cert: string } }): FastifyInstance<https.Server>;
export function buildApp(options: AppOptions): WebhookApp;
export function buildApp(options: AppOptions): WebhookApp {
  const timeouts = serverTimeouts(options.timeoutSeconds ?? WEBHOOK_TIMEOUT_SECONDS);
  // Node's own limits, which count a first request from the connection's start, and its socket
  // timeout, which applies before a first request too: all as long as an idle connection lasts.
  const { idleMs } = timeouts;
  const nodeLimits = { requestTimeout: idleMs, headersTimeout: idleMs, keepAliveTimeout: idleMs, connectionsCheckingInterval: timeouts.checkEveryMs };
  const logging: Pick<FastifyServerOptions, 'logger' | 'loggerInstance'> = isLogger(options.logger) ? { loggerInstance: options.logger } : { logger: options.logger };
  const serverOptions = {
    ...logging,
    bodyLimit: options.bodyLimit,
    connectionTimeout: idleMs,
    keepAliveTimeout: idleMs,
    requestTimeout: idleMs,
    http: nodeLimits,
    // One log line per admission decision instead (below); probes and scrapes stay quiet.
    logController: new LogController({ disableRequestLogging: true }),
    // A request on a kept-alive connection while closing is answered, not refused with a 503
    // (which the API server would count as a failed webhook call).
    return503OnClosing: false,
  };
  // A client that never finishes a TLS handshake is dropped after handshakeMs (Node's default is two minutes).
  const app: WebhookApp = options.https
    ? Fastify({ ...serverOptions, https: { ...secureContextOptions(options.https), ...nodeLimits, handshakeTimeout: timeouts.handshakeMs } })
    : Fastify(serverOptions);
  app.server.maxConnections = options.maxConnections ?? MAX_CONNECTIONS;
  if (options.https) trackConnections(app.server as https.Server, timeouts);

  const registry = options.metrics ?? new Registry();
  const metrics = createAdmissionMetrics(registry);
  const settings: AdmissionSettings = { enforcement: options.enforcement, quickExitImageAllowlist: options.quickExitImageAllowlist, nativeSidecars: options.nativeSidecars ?? false };
  // The webhooks list and the policy change while the app runs: read at each request, where they are kept.
  // Without either, the settings are the same object every time.
  const { cluster, injectedSidecarsNow } = options;
  const settingsNow = (): AdmissionSettings =>
    cluster || injectedSidecarsNow ? { ...settings, ...cluster?.(), ...(injectedSidecarsNow ? { injectedSidecars: injectedSidecarsNow() } : {}) } : settings;
  const offload = options.offload ?? new Offload();
  app.addHook('onClose', () => offload.close());

  void app.register(healthRoutes, { readiness: options.readiness, registry });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (options.draining?.()) reply.header('connection', 'close');
    return payload;
  });

  // Only JSON is accepted; any other content type is an error the route answers itself. The
  // body is parsed by the route, here or in the worker thread.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  /**
   * The labels of a namespace the injected-sidecar policy needed and had not seen (created or
   * labelled a moment before its first pod), read from the API server as kube-apiserver's own
   * namespaceSelector matcher reads one its cache lacks. Undefined when they cannot be read in
   * time: the pod then gets nothing from the entries they decide, which a warning bound to the
   * request and a counter say.
   */
  const namespaceLabelsAtAdmission = async (wanted: { namespace: string; entries: string[] }, request: FastifyRequest, uid: string, deadline: number) => {
    const timeoutMs = Math.min(NAMESPACE_READ_TIMEOUT_MS, Math.max(0, deadline - Date.now()) / 2);
    try {
      if (!options.readNamespaceLabels) throw new Error('no namespace reader');
      return await options.readNamespaceLabels(wanted.namespace, timeoutMs);
    } catch (error) {
      metrics.namespaceLabelsUnread();
      request.log.warn(
        { uid: clip(uid), namespace: clip(wanted.namespace), entries: wanted.entries, timeoutMs, error: clip(error instanceof Error ? error.message : String(error)) },
        "cannot read the labels of the pod's namespace: the entries of the injected-sidecar policy that select namespaces were not applied to it",
      );
      return undefined;
    }
  };

  for (const endpoint of ADMISSION_ENDPOINTS) {
    const send = sender(endpoint, metrics);
    const custom = options.handlers?.[endpoint];
    app.post(
      `/${endpoint}`,
      {
        errorHandler: (error: FastifyError, request, reply) => {
          const tooLarge = error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || (error instanceof WorkerFailure && error.outOfMemory);
          const status = tooLarge ? 413 : error instanceof ReviewExpired ? 503 : (error.statusCode ?? 500) < 500 ? 400 : 500;
          if (status === 500) request.log.error({ err: error }, 'admission handler failed');
          const message = protocolErrorMessage(error, status, options.bodyLimit, request.headers['content-type']);
          // The body was not read (or is in the worker, which failed): no uid to echo.
          void send(request, reply, { status, result: 'error', uid: '', answer: errored(status, message), context: { dryRun: false } });
        },
      },
      async (request, reply) => {
        // No body and no content type: fastify parses nothing, and the judgement says the body is empty.
        const body = (request.body as Buffer | undefined) ?? Buffer.alloc(0);
        // A test's own handler runs here; the default ones in the worker when the body is large.
        // In the worker, a body still queued when the API server stops waiting is dropped unjudged.
        const deadline = Date.now() + timeouts.deadlineMs - reply.elapsedTime;
        const offloaded = !custom && body.length > OFFLOAD_BODY_BYTES;
        const judgeWith = async (settings: AdmissionSettings, bytes: Buffer) => (offloaded ? offload.judge(endpoint, bytes, settings, deadline) : judge(bytes, custom ?? HANDLERS[endpoint], settings));
        const current = settingsNow();
        // The worker takes the body's memory: a copy goes to it when the body may be judged again.
        const again = offloaded && current.injectedSidecars !== undefined && policyNeedsNamespaceLabels(current.injectedSidecars.policy);
        let judgement = await judgeWith(current, again ? Buffer.from(body) : body);
        const wanted = judgement.answer.namespaceLabelsWanted;
        if (wanted && current.injectedSidecars) {
          const labels = await namespaceLabelsAtAdmission(wanted, request, judgement.uid, deadline);
          if (labels) judgement = await judgeWith({ ...current, injectedSidecars: { ...current.injectedSidecars, namespaceLabels: new Map([[wanted.namespace, labels]]) } }, body);
        }
        if (judgement.failure) request.log.error({ err: judgement.failure }, 'admission handler failed');
        // Started here, finished in the background: the answer never waits for it.
        if (judgement.answer.ownerNotice) options.ownerEvents?.record(judgement.answer.ownerNotice);
        if (judgement.answer.migration) metrics.migration(judgement.answer.migration);
        return send(request, reply, judgement);
      },
    );
  }
  return app;
}

/** Go's default HTTP transport, which the API server's webhook client uses, drops a connection idle for 90 s. */
const CLIENT_IDLE_TIMEOUT_MS = 90_000;

/**
 * The HTTP server's limits, from the webhooks' timeoutSeconds: a TLS handshake, then a request
 * (headers and body, from its first byte to its last), must arrive within it, since the API server
 * has given up by then; a slow or stalled sender (a client other than the API server) cannot hold a
 * connection longer. The request's deadline is kept by connections.ts, since Node's own counts a
 * connection's first request from the connection's start.
 *
 * An idle connection, whether it has carried requests or none yet, stays open longer than the API
 * server's client keeps it, so the client, never the server, closes it: a server that closes first
 * races the client's next request on that connection, and a request lost that way is a failed
 * webhook call.
 */
export function serverTimeouts(timeoutSeconds: number) {
  const ms = timeoutSeconds * 1000;
  return {
    /** The time a request has, from its first byte until it has arrived whole (connections.ts). */
    deadlineMs: ms,
    checkEveryMs: Math.min(1000, ms),
    handshakeMs: ms,
    /** How long an idle connection, used or not yet, stays open. */
    idleMs: CLIENT_IDLE_TIMEOUT_MS + 5000,
  };
}

type Send = (request: FastifyRequest, reply: FastifyReply, judgement: Judgement) => FastifyReply;

/** Sends the AdmissionReview, counts it, and logs one line bound to the request (never the object). */
function sender(endpoint: AdmissionEndpoint, metrics: AdmissionMetrics): Send {
  return (request, reply, { status, result, uid, answer, context, payload }) => {
    const { response } = answer;
    metrics.observe(endpoint, result, reply.elapsedTime / 1000);
    // Logged clipped: these come from the body, and a caller other than the API server can make them huge.
    // One object rather than a child logger: a child per request costs more than the line itself.
    const message = response.status?.message;
    const line = { uid: clip(uid), ...context, endpoint, result, status, code: response.status?.code, message: message && clip(message, MAX_LOGGED_MESSAGE), warnings: response.warnings?.length ?? 0 };
    if (result === 'error') request.log.warn(line, 'admission request rejected');
    else request.log.info(line, 'admission decision');
    reply.code(status);
    return payload ? reply.type('application/json; charset=utf-8').send(payload) : reply.send(review(uid, answer));
  };
}

function protocolErrorMessage(error: FastifyError, status: number, bodyLimit: number, contentType: string | undefined): string {
  if (error instanceof WorkerFailure && error.outOfMemory) return 'request body takes more memory to check than the webhook allows; no pod the API server accepts is this costly';
  if (error instanceof ReviewExpired) return error.message;
  if (status === 413) return `request body is larger than the limit of ${bodyLimit} bytes; raise --body-limit if pods this large are expected`;
  if (status === 500) return 'internal error while handling the admission request';
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return `Content-Type must be application/json, got ${contentType === undefined ? 'none' : JSON.stringify(contentType.slice(0, 100))}`;
  return error.message;
}

function isLogger(logger: AppOptions['logger']): logger is PinoLogger {
  return typeof logger === 'object' && logger !== null && typeof (logger as Partial<PinoLogger>).child === 'function';
}
