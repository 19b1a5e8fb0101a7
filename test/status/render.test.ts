// How src/status/render.ts prints, called directly: the table of pods (text, wide, with or without
// the namespace), one pod's story as prose, both as JSON and YAML, the note of what could not be
// read, and ages as kubectl prints them.
import t from 'tap';
import { parse } from 'yaml';
import { MANAGED_LABEL } from '../../src/policy/index.ts';
import { age, limitsNote, renderList, renderStory } from '../../src/status/render.ts';
import type { PodStory } from '../../src/status/story-types.ts';

const now = new Date('2026-01-01T00:05:00Z');

const story: PodStory = {
  namespace: 'team',
  pod: 'job-abc',
  job: 'nightly',
  node: 'node-a',
  nodeKind: 'normal',
  managed: 'true',
  state: 'stopping',
  since: '2026-01-01T00:04:00Z',
  mechanism: 'crr',
  lastEvent: { type: 'Normal', reason: 'SidecarTerminator', message: `stop requested:\n${'x'.repeat(100)}` },
  restartPolicy: 'Never',
  containers: [
    { name: 'main', role: 'main', markers: [], status: 'exited 0 at 2026-01-01T00:04:00Z' },
    { name: 'proxy', role: 'sidecar', markers: ['KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true"'], status: 'running since 2026-01-01T00:00:00Z', mechanism: 'crr' },
  ],
  trigger: 'restartPolicy Never: the rule',
  actions: [{ time: '2026-01-01T00:04:01Z', what: 'event Normal SidecarTerminator: stop requested' }, { what: 'untimed' }],
  waitingFor: 'kruise-daemon to stop proxy',
  notManaged: [],
  advice: ['Check kruise-daemon.'],
  limits: [],
};
const bare: PodStory = { ...story, pod: 'bare', job: undefined, node: undefined, nodeKind: 'unknown', managed: undefined, since: undefined, lastEvent: undefined, containers: [], actions: [], waitingFor: undefined, advice: [] };

t.test('the table: a column each, aligned; missing values as -; the last event on one line, clipped', async (t) => {
  const lines = renderList({ items: [story, bare], limits: [] }, 'text', now, false).split('\n');
  t.equal(lines.length, 4, 'a header, two rows, and the final newline');
  t.match(lines[0], /^POD {7}JOB {7}NODE {6}MECHANISM {3}STATE {6}SINCE {3}LAST EVENT$/);
  t.match(lines[1], /^job-abc {3}nightly {3}normal {4}crr {9}stopping {3}60s {5}stop requested: x+\.\.\.$/);
  t.equal(lines[1]!.length - lines[1]!.indexOf('stop requested'), 80, 'the event clipped to 80 characters');
  t.match(lines[2], /^bare {6}- {9}unknown {3}crr {9}stopping {3}- {7}-$/);
  t.equal(lines[3], '');
});

t.test('the wide table: the namespace first, the event whole, the node name, sidecars and what is awaited', async (t) => {
  const [header, row, bareRow] = renderList({ items: [story, bare], limits: [] }, 'wide', now, true).split('\n');
  t.match(header, /^NAMESPACE {3}POD .* LAST EVENT +NODE NAME {3}SIDECARS {3}WAITING FOR$/);
  t.match(row, /^team {8}job-abc .*stop requested: x{100} {3}node-a {6}proxy {6}kruise-daemon to stop proxy$/);
  t.match(bareRow, / - {11}- {10}-$/, 'no node, no sidecar, nothing awaited');
});

t.test('JSON and YAML: the list and the story as they are', async (t) => {
  const list = { items: [story], limits: ['list nodes'] };
  t.same(JSON.parse(renderList(list, 'json', now, false)), list);
  t.same(parse(renderList(list, 'yaml', now, false)), list);
  t.same(JSON.parse(renderStory(story, 'json', now)), story);
  t.same(parse(renderStory(story, 'yaml', now)), story);
  t.match(renderStory(story, 'json', now), /\n$/);
});

