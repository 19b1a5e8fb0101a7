// AdmissionReviews of a pod as the API server sends them to the webhook, for the tests that post
// to the webhook themselves (hostile bodies, forged callers, an owner's event).
type Json = Record<string, unknown>;

export interface PodReviewOptions {
  operation?: 'CREATE' | 'UPDATE';
  oldObject?: Json;
  /** Default `attack`. */
  namespace?: string;
  /** Who the API server says sent it; default `mallory`, a person (a Job's controller's errors are warnings and an event). */
  username?: string;
  uid?: string;
}

/** A review of a pod with `spec` (restartPolicy Never unless it says otherwise) and `metadata` (name `hostile` unless it says otherwise). */
export function podReview(spec: Json, metadata: Json = {}, options: PodReviewOptions = {}): Json {
  const namespace = options.namespace ?? 'attack';
  const object = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'hostile', namespace, ...metadata }, spec: { restartPolicy: 'Never', ...spec } };
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: options.uid ?? '00000000-0000-4000-8000-0000000000aa',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      name: object.metadata.name,
      namespace,
      operation: options.operation ?? 'CREATE',
      userInfo: { username: options.username ?? 'mallory', groups: ['system:authenticated'] },
      object,
      ...(options.oldObject && { oldObject: options.oldObject }),
    },
  };
}
