// docs/ARCHITECTURE.md against the code: its table of parts names every directory and file at the
// top of src/, each file it names inside a part exists there, and its list of commands is the one
// the CLI prints and accepts.
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
