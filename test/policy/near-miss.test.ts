// Near-miss markers: every marker's common misspellings are each one near miss naming the marker
// meant; exact markers, the add-on's own names, and the names of widely used charts
// (test/fixtures/near-miss-corpus.txt) are none.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { envName, SERVE_FLAGS } from '../../src/config.ts';
import { SIM_ANNOTATION_PREFIX } from '../support/sim/container-behaviour.ts';
import {
  ENV_WHEN_JOB_EXIT,
  MANAGED_LABEL,
  MARKER_NAMES,
  MAX_NEAR_MISSES,
  MIGRATED_ANNOTATION,
  NATIVE_SIDECARS_OPT_OUT,
  PHASE_SET_ANNOTATION,
  POD_ANNOTATIONS,
  SKIPPED_ANNOTATION,
  STRICT_VALIDATION_ANNOTATION,
  formatFinding,
  inspectObject,
  nearMissAnnotation,
  nearMissEnvName,
  nearMissFindings,
  nearMisses,
} from '../../src/policy/index.ts';
import { ANNOTATION_MISSES, ENV_MISSES } from '../support/near-miss-cases.ts';
import { MEMO_NAMES } from '../../src/policy/near-miss.ts';

const SIDECARS = POD_ANNOTATIONS.sidecars;
const IGNORING = POD_ANNOTATIONS.ignoreExitCode;

const pod = (restartPolicy: string, env: Array<{ name: string; value?: string }>, annotations: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p', annotations },
  spec: { restartPolicy, containers: [{ name: 'main', image: 'm' }, { name: 'proxy', image: 'p', env }] },
});
const missesOf = (object: unknown) => nearMisses(inspectObject(object, [])!);

for (const [marker, misses] of Object.entries(ENV_MISSES)) {
  t.test(`misspellings of ${marker}: one near miss each, naming it`, async (t) => {
    for (const [slip, seen] of misses) {
      t.equal(nearMissEnvName(seen), marker, slip);
      t.same(missesOf(pod('Never', [{ name: seen, value: 'true' }])), [{ kind: 'env', field: 'spec.containers[1].env[0].name', seen, meant: marker }], `${slip}: on a pod`);
    }
  });
}

for (const [meant, misses] of Object.entries(ANNOTATION_MISSES)) {
  t.test(`misspellings of ${meant}: one near miss each, naming it`, async (t) => {
    for (const [slip, seen] of misses) {
      t.equal(nearMissAnnotation(seen), meant, slip);
      t.same(missesOf(pod('OnFailure', [], { [seen]: 'proxy' })), [{ kind: 'annotation', field: `metadata.annotations[${seen}]`, seen, meant }], `${slip}: on a pod`);
    }
  });
}

t.test('the markers themselves, and every name the add-on reads or writes, are no near miss', async (t) => {
  for (const name of MARKER_NAMES) t.equal(nearMissEnvName(name), undefined, name);
  const keys = [SIDECARS, IGNORING, STRICT_VALIDATION_ANNOTATION, NATIVE_SIDECARS_OPT_OUT.key, MIGRATED_ANNOTATION, SKIPPED_ANNOTATION, PHASE_SET_ANNOTATION, MANAGED_LABEL];
  for (const key of [...keys, `${POD_ANNOTATIONS.stopPrefix}proxy`, `${POD_ANNOTATIONS.gracePeriodPrefix}istio-proxy`]) t.equal(nearMissAnnotation(key), undefined, key);
  // The kubelet simulator's, on the pods of make dev, the examples and the end-to-end tests.
  t.equal(nearMissAnnotation(`${SIM_ANNOTATION_PREFIX}on-sigterm.sql-proxy`), undefined, SIM_ANNOTATION_PREFIX);
  // serve's and lint's settings share the prefix SIDECAR_TERMINATOR_ (a Job running lint may set them).
  for (const flag of Object.values(SERVE_FLAGS)) t.equal(nearMissEnvName(envName(flag.name)), undefined, envName(flag.name));
  const spec = pod('Never', MARKER_NAMES.map((name) => ({ name, value: 'true' })), { [SIDECARS]: 'proxy', [`${POD_ANNOTATIONS.stopPrefix}proxy`]: 'signal' });
  t.same(missesOf(spec), []);
});