t.test("a story as prose: its fields, containers with markers and mechanism, then each section it has", async (t) => {
  t.equal(renderStory({ ...story, limits: ['list events'] }, 'text', now), [
    'Pod:         team/job-abc',
    'Job:         nightly',
    'Node:        node-a (normal)',
    `Managed:     yes (label ${MANAGED_LABEL}=true)`,
    'State:       stopping since 2026-01-01T00:04:00Z (60s ago)',
    'Trigger:     restartPolicy Never: the rule',
    '',
    'Containers:',
    '  main   main     exited 0 at 2026-01-01T00:04:00Z',
    '  proxy  sidecar  running since 2026-01-01T00:00:00Z',
    '         KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true"',
    '         stopped by: crr (an OpenKruise ContainerRecreateRequest; kruise-daemon stops it)',
    '',
    'What happened:',
    '  2026-01-01T00:04:01Z  event Normal SidecarTerminator: stop requested',
    '                        untimed',
    '',
    'Waiting for: kruise-daemon to stop proxy',
    '',
    'What you can do:',
    '  - Check kruise-daemon.',
    '',
    'Not shown, for lack of permission to: list events.',
    '',
  ].join('\n'));
});

t.test('sidecars the cluster\'s injected-sidecar policy named: a line after the trigger, naming the entries', async (t) => {
  const policyLine = (injectedSidecarPolicy?: string[]) => renderStory({ ...story, ...(injectedSidecarPolicy ? { injectedSidecarPolicy } : {}) }, 'text', now).split('\n')[6];
  t.equal(policyLine(['istio']), "Policy:      entry istio of the cluster's injected-sidecar policy named sidecars of this pod at admission, in its sidecar-terminator.io/sidecars annotation");
  t.match(policyLine(['istio', 'vault-agent']), /^Policy: {6}entries istio, vault-agent of /);
  t.equal(policyLine(), '', 'no line without it');
  t.same((JSON.parse(renderStory({ ...story, injectedSidecarPolicy: ['istio'] }, 'json', now)) as PodStory).injectedSidecarPolicy, ['istio'], 'in JSON as a list');
});

t.test('a story without job, node, label or sections: only what it has', async (t) => {
  const text = renderStory({ ...bare, containers: [story.containers[0]!], notManaged: ['no container is marked'] }, 'text', now);
  t.match(text, /^Pod: {9}team\/bare\nNode: {8}not scheduled yet\nManaged: {5}no \(no sidecar-terminator\.io\/managed label\)\nState: {7}stopping\n/);
  t.match(text, /\n\nWhy the add-on does not manage it:\n {2}- no container is marked\n$/);
  t.notMatch(text, /Job:|What happened|Waiting for|What you can do|Not shown/);
});

t.test('each stop means in words', async (t) => {
  const means = (mechanism: PodStory['containers'][number]['mechanism']) => /stopped by: (.*)/.exec(renderStory({ ...bare, containers: [{ ...story.containers[1]!, mechanism }] }, 'text', now))?.[1];
  t.match(means('signal'), /^signal \(an ephemeral container sends it SIGTERM/);
  t.match(means('kill'), /^kill \(crr or signal: the watcher's --kill-mechanism decides\)/);
  t.match(means('image'), /^image \(its image is replaced in place/);
  t.equal(means('none'), 'nothing: it cannot be stopped on this node');
  t.equal(means(undefined), undefined, 'no line without a mechanism');
});

t.test('limitsNote: every missing permission in one sentence', async (t) => {
  t.equal(limitsNote(['get nodes', 'list events']), 'Not shown, for lack of permission to: get nodes; list events.');
});

t.test("age: kubectl's units at their boundaries, and a time to come as 0s", async (t) => {
  const ago = (seconds: number) => age(new Date(now.getTime() - seconds * 1000).toISOString(), now);
  t.same(
    [ago(0), ago(120), ago(125), ago(599), ago(3599), ago(3600), ago(3900), ago(3 * 3600 - 1), ago(47 * 3600 + 3599), ago(48 * 3600)],
    ['0s', '2m', '2m5s', '9m59s', '59m', '1h', '1h5m', '2h59m', '47h', '2d'],
  );
  t.equal(age('2026-01-01T00:06:00Z', now), '0s');
});
