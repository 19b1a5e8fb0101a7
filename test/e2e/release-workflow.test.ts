// The release workflow cannot run here (it runs on GitHub, from a tag): actionlint, built from the
// Go module proxy, checks it as GitHub would read it (syntax, expressions, contexts, permissions,
// the actions' inputs) and its shell steps with shellcheck (Debian's), and it runs the project's
// own release target, pushing to the address the add-on pulls from by default, read from the code.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { IMAGE_REPOSITORY } from '../../src/policy/names.ts';
import { runCommand } from '../support/command.ts';
import { buildScriptOutput } from '../support/managed-process.ts';
import { repoRoot } from '../support/repo.ts';

const WORKFLOW = '.github/workflows/release.yml';
const [actionlint, shellcheck] = await Promise.all([buildScriptOutput('build-go-tool.sh', ['actionlint']), buildScriptOutput('install-debian-tool.sh', ['shellcheck'])]);
/** actionlint with shellcheck on the `run:` steps. */
const lint = (file: string) => runCommand(actionlint, ['-no-color', `-shellcheck=${shellcheck}`, file], { cwd: repoRoot });
const text = readFileSync(join(repoRoot, WORKFLOW), 'utf8');
const workflow = parse(text) as { on: { push: { tags: string[] } }; jobs: Record<string, { permissions: Record<string, string>; defaults?: { run?: { shell?: string } }; steps: { run?: string; shell?: string }[] }> };
const script = workflow.jobs.release!.steps.map((step) => step.run ?? '').join('\n');

t.test('actionlint finds nothing to say about it', async (t) => {
  const linted = await lint(WORKFLOW);
  t.equal(linted.code, 0, `actionlint ${WORKFLOW}:\n${linted.stdout}${linted.stderr}`);
});

t.test('and would: a mistyped expression, or an unquoted variable in a step, fails the lint', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'st-actionlint-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const broken = join(dir, 'release.yml');
  writeFileSync(broken, text.replace('${{ github.actor }}', '${{ github.actr }}').replace('make release VERSION="$VERSION"', 'make release VERSION=$VERSION'));
  const linted = await lint(broken);
  t.not(linted.code, 0, 'actionlint fails');
  t.match(linted.stdout, /property "actr" is not defined/, 'the expression');
  t.match(linted.stdout, /shellcheck reported issue in this script: SC2086/, 'the shell step, through shellcheck');
});

t.test('it runs from a version tag, with the rights to push, sign and publish, and runs make release', async (t) => {
  t.same(Object.keys(workflow.on), ['push'], 'only a push triggers it');
  t.match(workflow.on.push.tags, [/^v\[0-9\]/], 'of a version tag');
  const job = workflow.jobs.release!;
  t.same(job.permissions, { contents: 'write', packages: 'write', 'id-token': 'write' }, 'the release, the registry, keyless signing');
  t.match(script, /make release VERSION="\$VERSION" PUSH="\$PREFIX"/, 'the same target as a release made by hand');
  // GitHub runs `shell: bash` with -o pipefail; a job in a container otherwise runs sh, where `make release | tee` has tee's status.
  t.equal(job.defaults?.run?.shell, 'bash', 'its steps run in bash with pipefail');
  t.notOk(job.steps.some((step) => step.shell !== undefined && step.shell !== 'bash'), 'no step runs in another shell');
  t.match(script, /cosign sign --yes/, 'each pushed digest is signed');
});

t.test('it pushes to IMAGE_REPOSITORY, printed by scripts/image-repository.ts: the address is written nowhere in the workflow', async (t) => {
  const printed = await runCommand(join(repoRoot, 'node_modules/.bin/node'), ['scripts/image-repository.ts'], { cwd: repoRoot });
  t.equal(printed.stdout, `${IMAGE_REPOSITORY}\n`, 'the script prints it');
  t.match(script, /prefix=\$\(node_modules\/\.bin\/node scripts\/image-repository\.ts\)\n\s*echo "PREFIX=\$prefix" >> "\$GITHUB_ENV"/, 'the workflow takes PREFIX from it');
  // Comments aside: the parsed workflow's values, where a registry or an owner would be spelt.
  const values = JSON.stringify(workflow);
  t.notMatch(values, IMAGE_REPOSITORY.split('/')[0]!, 'no registry written in');
  t.notMatch(values, /repository_owner/, 'nor the owner taken for the prefix');
});
