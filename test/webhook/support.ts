// Helpers for the webhook tests: fixtures loaded fresh per test, an app with test settings,
// posting AdmissionReviews, and applying the JSON Patch the webhook returns.
import { readdirSync, readFileSync } from 'node:fs';
import type { AdmissionRequest, AdmissionReview } from '../../src/webhook/admission.ts';
import { buildApp, type AppOptions, type WebhookApp } from '../../src/webhook/app.ts';
import type { JsonPatchOperation } from '../../src/webhook/json-patch.ts';
import type { AdmissionEndpoint } from '../../src/webhook/routes.ts';

/** A fixture: an AdmissionReview whose objects the tests reshape freely. */
export interface FixtureReview {
  apiVersion: string;
  kind: string;
  request: Omit<AdmissionRequest, 'object' | 'oldObject'> & { object: any; oldObject?: any; [field: string]: unknown };
}

const FIXTURES = new URL('../fixtures/admission/', import.meta.url);

/** Read from disk on every call, so no test sees another's changes. */
export function loadReview(name: string): FixtureReview {
  return JSON.parse(readFileSync(new URL(`${name}.json`, FIXTURES), 'utf8')) as FixtureReview;
}

export const DEFAULT_OPTIONS: AppOptions = {
  enforcement: 'deny',
  quickExitImageAllowlist: [],
  bodyLimit: 8 * 1024 * 1024,
  logger: false,
  readiness: () => ({ ready: true }),
};

export function testApp(options: Partial<AppOptions> = {}): WebhookApp {
  return buildApp({ ...DEFAULT_OPTIONS, ...options });
}

export interface Answer {
  statusCode: number;
  contentType: string | undefined;
  review: AdmissionReview;
}

/** POSTs a review (an object is sent as JSON, a string as it is) and parses the answer. */
export async function post(
  app: WebhookApp,
  endpoint: AdmissionEndpoint,
  body: unknown,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): Promise<Answer> {
  const response = await app.inject({ method: 'POST', url: `/${endpoint}`, headers, payload: typeof body === 'string' ? body : JSON.stringify(body) });
  return { statusCode: response.statusCode, contentType: response.headers['content-type'], review: JSON.parse(response.body) as AdmissionReview };
}

/** The pod spec of a Job fixture, moved into a Pod, Job or CronJob review of the same request. */
export function asKind(review: FixtureReview, kind: 'Pod' | 'Job' | 'CronJob'): FixtureReview {
  const spec = review.request.object.spec.template.spec;
  // The template's annotations (sidecars named by annotation) go where each kind keeps them.
  const annotations: Record<string, string> = review.request.object.spec.template.metadata?.annotations ?? {};
  const template = Object.keys(annotations).length > 0 ? { metadata: { annotations }, spec } : { spec };
  const metadata = { name: review.request.name, namespace: review.request.namespace };
  const objects = {
    // Strict, so that restartPolicy Always is an error for the three kinds alike.
    Pod: { apiVersion: 'v1', kind: 'Pod', metadata: { ...metadata, annotations: { ...annotations, 'sidecar-terminator.io/validation': 'strict' } }, spec },
    Job: { apiVersion: 'batch/v1', kind: 'Job', metadata, spec: { template } },
    CronJob: { apiVersion: 'batch/v1', kind: 'CronJob', metadata, spec: { schedule: '@daily', jobTemplate: { spec: { template } } } },
  };
  const group = kind === 'Pod' ? '' : 'batch';
  return { ...review, request: { ...review.request, kind: { group, version: 'v1', kind }, object: objects[kind] } };
}

export const FIELD_PREFIX = { Pod: 'spec', Job: 'spec.template.spec', CronJob: 'spec.jobTemplate.spec.template.spec' } as const;

/** Owners as their controllers set them: a Job's on its pods, a CronJob's on its Jobs. */
export const OWNERS = {
  Job: { apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-29120', uid: '0f7c1a52-5d2e-4c43-9d47-8b1e3b1f2a10', controller: true, blockOwnerDeletion: true },
  CronJob: { apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: '5b2d7e4f-9a61-4f0e-8c3b-2e6d1f4a7c55', controller: true, blockOwnerDeletion: true },
} as const;

/** The review's object as its controller creates it: with a controller ownerReference. */
export function createdBy(review: FixtureReview, owner: (typeof OWNERS)[keyof typeof OWNERS]): FixtureReview {
  const copy = structuredClone(review);
  copy.request.object.metadata = { ...copy.request.object.metadata, ownerReferences: [owner] };
  return copy;
}

/** Every fixture, by name, as it is and as a Job's controller would create it. */
export function everyFixture(): Array<[string, FixtureReview]> {
  const names = readdirSync(FIXTURES).filter((name) => name.endsWith('.json')).map((name) => name.replace(/\.json$/, ''));
  return names.flatMap((name): Array<[string, FixtureReview]> => [[name, loadReview(name)], [name, createdBy(loadReview(name), OWNERS.Job)]]);
}

/** Decodes the base64 JSON Patch of a response. */
export function patchOf(review: AdmissionReview): JsonPatchOperation[] {
  return JSON.parse(Buffer.from(review.response?.patch ?? '', 'base64').toString('utf8')) as JsonPatchOperation[];
}

/** RFC 6902 add/remove/replace on objects, as the API server applies them; anything else throws. */
export function applyPatch(document: unknown, operations: readonly JsonPatchOperation[]): any {
  let result: any = structuredClone(document);
  for (const operation of operations) {
    const segments = operation.path
      .split('/')
      .slice(1)
      .map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'));
    const key = segments.pop();
    if (key === undefined) {
      if (operation.op !== 'replace') throw new Error(`cannot ${operation.op} the root`);
      result = operation.value;
      continue;
    }
    const parent = segments.reduce((node, segment) => {
      if (typeof node !== 'object' || node === null || !Object.hasOwn(node, segment)) throw new Error(`no ${segment} in ${operation.path}`);
      return node[segment];
    }, result);
    if (typeof parent !== 'object' || parent === null || Array.isArray(parent)) throw new Error(`${operation.path}: parent is not an object`);
    if (operation.op !== 'add' && !Object.hasOwn(parent, key)) throw new Error(`${operation.path}: nothing to ${operation.op}`);
    if (operation.op === 'remove') delete parent[key];
    else parent[key] = operation.value;
  }
  return result;
}
