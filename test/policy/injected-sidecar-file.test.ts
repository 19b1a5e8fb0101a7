// The injected-sidecar policy's file as serve reads it: every problem named by its path, with the fix.
import t, { type Test } from 'tap';
import { EMPTY_INJECTED_SIDECAR_POLICY, KNOWN_PROXIES, policyNeedsNamespaceLabels } from '../../src/policy/index.ts';
import { parseInjectedSidecarPolicy } from '../../src/policy/injected-sidecar-file.ts';
import { injectedSidecarPolicy } from '../support/injected-sidecar-policy.ts';

/** The errors of `text`, failing the test when it has none. */
function errorsOf(t: Test, text: string): string[] {
  const parsed = parseInjectedSidecarPolicy(text);
  if ('policy' in parsed) {
    t.fail(`the policy was accepted: ${JSON.stringify(parsed.policy)}`);
    return [];
  }
  return parsed.errors;
}

/** The errors of a policy with this one entry (YAML flow mapping text). */
const entryErrors = (t: Test, entry: string) => errorsOf(t, `entries:\n  - ${entry}\n`);

t.test('reading the policy file', async (t) => {
  t.test('an entry with name and container only: SIGTERM, Job pods', async (t) => {
    t.same(injectedSidecarPolicy('entries:\n  - {name: vault-agent, container: vault-agent}\n'), {
      entries: [{ name: 'vault-agent', container: 'vault-agent', owners: [{ apiVersion: 'batch/v1', kind: 'Job' }] }],
    });
  });

  t.test('every field', async (t) => {
    const policy = injectedSidecarPolicy(
      `entries:
  - name: dapr
    container: daprd
    stop: "  POST http://localhost:3500/v1.0/shutdown "
    gracePeriodSeconds: 0
    ignoreExitCode: true
    namespaceSelector:
      matchLabels: {dapr.io/enabled: "true", tier: ""}
      matchExpressions:
        - {key: env, operator: In, values: [prod, staging]}
        - {key: example.com/legacy, operator: DoesNotExist}
    owners:
      - {apiVersion: batch/v1, kind: Job}
      - {apiVersion: v1, kind: Pod}
`,
    );
    t.same(policy.entries, [
      {
        name: 'dapr',
        container: 'daprd',
        stop: 'POST http://localhost:3500/v1.0/shutdown',
        gracePeriodSeconds: 0,
        ignoreExitCode: true,
        namespaceSelector: {
          matchLabels: { 'dapr.io/enabled': 'true', tier: '' },
          matchExpressions: [
            { key: 'env', operator: 'In', values: ['prod', 'staging'] },
            { key: 'example.com/legacy', operator: 'DoesNotExist' },
          ],
        },
        owners: [
          { apiVersion: 'batch/v1', kind: 'Job' },
          { apiVersion: 'v1', kind: 'Pod' },
        ],
      },
    ]);
  });

  t.test('JSON is read as well', async (t) => {
    t.same(injectedSidecarPolicy('{"entries": [{"name": "linkerd", "container": "linkerd-proxy", "stop": "linkerd-proxy:4192", "ignoreExitCode": false}]}').entries, [
      { name: 'linkerd', container: 'linkerd-proxy', stop: 'linkerd-proxy:4192', ignoreExitCode: false, owners: [{ apiVersion: 'batch/v1', kind: 'Job' }] },
    ]);
  });

  t.test('a policy with no entry is the empty policy', async (t) => {
    t.same(injectedSidecarPolicy('entries: []\n'), EMPTY_INJECTED_SIDECAR_POLICY);
    t.same(EMPTY_INJECTED_SIDECAR_POLICY, { entries: [] });
  });

  t.test('every stop method of stop-method.ts is accepted, as written', async (t) => {
    for (const stop of ['signal', ...Object.keys(KNOWN_PROXIES), 'istio-proxy:15021', 'PUT http://127.0.0.1:8080/stop', 'GET http://[::1]:9000/']) {
      t.equal(injectedSidecarPolicy(`entries:\n  - {name: a, container: b, stop: "${stop}"}\n`).entries[0]!.stop, stop, stop);
    }
  });

  t.test('an empty namespaceSelector matches every namespace, as none does, so it is left out', async (t) => {
    for (const selector of ['{}', '{matchLabels: {}}', '{matchExpressions: []}', '{matchLabels: {}, matchExpressions: []}']) {
      const policy = injectedSidecarPolicy(`entries:\n  - {name: a, container: b, namespaceSelector: ${selector}}\n`);
      t.equal(policy.entries[0]!.namespaceSelector, undefined, selector);
      t.equal(policyNeedsNamespaceLabels(policy), false, `${selector}: no namespace labels needed`);
    }
  });
});

