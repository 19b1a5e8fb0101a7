// docs/ARCHITECTURE.md against the code: its table of parts names every directory and file at the
// top of src/ and every file inside each part, each file it names inside a part exists there, its
// walk from a watch event to a stop request takes at most eight steps through files that exist,
// and its list of commands is the one the CLI prints and accepts.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { runCli } from '../cli/run.ts';
import { readDoc, section, tableRows } from '../support/markdown.ts';
import { repoRoot } from '../support/repo.ts';

const page = readDoc('docs/ARCHITECTURE.md');
const code = (cell: string | undefined) => [...(cell ?? '').matchAll(/`([^`]+)`/g)].map((match) => match[1]!);

t.test('the table of parts names each directory and file at the top of src/, and nothing else', async (t) => {
  const rows = tableRows(section(page, 'The parts and their one job each')).filter((row) => row.where !== undefined);
  const named = rows.flatMap((row) => code(row.where)).sort();
  const present = readdirSync(join(repoRoot, 'src'), { withFileTypes: true }).map((entry) => (entry.isDirectory() ? `src/${entry.name}/` : `src/${entry.name}`)).sort();
  t.same(named, present);
});

t.test('each file a part names is in that part', async (t) => {
  const rows = tableRows(section(page, 'The parts and their one job each')).filter((row) => row.where !== undefined);
  let files = 0;
  for (const row of rows) {
    const dirs = code(row.where).filter((path) => path.endsWith('/'));
    for (const file of code(row['its one job']).filter((name) => /^[\w-]+\.ts$/.test(name))) {
      files++;
      t.ok(dirs.some((dir) => existsSync(join(repoRoot, dir, file))), `${file} is in ${dirs.join(' or ')}`);
    }
  }
  t.ok(files > 30, `${files} files named`);
});

t.test('every file inside a part is named in its row', async (t) => {
  const rows = tableRows(section(page, 'The parts and their one job each')).filter((row) => row.where !== undefined);
  let files = 0;
  for (const row of rows) {
    const named = new Set(code(row['its one job']));
    for (const dir of code(row.where).filter((path) => path.endsWith('/'))) {
      for (const file of readdirSync(join(repoRoot, dir)).filter((name) => name.endsWith('.ts'))) {
        files++;
        t.ok(named.has(file), `${dir}${file} is named in the row of ${dir}`);
      }
    }
  }
  t.ok(files > 80, `${files} files`);
});

t.test('the walk from a watch event to a stop request: at most eight steps, through files that exist', async (t) => {
  const steps = section(page, 'From a watch event to a stop request').split('\n').filter((line) => /^\d+\. /.test(line));
  t.ok(steps.length >= 5 && steps.length <= 8, `${steps.length} steps`);
  const paths = steps.flatMap((step) => code(step).filter((name) => name.startsWith('src/')));
  t.ok(paths.length >= steps.length, `${paths.length} files named`);
  for (const path of paths) t.ok(existsSync(join(repoRoot, path)), `${path} exists`);
});

t.test("the commands are the CLI's: each one it prints runs, and no other is listed", async (t) => {
  const listed = tableRows(section(page, 'Commands')).map((row) => code(row.command)[0]!);
  const usage = (await runCli(['--help'])).stdout;
  const printed = [...usage.matchAll(/^ {2}sidecar-terminator (\S+)/gm)].map((match) => match[1]!);
  t.ok(printed.length >= 5, printed.join(', '));
  for (const command of printed) t.ok(listed.includes(command), `${command} is listed`);
  for (const command of listed) {
    const args = command === '--version' ? [command] : command === 'help' ? ['help'] : [command, '--help'];
    t.equal((await runCli(args)).code, 0, `sidecar-terminator ${args.join(' ')} runs`);
  }
  t.equal((await runCli(['unlisted', '--help'])).code, 2, 'a command the CLI does not know is refused, so the check can fail');
});
