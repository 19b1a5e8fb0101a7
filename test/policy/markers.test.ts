import t from 'tap';
import {
  ENV_GRACE_PERIOD,
  ENV_IGNORE_EXIT_CODE,
  ENV_STOP,
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  POD_ANNOTATIONS,
  SIGNAL,
  classifyContainers,
  readMarkers,
} from '../../src/policy/index.ts';

const env = (...pairs: Array<[string, string]>) => ({ name: 'c', image: 'app:1', env: pairs.map(([name, value]) => ({ name, value })) });

t.test('env var table (README)', async (t) => {
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'true'])), { whenJobExit: true, quickExitImage: undefined, ignoreExitCode: false, stop: SIGNAL, gracePeriodSeconds: undefined });
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'TRUE'])).whenJobExit, true, 'case-insensitive');
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'false'])).whenJobExit, false);
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'yes'])).whenJobExit, false, 'only "true" marks a sidecar');
  t.same(readMarkers(env([ENV_WITH_IMAGE, 'quick-exit:1'])).quickExitImage, 'quick-exit:1');
  t.same(readMarkers(env([ENV_WITH_IMAGE, ''])).quickExitImage, undefined, 'an empty image is no marker');
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'true'], [ENV_IGNORE_EXIT_CODE, 'True'])).ignoreExitCode, true);
  t.same(readMarkers({ env: [{ name: ENV_WHEN_JOB_EXIT, valueFrom: { fieldRef: { fieldPath: 'x' } } }] }).whenJobExit, false, 'valueFrom cannot be read');
  t.same(readMarkers({ env: 'garbage' }), { whenJobExit: false, quickExitImage: undefined, ignoreExitCode: false, stop: SIGNAL, gracePeriodSeconds: undefined }, 'malformed env');
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

t.test("the add-on's own env: how a sidecar is stopped and how long it is given", async (t) => {
  t.same(readMarkers(env([ENV_WHEN_JOB_EXIT, 'true'], [ENV_STOP, 'istio-proxy'])).stop, { kind: 'http', method: 'POST', url: 'http://localhost:15020/quitquitquit', proxy: 'istio-proxy' });
  t.same(readMarkers(env([ENV_STOP, 'POST http://127.0.0.1:8080/quit'])).stop, { kind: 'http', method: 'POST', url: 'http://127.0.0.1:8080/quit' }, 'any loopback request');
  t.same(readMarkers(env([ENV_STOP, 'POST http://10.0.0.1:8080/quit'])).stop, SIGNAL, 'a request elsewhere than the loopback counts as unset');
  t.equal(readMarkers(env([ENV_GRACE_PERIOD, '12'])).gracePeriodSeconds, 12);
  t.equal(readMarkers(env([ENV_GRACE_PERIOD, '12s'])).gracePeriodSeconds, undefined, 'whole seconds only, as terminationGracePeriodSeconds');
});

t.test('the pod annotations name sidecars, and win over the env', async (t) => {
  const annotations = {
    [POD_ANNOTATIONS.sidecars]: ' istio-proxy , log-agent',
    [POD_ANNOTATIONS.ignoreExitCode]: 'istio-proxy',
    [`${POD_ANNOTATIONS.stopPrefix}istio-proxy`]: 'istio-proxy:15021',
    [`${POD_ANNOTATIONS.gracePeriodPrefix}log-agent`]: '5',
  };
  const roles = classifyContainers({ containers: [{ name: 'main' }, { name: 'istio-proxy', env: [{ name: ENV_STOP, value: 'signal' }] }, { name: 'log-agent' }] }, annotations);
  t.same(roles.map((role) => [role.name, role.role]), [['main', 'main'], ['istio-proxy', 'sidecar'], ['log-agent', 'sidecar']]);
  t.match(roles[1]!.markers, { whenJobExit: true, ignoreExitCode: true, stop: { kind: 'http', url: 'http://localhost:15021/quitquitquit' } }, 'the annotation wins over the env');
  t.match(roles[2]!.markers, { whenJobExit: true, ignoreExitCode: false, stop: SIGNAL, gracePeriodSeconds: 5 });
  t.same(classifyContainers({ containers: [{ name: 'main' }, { name: 'log-agent' }] }).map((role) => role.role), ['main', 'main'], 'without the annotations, no sidecar');
});
