// `sidecar-terminator lint`: the webhook's findings, in the webhook's words, for the same
// manifests; exit codes; stdin; hostile YAML.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parseAllDocuments } from 'yaml';
import { runCli } from '../cli/run.ts';
import { post, testApp } from '../webhook/support.ts';

const MANIFESTS = 'test/fixtures/manifests';
const manifest = (name: string) => `${MANIFESTS}/${name}.yaml`;

/** lint's stdout lines as label -> { errors, warnings }, finding texts in order. */
function findingsByObject(stdout: string, file: string) {
  const byObject = new Map<string, { errors: string[]; warnings: string[] }>();
  for (const line of stdout.split('\n')) {
    const match = new RegExp(`^${file.replaceAll('.', '\\.')}: ([^:]+): (error|warning): (.*)$`).exec(line);
    if (!match) continue;
    const [, label, severity, text] = match;
    const entry = byObject.get(label!) ?? { errors: [], warnings: [] };
    (severity === 'error' ? entry.errors : entry.warnings).push(text!);
    byObject.set(label!, entry);
  }
  return byObject;
}

/** The objects of a manifest, List items flattened, as the webhook would receive them on CREATE. */
function objectsOf(path: string): any[] {
  return parseAllDocuments(readFileSync(path, 'utf8'))
    .map((document) => document.toJS())
    .filter((object) => object !== null)
    .flatMap((object) => (object.kind === 'List' ? object.items : [object]));
}

function reviewOf(object: any, uid: string) {
  const [group, version] = object.apiVersion.includes('/') ? object.apiVersion.split('/') : ['', object.apiVersion];
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid, kind: { group, version, kind: object.kind }, name: object.metadata.name, namespace: 'default', operation: 'CREATE', object },
  };
}

t.test('lint reports what the webhook answers, word for word', async (t) => {
  const app = testApp();
  for (const name of ['bad-job', 'warning-job', 'valid-job', 'cronjob', 'deployment', 'multi', 'exported-job', 'exit-codes']) {
    const file = manifest(name);
    const lint = findingsByObject((await runCli(['lint', file])).stdout, file);
    let checked = 0;
    for (const [index, object] of objectsOf(file).entries()) {
      const response = (await post(app, 'validate', reviewOf(object, `uid-${index}`))).review.response!;
      const linted = lint.get(`${object.kind}/${object.metadata.name}`) ?? { errors: [], warnings: [] };
      const count = linted.errors.length === 1 ? '1 sidecar configuration error' : `${linted.errors.length} sidecar configuration errors`;
      t.equal(response.status?.message, linted.errors.length > 0 ? `${count}: ${linted.errors.join('; ')}` : undefined, `${name}: ${object.kind}/${object.metadata.name}: errors`);
      t.same(response.warnings ?? [], linted.warnings, `${name}: ${object.kind}/${object.metadata.name}: warnings`);
      checked += linted.errors.length + linted.warnings.length;
    }
    if (name !== 'valid-job') t.ok(checked > 0, `${name}: the comparison covers findings`);
  }
});

t.test('exit codes and the summary', async (t) => {
  const bad = await runCli(['lint', manifest('bad-job')], { asProcess: true });
  t.equal(bad.code, 1, 'errors: 1 (the exit code of the process)');
  t.match(bad.stdout, /^test\/fixtures\/manifests\/bad-job\.yaml: Job\/backup: error: spec\.template\.spec\.containers\[1\]\.env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT\]: Invalid value: "yes": /m);
  t.match(bad.stdout, /^1 object checked in 1 file: 2 errors, 1 warning$/m);

  const exported = await runCli(['lint', manifest('exported-job')]);
  t.equal(exported.code, 0, 'a Job its CronJob created: its error is a warning, as at admission');
  t.match(exported.stdout, /^test\/fixtures\/manifests\/exported-job\.yaml: Job\/nightly-29120: warning: spec\.template\.spec\.containers\[1\]\.env\[KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE\]: Invalid value: "yes": /m);

  const warnings = await runCli(['lint', manifest('warning-job')]);
  t.equal(warnings.code, 0, 'warnings alone: 0');
  t.match(warnings.stdout, /^test\/fixtures\/manifests\/warning-job\.yaml: Job\/report: warning: /m);

  const valid = await runCli(['lint', manifest('valid-job')]);
  t.same(valid, { code: 0, stdout: '1 object checked in 1 file: 0 errors, 0 warnings\n', stderr: '' });

  const several = await runCli(['lint', manifest('valid-job'), manifest('multi'), manifest('deployment')]);
  t.equal(several.code, 1);
  t.match(several.stdout, /^5 objects checked in 3 files: 2 errors, 2 warnings \(1 object without a pod spec skipped\)$/m);
});