t.test('a file that is not a policy', async (t) => {
  t.test('not YAML: where the parser stopped, on one line', async (t) => {
    const [error, ...more] = errorsOf(t, 'entries: [\n');
    t.same(more, []);
    t.match(error, /^not YAML or JSON: .* at line \d+, column \d+$/);
  });

  t.test('a key given twice (the second would silently win)', async (t) => {
    t.match(errorsOf(t, 'entries:\n  - name: a\n    name: b\n    container: c\n'), [/^not YAML or JSON: Map keys must be unique at line 3, column 5$/]);
  });

  t.test('two documents', async (t) => {
    t.match(errorsOf(t, 'entries: []\n---\nentries: []\n'), [/^not YAML or JSON: .*multiple documents/]);
  });

  t.test('aliases beyond a small budget', async (t) => {
    const aliases = Array.from({ length: 30 }, () => '*x').join(', ');
    t.match(errorsOf(t, `anchor: &x [a]\nentries: [${aliases}]\n`), [/^not YAML or JSON: .*alias/i]);
  });

  t.test('empty, a scalar or a list', async (t) => {
    for (const text of ['', '# nothing\n', 'entries\n', '- {name: a, container: b}\n']) {
      t.same(errorsOf(t, text), ['the file: must be a mapping with one field, entries: the list of injected sidecars, e.g. `entries: []`'], JSON.stringify(text));
    }
  });

  t.test('no entries, or entries not a list', async (t) => {
    const missing = 'entries: required: a list of injected sidecars, each with name and container (`entries: []` for none)';
    t.same(errorsOf(t, 'entry: []\n'), ['entry: unknown field: the fields here are entries', missing]);
    t.same(errorsOf(t, 'entries:\n'), [missing]);
    t.same(errorsOf(t, 'entries: {name: a, container: b}\n'), [missing]);
  });

  t.test('an entry that is not a mapping', async (t) => {
    t.same(errorsOf(t, 'entries: [istio]\n'), ['entries[0]: must be a mapping with at least name and container, e.g. {name: istio, container: istio-proxy}']);
  });

  t.test('every problem at once, each named by its path', async (t) => {
    t.same(errorsOf(t, 'extra: 1\nentries:\n  - {name: a, container: b, stop: kill}\n  - {name: B, container: c, ignoreExitCode: yes}\n'), [
      'extra: unknown field: the fields here are entries',
      `entries[0].stop: not a stop method: expected signal, one of ${Object.keys(KNOWN_PROXIES).join(', ')} (optionally with :PORT), or "METHOD http://localhost:PORT/PATH" (METHOD one of POST, PUT, GET, DELETE; host localhost, 127.0.0.1 or [::1])`,
      "entries[1].name: must be lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit: a name for the entry, e.g. istio",
      'entries[1].ignoreExitCode: must be true or false (unquoted)',
    ]);
  });
});

