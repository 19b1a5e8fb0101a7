import t from 'tap';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, classifyContainers, readMarkers } from '../../src/policy/index.ts';

const env = (...pairs: Array<[string, string]>) => ({ name: 'c', image: 'app:1', env: pairs.map(([name, value]) => ({ name, value })) });

t.test('env var table (README.md, first table)', async (t) => {
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'true'])), { whenJobExit: true, quickExitImage: undefined, ignoreExitCode: false });
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'TRUE'])).whenJobExit, true, 'case-insensitive');
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'false'])).whenJobExit, false);
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'yes'])).whenJobExit, false, 'only "true" marks a sidecar');
  t.same(readMarkers(env([ENV_WITH_IMAGE, 'quick-exit:1'])).quickExitImage, 'quick-exit:1');
  t.same(readMarkers(env([ENV_WITH_IMAGE, ''])).quickExitImage, undefined, 'an empty image is no marker');
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'true'], [ENV_IGNORE_EXIT_CODE, 'True'])).ignoreExitCode, true);
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'true'], [ENV_WHEN_JOB_EXIT, 'false'])).whenJobExit, false, 'the last definition wins');
  t.same(readMarkers({ env: [{ name: ENV_WHEN_JOB_EXIT, valueFrom: { fieldRef: { fieldPath: 'x' } } }] }).whenJobExit, false, 'valueFrom cannot be read');
  t.same(readMarkers({ env: 'garbage' }), { whenJobExit: false, quickExitImage: undefined, ignoreExitCode: false }, 'malformed env');
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
