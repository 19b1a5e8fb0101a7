// POST /validate: every rule of docs/admission-rules.md, reached through AdmissionReview fixtures,
// for the pod spec of a Pod, a Job and a CronJob; enforcement modes; what is left alone.
import t from 'tap';
import type { AdmissionRuleId, Severity } from '../../src/policy/index.ts';
import type { OwnerNotice } from '../../src/webhook/admission.ts';
import { readDoc, section, tableRows } from '../support/markdown.ts';
import { FIELD_PREFIX, OWNERS, asKind, createdBy, loadReview, post, testApp, type FixtureReview } from './support.ts';

const W = 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT';
const I = 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE';
const X = 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE';

interface RuleCase {
  severity: Severity;
  /** The field below the pod spec; `metadata.` fields are those of the pod or its template, `job:` ones of the Job spec. */
  field: string;
  says: RegExp;
  allowlist?: string[];
  /** The kinds it is reported on, when not all three. */
  kinds?: Array<'Pod' | 'Job' | 'CronJob'>;
}

// One fixture per rule, test/fixtures/admission/job-<rule>.json. The Record type makes a rule
// without a case a type error. native-sidecar-lost is the one rule whose pods are refused whoever
// created them, in words of their own (test/webhook/native-sidecars.test.ts).
const cases: Record<Exclude<AdmissionRuleId, 'native-sidecar-lost'>, RuleCase> = {
  'marker-value': { severity: 'error', field: `containers[1].env[${W}]`, says: /Invalid value: "yes": must be "true" or "false"/ },
  'marker-value-from': { severity: 'error', field: `containers[1].env[${W}].valueFrom`, says: /Forbidden: sidecar markers must be literal values/ },
  'quick-exit-image-empty': { severity: 'error', field: `containers[1].env[${I}]`, says: /Required value: set it to an image that exits 0/ },
  'quick-exit-image-invalid': { severity: 'error', field: `containers[1].env[${I}]`, says: /Invalid value: "Not An Image": not a valid image reference/ },
  'quick-exit-image-own': { severity: 'error', field: `containers[1].env[${I}]`, says: /Invalid value: "nginx:1.27": the quick-exit image is the sidecar's own image/ },
  'quick-exit-image-not-allowed': {
    severity: 'error',
    field: `containers[1].env[${I}]`,
    says: /Forbidden: "docker.io\/library\/busybox:1.36": not in this cluster's quick-exit image allowlist \(registry.example.com\/quick-exit:\*\)/,
    allowlist: ['registry.example.com/quick-exit:*'],
  },
  'no-main-container': { severity: 'error', field: 'containers', says: /Forbidden: every container is marked as a sidecar/ },
  'ignore-exit-code-without-kill': { severity: 'error', field: `containers[1].env[${X}]`, says: /Forbidden: takes effect only together with KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true"/ },
  'restart-policy-always': { severity: 'error', field: 'restartPolicy', says: /Unsupported value: "Always": sidecar markers take effect only when restartPolicy is "Never" or "OnFailure"/ },
  'quick-exit-image-unpinned': { severity: 'warning', field: `containers[1].env[${I}]`, says: /Invalid value: "busybox:latest": .*pin a tag or a digest/ },
  'quick-exit-image-command': { severity: 'warning', field: `containers[1].env[${I}]`, says: /this container sets command/ },
  'on-failure-kill-exit-code': { severity: 'warning', field: `containers[1].env[${W}]`, says: /with restartPolicy OnFailure, kubelet restarts a sidecar/ },
  'sidecar-restart-policy-always': { severity: 'error', field: 'containers[1].restartPolicy', says: /Unsupported value: "Always": the kubelet restarts this sidecar whatever its exit code: the quick-exit image put in its place/ },
  'main-restarted-after-success': { severity: 'warning', field: 'containers[0].restartPolicyRules[0]', says: /the kubelet restarts this main container when it exits 0 \(rule 1: exit code 0 NotIn \[1\]\)/ },
  'pod-failure-policy-sidecar-exit-code': {
    severity: 'warning',
    field: 'job:podFailurePolicy.rules[0].onExitCodes',
    says: /this rule \(FailJob\) matches exit code 137 or 143 of sidecar cloud-sql-proxy/,
    kinds: ['Job', 'CronJob'],
  },
  'virtual-node-without-image': { severity: 'warning', field: 'containers[1]', says: /virtual-kubelet nodes/ },
  'marker-on-init-container': { severity: 'warning', field: `initContainers[0].env[${W}]`, says: /markers have no effect on init containers/ },
  'duplicate-marker': { severity: 'warning', field: `containers[1].env[${W}]`, says: /Duplicate value: "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT": defined 2 times/ },
  'stop-method-invalid': { severity: 'error', field: 'containers[1].env[SIDECAR_TERMINATOR_STOP]', says: /Invalid value: "POST http:\/\/10.0.0.1:9091\/quitquitquit": the request may only go to the pod's own loopback/ },
  'grace-period-invalid': { severity: 'error', field: 'containers[1].env[SIDECAR_TERMINATOR_GRACE_PERIOD_SECONDS]', says: /Invalid value: "10m": must be a whole number of seconds/ },
  'stop-without-sidecar': { severity: 'error', field: 'containers[1].env[SIDECAR_TERMINATOR_STOP]', says: /Forbidden: takes effect only on a sidecar stopped by the kill mechanism/ },
  'sidecar-name-invalid': { severity: 'error', field: 'metadata.annotations[sidecar-terminator.io/sidecars]', says: /Invalid value: "Cloud_SQL": not a container name/ },
  'sidecar-not-found': { severity: 'warning', field: 'metadata.annotations[sidecar-terminator.io/sidecars]', says: /Not found: "istio-proxy": the pod has no container istio-proxy/, kinds: ['Pod'] },
};

/** Where a case's field is in an object of this kind. */
const fieldIn = (kind: 'Pod' | 'Job' | 'CronJob', field: string) => {
  if (field.startsWith('job:')) return `${FIELD_PREFIX[kind].replace(/template\.spec$/, '')}${field.slice('job:'.length)}`;
  return field.startsWith('metadata.') ? `${FIELD_PREFIX[kind].replace(/spec$/, '')}${field}` : `${FIELD_PREFIX[kind]}.${field}`;
};

/** asKind, with the fixture Job's own fields (podFailurePolicy, backoffLimit) in the Job spec of a Job or a CronJob. */
function asKindWithJobSpec(review: FixtureReview, kind: 'Pod' | 'Job' | 'CronJob'): FixtureReview {
  const reshaped = asKind(review, kind);
  const jobFields = Object.fromEntries(Object.entries(review.request.object.spec).filter(([key]) => key !== 'template'));
  if (kind === 'Job') Object.assign(reshaped.request.object.spec, jobFields);
  if (kind === 'CronJob') Object.assign(reshaped.request.object.spec.jobTemplate.spec, jobFields);
  return reshaped;
}

for (const [rule, c] of Object.entries(cases) as Array<[keyof typeof cases, RuleCase]>) {
  t.test(`rule ${rule}`, async (t) => {
    for (const kind of c.kinds ?? (['Pod', 'Job', 'CronJob'] as const)) {
      const review = asKindWithJobSpec(loadReview(`job-${rule}`), kind);
      const field = fieldIn(kind, c.field);
      const expected = (text: string) => text.startsWith(`${field}: `) && c.says.test(text);

      const denyApp = testApp({ quickExitImageAllowlist: c.allowlist ?? [] });
      const { statusCode, review: answer } = await post(denyApp, 'validate', review);
      t.equal(statusCode, 200, `${kind}: HTTP 200`);
      t.equal(answer.response?.uid, review.request.uid, `${kind}: uid echoed`);
      if (c.severity === 'error') {
        t.equal(answer.response?.allowed, false, `${kind}: denied`);
        t.match(answer.response?.status, { code: 422, reason: 'Invalid' }, `${kind}: 422 Invalid`);
        const message = answer.response?.status?.message ?? '';
        t.match(message, /^1 sidecar configuration error: /, `${kind}: one error, counted`);
        t.ok(expected(message.replace(/^1 sidecar configuration error: /, '')), `${kind}: the message names ${field}`);
      } else {
        t.equal(answer.response?.allowed, true, `${kind}: allowed`);
        t.equal(answer.response?.status, undefined, `${kind}: no status`);
        t.equal(answer.response?.warnings?.filter(expected).length, 1, `${kind}: one warning names ${field}`);
      }

      // warn mode admits everything and reports the same finding as a warning, word for word.
      const warnApp = testApp({ enforcement: 'warn', quickExitImageAllowlist: c.allowlist ?? [] });
      const warned = (await post(warnApp, 'validate', review)).review.response;
      t.equal(warned?.allowed, true, `${kind}, warn mode: allowed`);
      t.equal(warned?.warnings?.filter(expected).length, 1, `${kind}, warn mode: reported as a warning`);
      await Promise.all([denyApp.close(), warnApp.close()]);
    }
  });
}

/** The rules table of docs/admission-rules.md, by rule id, for the rules an admission answer reports (not the info ones). */
function rulesTable(): Map<string, Record<string, string>> {
  const rows = tableRows(section(readDoc('docs/admission-rules.md'), 'The rules')).filter((row) => row.severity !== 'info');
  return new Map(rows.map((row) => [/^`([a-z-]+)`$/.exec(row.rule ?? '')?.[1] ?? '', row]));
}

t.test('a pod of a Job, or a Job of a CronJob, is never denied: the same findings as warnings, and a notice for its owner; the rules table says so', async (t) => {
  const table = rulesTable();
  // near-miss-marker: test/webhook/near-miss.test.ts.
  t.same([...table.keys()].sort(), [...Object.keys(cases), 'native-sidecar-lost', 'near-miss-marker'].sort(), 'the rules table has one row per rule');
  t.match(table.get('native-sidecar-lost'), { 'template or bare pod': /^denied/, 'pod or Job from an existing controller': /^denied/ }, 'rules table, native-sidecar-lost: a pod is refused whoever created it');
  for (const [rule, c] of Object.entries(cases) as Array<[keyof typeof cases, RuleCase]>) {
    const templateColumn = table.get(rule)?.['template or bare pod'] ?? '';
    const controllerColumn = table.get(rule)?.['pod or Job from an existing controller'] ?? '';
    for (const [kind, owner] of [['Pod', OWNERS.Job], ['Job', OWNERS.CronJob]] as const) {
      const template = asKindWithJobSpec(loadReview(`job-${rule}`), kind);
      const fromController = createdBy(template, owner);
      const notices: OwnerNotice[] = [];
      const app = testApp({ quickExitImageAllowlist: c.allowlist ?? [], ownerEvents: { record: (notice) => notices.push(notice) } });
      const asTemplate = (await post(app, 'validate', template)).review.response!;
      const created = (await post(app, 'validate', fromController)).review.response!;
      await app.close();
      const denied = asTemplate.status?.message?.replace(/^1 sidecar configuration error: /, '');

      t.equal(created.allowed, true, `${rule}, ${kind} from a ${owner.kind}: allowed`);
      t.same(created.warnings ?? [], [...(denied ? [denied] : []), ...(asTemplate.warnings ?? [])], `${rule}, ${kind} from a ${owner.kind}: every finding of the template, as a warning in the same words`);
      if (denied) {
        // The errors without the values the object's author wrote: the event is written on an object the author may not own.
        const withoutValues = denied.replace(/: "(?:[^"\\]|\\.)*"(?:\.\.\. \(\d+ characters\))?: /, ': ');
        t.match(notices, [{ namespace: 'batch', owner: { kind: owner.kind, name: owner.name, uid: owner.uid }, kind, errors: [withoutValues], errorCount: 1 }], `${rule}, ${kind}: a notice for the ${owner.kind}`);
        t.equal(notices.length, 1);
      } else {
        t.same(notices, [], `${rule}, ${kind}: no notice for warnings`);
      }
      t.match(templateColumn, asTemplate.allowed ? /^warning/ : /^denied/, `rules table, ${rule}: the template column says what the webhook does`);
      t.match(controllerColumn, denied ? /^warning, event/ : /^warning$/, `rules table, ${rule}: the controller column says what the webhook does`);
    }
  }
});

t.test('no notice for a dry run, an update, or an owner that is not the controller', async (t) => {
  const notices: OwnerNotice[] = [];
  const app = testApp({ ownerEvents: { record: (notice) => notices.push(notice) } });
  const fromJob = createdBy(asKind(loadReview('job-quick-exit-image-own'), 'Pod'), OWNERS.Job);

  const dryRun = structuredClone(fromJob);
  dryRun.request.dryRun = true;
  t.equal((await post(app, 'validate', dryRun)).review.response?.allowed, true, 'a dry run is allowed too');
  const update = createdBy(asKind(loadReview('job-quick-exit-image-own'), 'Job'), OWNERS.CronJob);
  update.request.operation = 'UPDATE';
  update.request.oldObject = update.request.object;
  t.equal((await post(app, 'validate', update)).review.response?.allowed, true);
  t.same(notices, [], 'side effects only on a real CREATE');

  const gcOwnerOnly = createdBy(asKind(loadReview('job-quick-exit-image-own'), 'Pod'), { ...OWNERS.Job, controller: false } as unknown as typeof OWNERS.Job);
  t.equal((await post(app, 'validate', gcOwnerOnly)).review.response?.allowed, false, 'an owner that is not the controller: a bare pod, denied');

  const named = structuredClone(fromJob);
  named.request.name = 'see-evil.example.com';
  await post(app, 'validate', named);
  t.equal(notices.length, 1, 'a real CREATE: a notice');
  t.notMatch(JSON.stringify(notices), /evil|nginx:1\.27/, "nothing of the object's own text: neither its name nor its values");
});

t.test('several errors: one message listing each, and the warnings beside it', async (t) => {
  const app = testApp();
  const review = loadReview('job-two-errors');
  review.request.object.spec.template.spec.containers[2].env.push({ name: W, value: 'true' }, { name: W, value: 'true' });
  const { review: answer } = await post(app, 'validate', review);
  t.same(answer.response, {
    uid: review.request.uid,
    allowed: false,
    status: {
      code: 422,
      reason: 'Invalid',
      message:
        '2 sidecar configuration errors: ' +
        `spec.template.spec.containers[1].env[${W}]: Invalid value: "yes": must be "true" or "false" (any case); any other value counts as "false", as in OpenKruise; ` +
        `spec.template.spec.containers[2].env[${I}]: Invalid value: "nginx:1.27": the quick-exit image is the sidecar's own image, so replacing it changes nothing and the sidecar never stops`,
    },
    warnings: [`spec.template.spec.containers[2].env[${W}]: Duplicate value: "${W}": defined 2 times in this container; one of them is "true", so the container is a sidecar: any "true" counts, as in OpenKruise; keep one definition`],
  });
  t.ok(answer.response?.warnings?.every((warning) => !/[\r\n]/.test(warning)), 'each warning is a single line');
});

t.test('valid objects are allowed without warnings', async (t) => {
  const app = testApp({ quickExitImageAllowlist: ['registry.example.com/quick-exit:*'] });
  for (const name of ['job-valid', 'cronjob-valid', 'pod-manageable', 'configmap']) {
    const review = loadReview(name);
    t.same((await post(app, 'validate', review)).review.response, { uid: review.request.uid, allowed: true }, name);
  }
});

t.test('pods: restartPolicy Always is a warning unless the pod asks for strict validation', async (t) => {
  const app = testApp();
  const plain = (await post(app, 'validate', loadReview('pod-always'))).review.response;
  t.equal(plain?.allowed, true, 'a pod of a Deployment is never denied for it');
  t.match(plain?.warnings, [/^spec\.restartPolicy: Unsupported value: "Always"/]);
  const strict = (await post(app, 'validate', loadReview('pod-always-strict'))).review.response;
  t.equal(strict?.allowed, false);
  t.match(strict?.status?.message, /spec\.restartPolicy: Unsupported value: "Always"/);
});

t.test('a Deployment is validated with the non-strict rules and never denied', async (t) => {
  const app = testApp();
  const response = (await post(app, 'validate', loadReview('deployment-markers'))).review.response;
  t.equal(response?.allowed, true);
  t.match(response?.warnings, [/^spec\.template\.spec\.restartPolicy: Unsupported value: "Always"/]);
  const broken = loadReview('deployment-markers');
  broken.request.object.spec.template.spec.containers[1].env[0].value = 'yes';
  const answer = (await post(app, 'validate', broken)).review.response;
  t.equal(answer?.allowed, true, 'a workload sharing a template with a Job is not broken');
  t.match(answer?.warnings, [/env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT\]: Invalid value: "yes"/], 'its errors are shown as warnings');
});

t.test('pod UPDATE is allowed untouched: the in-place image replacement must pass', async (t) => {
  const app = testApp();
  const review = loadReview('pod-update-image-replaced');
  t.same((await post(app, 'validate', review)).review.response, { uid: review.request.uid, allowed: true });
  // The same pod on CREATE would be denied: its sidecar's image is its quick-exit image.
  const created = loadReview('pod-update-image-replaced');
  created.request.operation = 'CREATE';
  created.request.oldObject = null;
  t.match((await post(app, 'validate', created)).review.response, { allowed: false, status: { message: /own image/ } });
});

t.test('Job UPDATE: new errors deny, errors the old object already had are warnings', async (t) => {
  const app = testApp();
  const update = (oldName: string, newName: string) => {
    const review = loadReview(newName);
    review.request.operation = 'UPDATE';
    review.request.oldObject = loadReview(oldName).request.object;
    return post(app, 'validate', review);
  };
  t.match((await update('job-valid', 'job-marker-value')).review.response, { allowed: false, status: { code: 422 } }, 'introduced by the update');
  const kept = (await update('job-marker-value', 'job-marker-value')).review.response;
  t.equal(kept?.allowed, true, 'already there: the Job stays updatable (finalizers, labels, suspend)');
  t.match(kept?.warnings, [/Invalid value: "yes"/]);
});

t.test('requests the webhook does not judge are allowed untouched', async (t) => {
  const app = testApp();
  const job = loadReview('job-marker-value');
  const variants: Array<[string, (review: ReturnType<typeof loadReview>) => void]> = [
    ['DELETE of a Job', (r) => Object.assign(r.request, { operation: 'DELETE', oldObject: r.request.object, object: null })],
    ['a subresource', (r) => Object.assign(r.request, { operation: 'UPDATE', subResource: 'status', oldObject: r.request.object })],
    ['CONNECT', (r) => Object.assign(r.request, { operation: 'CONNECT' })],
  ];
  for (const [name, change] of variants) {
    const review = structuredClone(job);
    change(review);
    t.same((await post(app, 'validate', review)).review.response, { uid: review.request.uid, allowed: true }, name);
  }
});

t.test('request.kind decides the kind, whatever the object says', async (t) => {
  const app = testApp();
  const review = loadReview('job-marker-value');
  delete review.request.object.apiVersion;
  delete review.request.object.kind;
  t.equal((await post(app, 'validate', review)).review.response?.allowed, false);
});

t.test("a Job whose podFailurePolicy judges its stopped sidecar: admitted, with a warning naming the rule's field, the sidecar and the fixes", async (t) => {
  const app = testApp();
  const review = loadReview('job-pod-failure-policy-sidecar-exit-code');
  t.same((await post(app, 'validate', review)).review.response, {
    uid: review.request.uid,
    allowed: true,
    warnings: [
      'spec.podFailurePolicy.rules[0].onExitCodes: this rule (FailJob) matches exit code 137 or 143 of sidecar cloud-sql-proxy, which a stop can leave (143 when SIGTERM ends it, 137 when it is killed), ' +
        'so a pod whose main containers succeeded fails the whole Job, with no retry; ' +
        `set ${X}="true" on cloud-sql-proxy (the watcher then sets the pod's phase from its main containers before stopping it, and the Job controller judges failed pods only) or make it exit 0 on SIGTERM, ` +
        'and set onExitCodes.containerName to the main container so that this rule judges it alone',
    ],
  });

  const judgedAlone = loadReview('job-pod-failure-policy-sidecar-exit-code');
  judgedAlone.request.object.spec.podFailurePolicy.rules[0].onExitCodes.containerName = 'backup';
  t.same((await post(app, 'validate', judgedAlone)).review.response, { uid: review.request.uid, allowed: true }, 'the rule judges the main container alone: nothing to say');
  const ignored = loadReview('job-pod-failure-policy-sidecar-exit-code');
  ignored.request.object.spec.template.spec.containers[1].env.push({ name: X, value: 'true' });
  t.same((await post(app, 'validate', ignored)).review.response, { uid: review.request.uid, allowed: true }, 'its exit code ignored: the pod succeeds before the sidecar is stopped');
  const cronJob = asKindWithJobSpec(loadReview('job-pod-failure-policy-sidecar-exit-code'), 'CronJob');
  t.match((await post(app, 'validate', cronJob)).review.response?.warnings, [/^spec\.jobTemplate\.spec\.podFailurePolicy\.rules\[0\]\.onExitCodes: this rule \(FailJob\)/], 'a CronJob: at its jobTemplate');
  for (const podFailurePolicy of ['FailJob', { rules: 'FailJob' }, { rules: [null, 7, { action: 'FailJob', onExitCodes: { operator: 'NotIn', values: 'all' } }, { action: ['FailJob'], onExitCodes: {} }] }]) {
    const malformed = loadReview('job-pod-failure-policy-sidecar-exit-code');
    malformed.request.object.spec.podFailurePolicy = podFailurePolicy;
    t.same((await post(app, 'validate', malformed)).review.response, { uid: review.request.uid, allowed: true }, `a malformed podFailurePolicy judges nothing: ${JSON.stringify(podFailurePolicy)}`);
  }
  await app.close();
});