t.test("an entry's fields", async (t) => {
  t.test('name and container are required DNS labels', async (t) => {
    const rule = "must be lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit";
    t.same(entryErrors(t, '{container: istio-proxy}'), ['entries[0].name: required: a name for the entry, e.g. istio']);
    t.same(entryErrors(t, '{name: istio}'), ['entries[0].container: required: the name of the container the injector adds, e.g. istio-proxy']);
    for (const bad of ['Istio', '-istio', 'istio-', 'is_tio', 'a'.repeat(64), '42', '""']) {
      t.same(entryErrors(t, `{name: ${bad}, container: c}`), [`entries[0].name: ${rule}: a name for the entry, e.g. istio`], `name ${bad}`);
      t.same(entryErrors(t, `{name: n, container: ${bad}}`), [`entries[0].container: ${rule}: the name of the container the injector adds, e.g. istio-proxy`], `container ${bad}`);
    }
    t.equal(injectedSidecarPolicy(`entries:\n  - {name: ${'a'.repeat(63)}, container: "0"}\n`).entries[0]!.name, 'a'.repeat(63), '63 characters, a digit alone');
  });

  t.test('an unknown field is an error: a typo must not be a silent no-op', async (t) => {
    t.same(entryErrors(t, '{name: a, container: b, gracePeriod: 30}'), [
      'entries[0].gracePeriod: unknown field: the fields here are name, container, stop, gracePeriodSeconds, ignoreExitCode, namespaceSelector, owners',
    ]);
  });

  t.test('stop: a stop method in stop-method.ts syntax, on the pod loopback only', async (t) => {
    t.same(entryErrors(t, '{name: a, container: b, stop: "POST http://metadata.google.internal:80/x"}'), [
      "entries[0].stop: the request may only go to the pod's own loopback (localhost, 127.0.0.1 or [::1]), not metadata.google.internal",
    ]);
    t.same(entryErrors(t, '{name: a, container: b, stop: "POST http://10.0.0.1:80/x"}'), ["entries[0].stop: the request may only go to the pod's own loopback (localhost, 127.0.0.1 or [::1]), not 10.0.0.1"]);
    t.same(entryErrors(t, '{name: a, container: b, stop: "istio-proxy:0"}'), ['entries[0].stop: the port of istio-proxy must be a number from 1 to 65535']);
    t.same(entryErrors(t, '{name: a, container: b, stop: 15020}'), [`entries[0].stop: must be a string: signal, one of ${Object.keys(KNOWN_PROXIES).join(', ')} (optionally with :PORT), or "METHOD http://localhost:PORT/PATH" (METHOD one of POST, PUT, GET, DELETE; host localhost, 127.0.0.1 or [::1])`]);
  });

  t.test('gracePeriodSeconds: a whole number from 0 to a day', async (t) => {
    const error = 'entries[0].gracePeriodSeconds: must be a whole number of seconds from 0 to 86400, as terminationGracePeriodSeconds';
    for (const bad of ['-1', '1.5', '"30"', '86401', 'true', '1e21']) t.same(entryErrors(t, `{name: a, container: b, gracePeriodSeconds: ${bad}}`), [error], bad);
    t.equal(injectedSidecarPolicy('entries:\n  - {name: a, container: b, gracePeriodSeconds: 86400}\n').entries[0]!.gracePeriodSeconds, 86400);
  });

  t.test('ignoreExitCode: true or false', async (t) => {
    t.same(entryErrors(t, '{name: a, container: b, ignoreExitCode: "true"}'), ['entries[0].ignoreExitCode: must be true or false (unquoted)']);
  });

  t.test('owners: a list of {apiVersion, kind}', async (t) => {
    const list = 'entries[0].owners: must be a list of at least one {apiVersion, kind}, e.g. [{apiVersion: batch/v1, kind: Job}]; leave it out for Job pods';
    t.same(entryErrors(t, '{name: a, container: b, owners: []}'), [list], 'an empty list would apply to no pod');
    t.same(entryErrors(t, '{name: a, container: b, owners: {apiVersion: batch/v1, kind: Job}}'), [list]);
    t.same(entryErrors(t, '{name: a, container: b, owners: [Job]}'), [
      'entries[0].owners[0]: must be a mapping {apiVersion, kind}, e.g. {apiVersion: batch/v1, kind: Job}; {apiVersion: v1, kind: Pod} for pods no controller owns',
    ]);
    t.same(entryErrors(t, '{name: a, container: b, owners: [{kind: Job, version: v1}, {apiVersion: batch/v1, kind: ""}]}'), [
      'entries[0].owners[0].version: unknown field: the fields here are apiVersion, kind',
      'entries[0].owners[0].apiVersion: required: the apiVersion of the controller, e.g. batch/v1',
      'entries[0].owners[1].kind: required: the kind of the controller, e.g. Job',
    ]);
  });

  t.test('two entries of one name, or for one container', async (t) => {
    t.same(errorsOf(t, 'entries:\n  - {name: mesh, container: istio-proxy}\n  - {name: mesh, container: linkerd-proxy}\n  - {name: other, container: istio-proxy}\n'), [
      'entries[1].name: mesh is also the name of entries[0]: give each entry a name of its own',
      'entries[2].container: istio-proxy is also the container of entries[0]: one entry per container: merge the two',
    ]);
    t.same(errorsOf(t, 'entries:\n  - {name: a}\n  - {name: b}\n'), [
      'entries[0].container: required: the name of the container the injector adds, e.g. istio-proxy',
      'entries[1].container: required: the name of the container the injector adds, e.g. istio-proxy',
    ], 'names or containers that cannot be read are no duplicates');
  });
});