t.test('no near miss among the env var and annotation names of widely used charts', async (t) => {
  const lines = readFileSync(new URL('../fixtures/near-miss-corpus.txt', import.meta.url), 'utf8').split('\n');
  const names = lines.filter((line) => /^(env|annotation) /.test(line)).map((line) => line.split(' ') as ['env' | 'annotation', string]);
  t.ok(names.length >= 300, `a few hundred names (${names.length})`);
  t.ok(lines.filter((line) => line.startsWith('# source: github.com/')).length >= 10, 'from many sources');
  for (const [kind, name] of ['KRUISE_CONTAINER_PRIORITY', 'SIDECARSET_VERSION', 'ENABLE_NATIVE_SIDECARS'].map((name) => ['env', name])) t.ok(names.some(([k, n]) => k === kind && n === name), `holds ${name}`);
  t.ok(names.some(([kind, name]) => kind === 'annotation' && name === 'sidecar.istio.io/interceptionMode'), 'holds sidecar.istio.io/*');
  const found = names.flatMap(([kind, name]) => {
    const meant = kind === 'env' ? nearMissEnvName(name) : nearMissAnnotation(name);
    return meant === undefined ? [] : [`${name} -> ${meant}`];
  });
  t.same(found, []);
});

t.test('ordinary names near ours are no near miss', async (t) => {
  const envNames = ['SIDECAR', 'SIDECAR_IMAGE', 'GRACE_PERIOD_SECONDS', 'TERMINATION_GRACE_PERIOD_SECONDS', 'SHUTDOWN_GRACE_PERIOD', 'KRUISE_CONTAINER_BARRIER', 'STOP', 'STOP_SIGNAL', 'IGNORE_EXIT_CODE', 'JOB_EXIT', 'WHEN_JOB_EXIT'];
  // Reworded, but too little of a marker left: two words, or less than 60% of its length; or two words changed in a short one.
  const reworded = ['SIDECAR_STOP', 'STOP_SIDECAR', 'SIDECAR_GRACE_PERIOD', 'TERMINATE_GRACE_PERIOD_SECONDS', 'POD_TERMINATION_GRACE_PERIOD_SECONDS', 'SIDECAR_TERMINATOR_SHUTDOWN_GRACE', 'SIDECAR_WHEN_JOB_EXIT'];
  for (const name of [...envNames, ...reworded]) t.equal(nearMissEnvName(name), undefined, name);
  // Other domains that share a word or two with ours: a part of the domain is not the domain.
  const otherDomains = ['terminator.io/foo', 'my.terminator.io/x', 'sidecar.io/config', 'terminator.io/sidecar-injector'];
  for (const key of ['sidecar.istio.io/inject', 'sidecar.istio.io/status', 'proxy.istio.io/config', 'sidecars', 'terminator.example.com/sidecars', 'kubectl.kubernetes.io/default-container', ...otherDomains]) {
    t.equal(nearMissAnnotation(key), undefined, key);
  }
});

t.test('only pods that can finish, and only their containers: markers do nothing elsewhere', async (t) => {
  const misspelt = [{ name: 'KRUISE_TERMINATE_SIDECAR_WITH_IMAGE', value: 'busybox:1.36' }];
  t.equal(missesOf(pod('Never', misspelt)).length, 1);
  t.equal(missesOf(pod('OnFailure', misspelt)).length, 1);
  t.same(missesOf(pod('Always', misspelt)), [], 'restartPolicy Always');
  const unset = pod('Never', misspelt);
  delete (unset.spec as { restartPolicy?: string }).restartPolicy;
  t.same(missesOf(unset), [], 'restartPolicy unset is Always');
  const init = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { restartPolicy: 'Never', containers: [{ name: 'main' }], initContainers: [{ name: 'init', env: misspelt }] } };
  t.same(missesOf(init), [], 'an init container: a marker there has no effect either');
});

t.test('Job and CronJob templates: the template\'s containers and annotations, at their paths', async (t) => {
  const template = { metadata: { annotations: { 'sidecar-terminator.io/sidecar': 'proxy' } }, spec: { restartPolicy: 'Never', containers: [{ name: 'main', env: [{ name: 'PATH', value: '/bin' }, { name: 'KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT', value: 'true' }] }] } };
  const job = { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'j' }, spec: { template } };
  t.same(missesOf(job), [
    { kind: 'annotation', field: 'spec.template.metadata.annotations[sidecar-terminator.io/sidecar]', seen: 'sidecar-terminator.io/sidecar', meant: SIDECARS },
    { kind: 'env', field: 'spec.template.spec.containers[0].env[1].name', seen: 'KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT', meant: ENV_WHEN_JOB_EXIT },
  ]);
  const cronJob = { apiVersion: 'batch/v1', kind: 'CronJob', metadata: { name: 'c' }, spec: { schedule: '@daily', jobTemplate: { spec: { template } } } };
  t.same(missesOf(cronJob).map((miss) => miss.field), ['spec.jobTemplate.spec.template.metadata.annotations[sidecar-terminator.io/sidecar]', 'spec.jobTemplate.spec.template.spec.containers[0].env[1].name']);
});

