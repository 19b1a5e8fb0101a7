import t from 'tap';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, classifyContainers, readMarkers } from '../../src/policy/index.ts';

const env = (...pairs: Array<[string, string]>) => ({ name: 'c', image: 'app:1', env: pairs.map(([name, value]) => ({ name, value })) });

t.test('env var table (README)', async (t) => {
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'true'])), { whenJobExit: true, quickExitImage: undefined, ignoreExitCode: false });
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'TRUE'])).whenJobExit, true, 'case-insensitive');
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'false'])).whenJobExit, false);
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'yes'])).whenJobExit, false, 'only "true" marks a sidecar');
  t.same(readMarkers(env([ENV_WITH_IMAGE, 'quick-exit:1'])).quickExitImage, 'quick-exit:1');
  t.same(readMarkers(env([ENV_WITH_IMAGE, ''])).quickExitImage, undefined, 'an empty image is no marker');
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'true'], [ENV_IGNORE_EXIT_CODE, 'True'])).ignoreExitCode, true);
  t.same(readMarkers({ env: [{ name: ENV_WHEN_JOB_EXIT, valueFrom: { fieldRef: { fieldPath: 'x' } } }] }).whenJobExit, false, 'valueFrom cannot be read');
  t.same(readMarkers({ env: 'garbage' }), { whenJobExit: false, quickExitImage: undefined, ignoreExitCode: false }, 'malformed env');
});

t.test('a name defined twice is read as OpenKruise reads it', async (t) => {
  const whenJobExit = (...values: string[]) => readMarkers(env(...values.map((value): [string, string] => [ENV_WHEN_JOB_EXIT, value]))).whenJobExit;
  t.equal(whenJobExit('true', 'false'), true, '"true" then "false": a sidecar (any "true")');
  t.equal(whenJobExit('false', 'TRUE'), true, '"false" then "TRUE": a sidecar');
  t.equal(whenJobExit('yes', ''), false, 'no "true" at all: not a sidecar');
  const ignore = (...values: string[]) =>
    readMarkers(env([ENV_WHEN_JOB_EXIT, 'true'], ...values.map((value): [string, string] => [ENV_IGNORE_EXIT_CODE, value]))).ignoreExitCode;
  t.equal(ignore('true', 'false'), true, 'ignore exit code: any "true"');
  t.equal(ignore('false', '1'), false);
  const image = (...values: string[]) => readMarkers(env(...values.map((value): [string, string] => [ENV_WITH_IMAGE, value]))).quickExitImage;
  t.equal(image('quick-exit:1', 'quick-exit:2'), 'quick-exit:1', 'the first quick-exit image, as OpenKruise picks it (not the last, which the environment holds)');
  t.equal(image('', 'quick-exit:2'), undefined, 'an empty first definition: no image to use');
  t.equal(readMarkers({ env: [{ name: ENV_WITH_IMAGE, valueFrom: { fieldRef: { fieldPath: 'x' } } }, { name: ENV_WITH_IMAGE, value: 'quick-exit:2' }] }).quickExitImage, undefined, 'a first definition through valueFrom reads as empty');
});

t.test('values other than "true" mean "not a sidecar", as in OpenKruise', async (t) => {
  for (const value of ['', '1', 'yes', 'on', ' true', 'true ']) {
    t.equal(readMarkers(env([ENV_WHEN_JOB_EXIT, value])).whenJobExit, false, JSON.stringify(value));
    t.same(classifyContainers({ containers: [env([ENV_WHEN_JOB_EXIT, value])] }).map((role) => role.role), ['main'], `${JSON.stringify(value)}: a main container`);
  }
  for (const value of ['true', 'True', 'TRUE', 'tRuE']) t.equal(readMarkers(env([ENV_WHEN_JOB_EXIT, value])).whenJobExit, true, JSON.stringify(value));
});

t.test('classification: main or sidecar', async (t) => {
  const roles = classifyContainers({
    containers: [
      { name: 'main', image: 'app:1' },
      env([ENV_WHEN_JOB_EXIT, 'true']),
      env([ENV_WITH_IMAGE, 'quick-exit:1']),
      env([ENV_WHEN_JOB_EXIT, 'false']),
      env([ENV_IGNORE_EXIT_CODE, 'true']),
    ],
    initContainers: [env([ENV_WHEN_JOB_EXIT, 'true'])],
  });
  t.same(roles.map((r) => r.role), ['main', 'sidecar', 'sidecar', 'main', 'main'], 'ignore-exit-code alone does not make a sidecar; init containers are not classified');
  t.same(roles.map((r) => r.index), [0, 1, 2, 3, 4]);
  t.same(classifyContainers({}), []);
});