t.test("an entry's namespaceSelector", async (t) => {
  const selectorErrors = (t: Test, selector: string) => entryErrors(t, `{name: a, container: b, namespaceSelector: ${selector}}`);
  const at = 'entries[0].namespaceSelector';

  t.test('a mapping of matchLabels and matchExpressions', async (t) => {
    t.same(selectorErrors(t, 'istio-injection=enabled'), [`${at}: must be a label selector, a mapping with matchLabels and/or matchExpressions, e.g. {matchLabels: {istio-injection: enabled}}`]);
    t.same(selectorErrors(t, '{matchLabel: {a: b}}'), [`${at}.matchLabel: unknown field: the fields here are matchLabels, matchExpressions`]);
  });

  t.test('matchLabels: label keys to label values, the values strings', async (t) => {
    t.same(selectorErrors(t, '{matchLabels: [a]}'), [`${at}.matchLabels: must be a mapping of label keys to values, e.g. {istio-injection: enabled}`]);
    t.same(selectorErrors(t, '{matchLabels: {istio-injection: true}}'), [`${at}.matchLabels.istio-injection: label values are strings: quote it, e.g. "true"`]);
    t.same(selectorErrors(t, '{matchLabels: {a: "not a value"}}'), [`${at}.matchLabels.a: not a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`]);
    t.same(selectorErrors(t, `{matchLabels: {a: ${'v'.repeat(64)}}}`), [`${at}.matchLabels.a: not a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`]);
    const key = "not a label key: [PREFIX/]NAME, NAME at most 63 letters, digits, '-', '_' or '.', PREFIX a DNS subdomain";
    for (const bad of ['"-a"', '"Example.com/a"', '"example.com/"', '"/a"', '"a/b/c"', `"${'p'.repeat(254)}/a"`]) {
      t.same(selectorErrors(t, `{matchLabels: {${bad}: v}}`), [`${at}.matchLabels.${JSON.parse(bad) as string}: ${key}`], bad);
    }
    t.same(injectedSidecarPolicy(`entries:\n  - {name: a, container: b, namespaceSelector: {matchLabels: {"kubernetes.io/metadata.name": team_A.1, "${'p'.repeat(253)}/a": ""}}}\n`).entries[0]!.namespaceSelector, {
      matchLabels: { 'kubernetes.io/metadata.name': 'team_A.1', [`${'p'.repeat(253)}/a`]: '' },
    });
  });

  t.test('matchExpressions: a list of {key, operator, values}', async (t) => {
    const path = `${at}.matchExpressions[0]`;
    t.same(selectorErrors(t, '{matchExpressions: {key: a, operator: Exists}}'), [`${at}.matchExpressions: must be a list of {key, operator, values}`]);
    t.same(selectorErrors(t, '{matchExpressions: [a]}'), [`${path}: must be a mapping {key, operator, values}, e.g. {key: istio-injection, operator: In, values: [enabled]}`]);
    t.same(selectorErrors(t, '{matchExpressions: [{key: a, operator: Exists, value: b}]}'), [`${path}.value: unknown field: the fields here are key, operator, values`]);
    t.same(selectorErrors(t, '{matchExpressions: [{operator: Exists}]}'), [`${path}.key: required: the label key the expression tests`]);
    t.same(selectorErrors(t, '{matchExpressions: [{key: 7, operator: Exists}]}'), [
      `${path}.key: not a label key: [PREFIX/]NAME, NAME at most 63 letters, digits, '-', '_' or '.', PREFIX a DNS subdomain`,
    ]);
    t.same(selectorErrors(t, '{matchExpressions: [{key: a, operator: in, values: [b]}]}'), [`${path}.operator: must be one of In, NotIn, Exists, DoesNotExist`]);
    t.same(selectorErrors(t, '{matchExpressions: [{key: a, values: [b]}]}'), [`${path}.operator: must be one of In, NotIn, Exists, DoesNotExist`]);
    t.same(selectorErrors(t, '{matchExpressions: [{key: a, operator: In}]}'), [`${path}.values: required with In: list at least one label value`]);
    t.same(selectorErrors(t, '{matchExpressions: [{key: a, operator: NotIn, values: []}]}'), [`${path}.values: required with NotIn: list at least one label value`]);
    t.same(selectorErrors(t, '{matchExpressions: [{key: a, operator: Exists, values: [b]}]}'), [`${path}.values: must be left out with Exists, which tests only whether the label is set`]);
    t.same(selectorErrors(t, '{matchExpressions: [{key: a, operator: DoesNotExist, values: [b]}]}'), [`${path}.values: must be left out with DoesNotExist, which tests only whether the label is set`]);
    t.same(selectorErrors(t, '{matchExpressions: [{key: a, operator: In, values: b}]}'), [`${path}.values: must be a list of label values`, `${path}.values: required with In: list at least one label value`]);
    t.same(selectorErrors(t, '{matchExpressions: [{key: a, operator: In, values: [1, "b c"]}]}'), [
      `${path}.values[0]: label values are strings: quote it, e.g. "true"`,
      `${path}.values[1]: not a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
    ]);
    t.same(injectedSidecarPolicy('entries:\n  - {name: a, container: b, namespaceSelector: {matchExpressions: [{key: a, operator: Exists, values: []}, {key: b, operator: NotIn, values: [""]}]}}\n').entries[0]!.namespaceSelector, {
      matchExpressions: [
        { key: 'a', operator: 'Exists' },
        { key: 'b', operator: 'NotIn', values: [''] },
      ],
    }, 'Exists with an empty list of values; NotIn the empty value');
  });
});