t.test('a finding per near miss: a warning that names the field, the name seen and the marker meant', async (t) => {
  const object = pod('Never', [{ name: 'KRUISE_TERMINATE_SIDECAR_WITH_IMAGE', value: 'busybox:1.36' }], { 'sidecar-terminator.io/sidecar': 'proxy' });
  const findings = nearMissFindings(inspectObject(object, [])!);
  t.same(findings.map((finding) => [finding.rule, finding.severity]), [['near-miss-marker', 'warning'], ['near-miss-marker', 'warning']]);
  t.same(findings.map(formatFinding), [
    "metadata.annotations[sidecar-terminator.io/sidecar]: not an annotation the add-on reads, so it has no effect, but close to sidecar-terminator.io/sidecars; write the marker's name exactly as the message gives it (names are case-sensitive), or rename the variable or annotation if it is not meant for the add-on",
    'spec.containers[1].env[0].name: "KRUISE_TERMINATE_SIDECAR_WITH_IMAGE": not a variable the add-on reads, so it has no effect, but close to KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE; write the marker\'s name exactly as the message gives it (names are case-sensitive), or rename the variable or annotation if it is not meant for the add-on',
  ]);
});

t.test('a hostile pod: at most MAX_NEAR_MISSES, and no huge name compared', async (t) => {
  const env = Array.from({ length: 5000 }, (_, index) => ({ name: `KRUISE_TERMINATE_SIDECAR_X${index}` }));
  const found = missesOf(pod('Never', env));
  t.equal(found.length, MAX_NEAR_MISSES);
  t.equal(found.at(-1)?.field, `spec.containers[1].env[${MAX_NEAR_MISSES - 1}].name`, 'the first ones, in order');
  t.equal(nearMissEnvName(`KRUISE_TERMINATE_SIDECAR_${'X'.repeat(300)}`), undefined, 'longer than any name written by mistake');
  t.same(missesOf(pod('Never', [{ name: 42 as unknown as string }, null as unknown as { name: string }])), [], 'entries that are not env vars');
});

t.test('a hostile pod: at most MAX_NEAR_MISSES annotations, and shapes that are not a pod spec', async (t) => {
  const annotations = Object.fromEntries(Array.from({ length: 500 }, (_, index) => [`sidecar-terminator.io/sidecar${index}`, 'x']));
  const found = nearMisses({ spec: { restartPolicy: 'Never', containers: [] }, annotations, fieldPrefix: 'spec' });
  t.equal(found.length, MAX_NEAR_MISSES, 'the annotations alone fill the list');
  t.ok(found.every((miss) => miss.kind === 'annotation'));
  t.same(nearMisses({ spec: 'Never', annotations: {}, fieldPrefix: 'spec' }), [], 'a spec that is not an object: no restartPolicy, nothing to read');
  t.same(nearMisses({ spec: { restartPolicy: 'Never', containers: [null, 'proxy', 7] }, annotations: {}, fieldPrefix: 'spec' }), [], 'containers that are not objects');
});

t.test('a name judged again, and after the memory of judged names filled and started again, is judged the same', async (t) => {
  const names = ['KRUISE_TERMINATE_SIDECAR_WITH_IMAGE', 'DATABASE_URL', 'KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT', 'kruise_terminate_sidecar_when_job_exit'];
  const first = names.map((name) => nearMissEnvName(name));
  t.same(first.map((meant) => meant !== undefined), [true, false, true, true], 'the near misses, and the ordinary name');
  t.same(names.map((name) => nearMissEnvName(name)), first, 'the same, remembered');
  for (let index = 0; index <= MEMO_NAMES; index++) nearMissEnvName(`UNRELATED_NAME_${index}`);
  t.same(names.map((name) => nearMissEnvName(name)), first, 'the same once the memory started again');
  const keys = ['sidecar-terminator.io/sidecar', 'example.com/owner'];
  const judged = keys.map((key) => nearMissAnnotation(key));
  t.same(judged.map((meant) => meant !== undefined), [true, false]);
  t.same(keys.map((key) => nearMissAnnotation(key)), judged, 'annotation keys alike');
});