t.test('--enforcement and --quick-exit-image-allowlist, as in serve', async (t) => {
  const warn = await runCli(['lint', '--enforcement=warn', manifest('bad-job')]);
  t.equal(warn.code, 0, 'warn mode: errors are warnings');
  t.match(warn.stdout, /Job\/backup: warning: spec\.template\.spec\.containers\[1\]\.env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT\]: Invalid value: "yes"/);
  t.equal((await runCli(['lint', manifest('bad-job')], { env: { SIDECAR_TERMINATOR_ENFORCEMENT: 'warn' } })).code, 0, 'from the environment');
  t.equal((await runCli(['lint', '--enforcement', 'deny', manifest('bad-job')], { env: { SIDECAR_TERMINATOR_ENFORCEMENT: 'warn' } })).code, 1, 'the flag wins');

  const allow = await runCli(['lint', '--quick-exit-image-allowlist', 'quick-exit.example.com/*', manifest('valid-job')]);
  t.equal(allow.code, 1);
  t.match(allow.stdout, /error: spec\.template\.spec\.containers\[2\]\.env\[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE\]: Forbidden: "registry\.example\.com\/quick-exit:1\.0": not in this cluster's quick-exit image allowlist/);
  t.equal((await runCli(['lint', '--quick-exit-image-allowlist=registry.example.com/*', manifest('valid-job')])).code, 0);

  const wrong = await runCli(['lint', '--enforcement=strict', manifest('valid-job')]);
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /--enforcement: expected one of deny, warn, got "strict"/);
});

t.test('stdin', async (t) => {
  const run = await runCli(['lint', '-'], { input: readFileSync(manifest('bad-job')) });
  t.equal(run.code, 1);
  t.match(run.stdout, /^<stdin>: Job\/backup: error: /m);
});

t.test('usage and input errors: exit 2 with a message naming the file and line', async (t) => {
  const dir = t.testdir({
    'broken.yaml': 'apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: x\n spec: [\n',
    'duplicate.yaml': 'kind: Job\nkind: Pod\n',
  });

  const none = await runCli(['lint']);
  t.equal(none.code, 2);
  t.match(none.stderr, /lint needs at least one FILE/);

  const missing = await runCli(['lint', 'nowhere.yaml', manifest('valid-job')]);
  t.equal(missing.code, 2, 'a missing file is exit 2 even when the others are fine');
  t.match(missing.stderr, /^nowhere\.yaml: cannot read: ENOENT/m);
  t.match(missing.stdout, /1 object checked in 1 file: 0 errors, 0 warnings \(1 file could not be read or parsed\)/, 'the other files are still linted');

  const broken = join(dir, 'broken.yaml');
  const parse = await runCli(['lint', broken]);
  t.equal(parse.code, 2);
  t.match(parse.stderr, new RegExp(`^${broken}: line \\d+, column \\d+: not valid YAML: `, 'm'));

  const duplicate = join(dir, 'duplicate.yaml');
  t.match((await runCli(['lint', duplicate])).stderr, new RegExp(`${duplicate}: line 2, column 1: not valid YAML: Map keys must be unique`));

  const unknown = await runCli(['lint', '--enforce=warn', manifest('valid-job')]);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /unknown flag --enforce for lint: did you mean --enforcement\?/);
});

t.test('hostile YAML: alias bombs, oversized input, tags', async (t) => {
  const levels = 'abcdefghi'.split('');
  const bombText = [
    'apiVersion: v1',
    'kind: ConfigMap',
    'metadata: {name: bomb}',
    'data:',
    '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ...levels.slice(1).map((level, index) => `  ${level}: &${level} [${Array(9).fill(`*${levels[index]}`).join(',')}]`),
  ].join('\n');
  const big = Buffer.alloc(9 * 1024 * 1024, '# padding\n');
  const validJob = readFileSync(manifest('valid-job'), 'utf8');
  const dir = t.testdir({
    // A valid document first: the rejected one is named by its line.
    'bomb.yaml': `${validJob}---\n${bombText}\n`,
    'big.yaml': big,
    // No tag runs code: an unknown tag is read as the plain value it tags.
    'tagged.yaml': validJob.replace('value: "true"', 'value: !!js/function "function () { process.exit(7) }"'),
  });

  const bomb = join(dir, 'bomb.yaml');
  const run = await runCli(['lint', bomb]);
  t.equal(run.code, 2);
  t.match(run.stderr, new RegExp(`^${bomb}: line 22: document rejected: aliases expand too much`, 'm'));

  const oversized = join(dir, 'big.yaml');
  const file = await runCli(['lint', oversized]);
  t.equal(file.code, 2);
  t.match(file.stderr, new RegExp(`^${oversized}: larger than the limit of 8388608 bytes`, 'm'));
  const stdin = await runCli(['lint', '-'], { input: big });
  t.equal(stdin.code, 2);
  t.match(stdin.stderr, /^<stdin>: larger than the limit of 8388608 bytes/m);

  const tags = await runCli(['lint', join(dir, 'tagged.yaml')]);
  t.equal(tags.code, 1);
  t.match(tags.stdout, /Invalid value: "function \(\) \{ process\.exit\(7\) \}": must be "true" or "false"/);
});
