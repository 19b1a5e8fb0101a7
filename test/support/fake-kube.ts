// Fakes of client-node's API clients for unit tests. A FakeApi stands for one generated API class
// (CoreV1Api, CustomObjectsApi, BatchV1Api, or any other): each method answers as scripted (values
// and errors in turn, then a function of the request), every call is recorded, and an API error is
// thrown as client-node throws it: an ApiException whose body is the API server's Status as JSON
// text, which src/kube/api-errors.ts reads. A FakePodListWatch stands for the pod lists and
// watches of src/watcher/reflector.ts, each watch a stream the test writes events to.
import { ApiException, AdmissionregistrationV1Api, BatchV1Api, CoreV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import type { PodListPage, PodListWatch, WatchQuery } from '../../src/watcher/reflector.ts';

/** The names of T's methods that return a promise: those of a generated API class. */
export type MethodName<T> = { [K in keyof T]: T[K] extends (...args: never[]) => Promise<unknown> ? K : never }[keyof T] & string;
/** The request object a method takes (client-node's object-parameter style). */
export type RequestOf<T, K extends MethodName<T>> = T[K] extends (request: infer R, ...rest: never[]) => unknown ? R : never;
/** What a method resolves with. */
export type ResultOf<T, K extends MethodName<T>> = T[K] extends (...args: never[]) => Promise<infer R> ? R : never;

/** An object with only some of its fields, at any depth: an answer needs only the fields the code under test reads. */
export type Partly<T> = T extends Date | ((...args: never[]) => unknown) ? T : T extends ReadonlyArray<infer E> ? Array<Partly<E>> : T extends object ? { [K in keyof T]?: Partly<T[K]> } : T;

/** One scripted answer: a value to resolve with, an Error to reject with, or a promise (an answer that takes its time). */
export type Answer<R> = Partly<R> | Error | Promise<Partly<R>>;

export interface RecordedCall {
  method: string;
  request: unknown;
  /** The per-request configuration (headers such as a patch's Content-Type), when one was given. */
  options: unknown;
}

/** Reason of the API server's Status for the codes tests use; others say nothing more than their code. */
const STATUS_REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Expired',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/**
 * An error answer as client-node throws it: an ApiException with the HTTP status as `code` and the
 * API server's Status (message, reason, code) as its JSON body text.
 */
export function apiError(code: number, message = `HTTP ${code}`, reason = STATUS_REASONS[code] ?? 'Unknown'): ApiException<string> {
  const status = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
  return new ApiException(code, 'Unknown API Status Code!', JSON.stringify(status), { 'content-type': 'application/json' });
}

/**
 * A fake of the API class `Api`: `api` is typed (and an instance) as the real class, for the code
 * under test; `answer` and `handle` script it, `requests` and `calls` tell what it was asked. A
 * method called without an answer left or a handler rejects, naming itself.
 */
export class FakeApi<T extends object> {
  readonly api: T;
  /** Every call, in order, whatever the method. */
  readonly calls: RecordedCall[] = [];
  private readonly answers = new Map<string, Array<Answer<unknown>>>();
  private readonly handlers = new Map<string, (request: unknown) => unknown>();

  constructor(Api: abstract new (...args: never[]) => T) {
    const methods = new Set(Object.getOwnPropertyNames(Api.prototype));
    // Only the real class's methods are there (code that probes for others finds nothing), each
    // answering from the script.
    this.api = new Proxy(Object.create(Api.prototype as object) as T, {
      get: (target, property, receiver) => {
        if (typeof property !== 'string' || !methods.has(property) || property === 'constructor') return Reflect.get(target, property, receiver);
        return (request: unknown, options?: unknown) => this.call(Api.name, { method: property, request, options });
      },
    });
  }

  /** The next calls of `method` answer with these, one each in turn, before its handler (if any). */
  answer<K extends MethodName<T>>(method: K, ...answers: Array<Answer<ResultOf<T, K>>>): this {
    this.answers.set(method, [...(this.answers.get(method) ?? []), ...answers]);
    return this;
  }

  /** How `method` answers once its scripted answers are used up; a thrown error rejects the call. */
  handle<K extends MethodName<T>>(method: K, handler: (request: RequestOf<T, K>) => Partly<ResultOf<T, K>> | Promise<Partly<ResultOf<T, K>>>): this {
    this.handlers.set(method, handler as (request: unknown) => unknown);
    return this;
  }

  /** The requests `method` was called with, in order. */
  requests<K extends MethodName<T>>(method: K): Array<RequestOf<T, K>> {
    return this.calls.filter((call) => call.method === method).map((call) => call.request as RequestOf<T, K>);
  }

  private async call(kind: string, call: RecordedCall): Promise<unknown> {
    this.calls.push(call);
    const { method, request } = call;
    const answer = this.answers.get(method)?.shift();
    if (answer !== undefined) {
      if (answer instanceof Error) throw answer;
      return answer;
    }
    const handler = this.handlers.get(method);
    if (!handler) throw new Error(`${kind}.${method}: no answer scripted for ${JSON.stringify(request)}`);
    return handler(request);
  }
}

export const fakeCoreV1Api = () => new FakeApi(CoreV1Api);
export const fakeCustomObjectsApi = () => new FakeApi(CustomObjectsApi);
export const fakeBatchV1Api = () => new FakeApi(BatchV1Api);
export const fakeAdmissionregistrationV1Api = () => new FakeApi(AdmissionregistrationV1Api);

/** One watch the reflector opened: the test sends it events and ends it, as the API server would. */
export class FakeWatch {
  readonly path: string;
  readonly query: WatchQuery;
  readonly controller = new AbortController();
  private readonly onEvent: (type: string, object: Record<string, unknown>) => void;
  private readonly onDone: (error: unknown) => void;
  private done = false;

  constructor(path: string, query: WatchQuery, onEvent: (type: string, object: Record<string, unknown>) => void, onDone: (error: unknown) => void) {
    this.path = path;
    this.query = query;
    this.onEvent = onEvent;
    this.onDone = onDone;
    // client-node's Watch ends with an AbortError when its caller aborts it.
    this.controller.signal.addEventListener('abort', () => this.end(new DOMException('This operation was aborted', 'AbortError')));
  }

  get aborted(): boolean {
    return this.controller.signal.aborted;
  }

  get ended(): boolean {
    return this.done;
  }

  /** A watch event line: ADDED, MODIFIED, DELETED, BOOKMARK, or ERROR with a Status. */
  send(type: string, object: V1Pod | Record<string, unknown>): void {
    if (!this.done) this.onEvent(type, object as Record<string, unknown>);
  }

  /** The connection closes: cleanly (no error, as at the server's timeout) or with an error. */
  end(error: unknown = null): void {
    if (this.done) return;
    this.done = true;
    this.onDone(error);
  }
}

/** An error as client-node's Watch reports an HTTP status other than 200 when the watch starts. */
export function watchRefused(statusCode: number): Error {
  return Object.assign(new Error(`HTTP ${statusCode}`), { statusCode });
}

type ListQuery = Record<string, string | number | undefined>;

/**
 * The pod lists and watches of one or more reflectors. Lists answer with the scripted pages (a
 * page, or an Error) in turn, then from the list handler; watches open a FakeWatch each, unless a
 * refusal (watchRefused) is scripted for the next one.
 */
export class FakePodListWatch implements PodListWatch {
  readonly lists: Array<{ path: string; query: ListQuery }> = [];
  readonly watches: FakeWatch[] = [];
  private readonly pages: Array<PodListPage | Error | Promise<PodListPage>> = [];
  private listHandler: ((path: string, query: ListQuery) => PodListPage) | undefined;
  private readonly refusals: Error[] = [];

  /** The next lists answer with these, one page (or error) each. */
  answerList(...pages: Array<PodListPage | Error | Promise<PodListPage>>): this {
    this.pages.push(...pages);
    return this;
  }

  /** How lists answer once the scripted pages are used up (a thrown error fails the list). */
  handleList(handler: (path: string, query: ListQuery) => PodListPage): this {
    this.listHandler = handler;
    return this;
  }

  /** The next watches are refused with these errors when they start. */
  refuseWatch(...errors: Error[]): this {
    this.refusals.push(...errors);
    return this;
  }

  /** The watch opened last. */
  get latest(): FakeWatch | undefined {
    return this.watches.at(-1);
  }

  /** The watch opened last on `path`. */
  watchOf(path: string): FakeWatch | undefined {
    return this.watches.findLast((watch) => watch.path === path);
  }

  async list(path: string, query: ListQuery): Promise<PodListPage> {
    this.lists.push({ path, query });
    const page = this.pages.shift();
    if (page instanceof Error) throw page;
    if (page !== undefined) return page;
    if (!this.listHandler) throw new Error(`list ${path}: no page scripted`);
    return this.listHandler(path, query);
  }

  async watch(path: string, query: WatchQuery, onEvent: (type: string, object: Record<string, unknown>) => void, onDone: (error: unknown) => void): Promise<AbortController> {
    const watch = new FakeWatch(path, query, onEvent, onDone);
    this.watches.push(watch);
    const refusal = this.refusals.shift();
    // As client-node's Watch: a refusal ends the watch before the call resolves.
    if (refusal) watch.end(refusal);
    return watch.controller;
  }
}

/** A page of pods as the API server lists them. */
export function podPage(pods: V1Pod[], resourceVersion: string, continueToken?: string): PodListPage {
  return { items: pods, metadata: { resourceVersion, ...(continueToken ? { continue: continueToken } : {}) } };
}
