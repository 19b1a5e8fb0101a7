// The operator's policy for sidecars other webhooks inject: the file read (every problem named by
// its path, with the fix) and the policy applied to a pod as the annotations its author would write.
import t, { type Test } from 'tap';
import {
  EMPTY_INJECTED_SIDECAR_POLICY,
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  INJECTED_POLICY_ANNOTATION,
  KNOWN_PROXIES,
  POD_ANNOTATIONS,
  classifyContainers,
  injectedSidecarAnnotations,
  labelSelectorMatches,
  parseInjectedSidecarPolicy,
  policyNeedsNamespaceLabels,
  type InjectedSidecarPod,
  type InjectedSidecarPolicy,
} from '../../src/policy/index.ts';

const SIDECARS = POD_ANNOTATIONS.sidecars;
const IGNORE = POD_ANNOTATIONS.ignoreExitCode;
const stopOf = (container: string) => `${POD_ANNOTATIONS.stopPrefix}${container}`;
const graceOf = (container: string) => `${POD_ANNOTATIONS.gracePeriodPrefix}${container}`;

/** The policy of `text`, failing the test when it has errors. */
function policyOf(t: Test, text: string): InjectedSidecarPolicy {
  const parsed = parseInjectedSidecarPolicy(text);
  if ('errors' in parsed) {
    t.fail(`the policy has errors: ${parsed.errors.join('; ')}`);
    return EMPTY_INJECTED_SIDECAR_POLICY;
  }
  return parsed.policy;
}

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

const ISTIO = `entries:
  - name: istio
    container: istio-proxy
    stop: istio-proxy
`;

const JOB_OWNER = { apiVersion: 'batch/v1', kind: 'Job', name: 'work', uid: 'u1', controller: true };

/** A Job's pod (restartPolicy Never) with a main container `app` and these others, built anew for each test. */
function jobPod(containers: string[] = ['istio-proxy'], annotations?: Record<string, string>): InjectedSidecarPod & { metadata: { annotations?: Record<string, string>; ownerReferences?: unknown } } {
  return {
    metadata: { ...(annotations ? { annotations } : {}), ownerReferences: [{ ...JOB_OWNER }] },
    spec: { restartPolicy: 'Never', containers: ['app', ...containers].map((name) => ({ name, image: `${name}:1` })) },
  };
}

/** The pod with `annotations` merged over its own, as the webhook writes them on its mutated copy. */
function withAnnotations<P extends InjectedSidecarPod>(pod: P, annotations: Record<string, string>): P {
  const metadata = pod.metadata ?? {};
  return { ...pod, metadata: { ...metadata, annotations: { ...(metadata.annotations as Record<string, string> | undefined), ...annotations } } };
}

t.test('reading the policy file', async (t) => {
  t.test('an entry with name and container only: SIGTERM, Job pods', async (t) => {
    t.same(policyOf(t, 'entries:\n  - {name: vault-agent, container: vault-agent}\n'), {
      entries: [{ name: 'vault-agent', container: 'vault-agent', owners: [{ apiVersion: 'batch/v1', kind: 'Job' }] }],
    });
  });

  t.test('every field', async (t) => {
    const policy = policyOf(
      t,
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
    t.same(policyOf(t, '{"entries": [{"name": "linkerd", "container": "linkerd-proxy", "stop": "linkerd-proxy:4192", "ignoreExitCode": false}]}').entries, [
      { name: 'linkerd', container: 'linkerd-proxy', stop: 'linkerd-proxy:4192', ignoreExitCode: false, owners: [{ apiVersion: 'batch/v1', kind: 'Job' }] },
    ]);
  });

  t.test('a policy with no entry is the empty policy', async (t) => {
    t.same(policyOf(t, 'entries: []\n'), EMPTY_INJECTED_SIDECAR_POLICY);
    t.same(EMPTY_INJECTED_SIDECAR_POLICY, { entries: [] });
  });

  t.test('every stop method of stop-method.ts is accepted, as written', async (t) => {
    for (const stop of ['signal', ...Object.keys(KNOWN_PROXIES), 'istio-proxy:15021', 'PUT http://127.0.0.1:8080/stop', 'GET http://[::1]:9000/']) {
      t.equal(policyOf(t, `entries:\n  - {name: a, container: b, stop: "${stop}"}\n`).entries[0]!.stop, stop, stop);
    }
  });

  t.test('an empty namespaceSelector matches every namespace, as none does, so it is left out', async (t) => {
    for (const selector of ['{}', '{matchLabels: {}}', '{matchExpressions: []}', '{matchLabels: {}, matchExpressions: []}']) {
      const policy = policyOf(t, `entries:\n  - {name: a, container: b, namespaceSelector: ${selector}}\n`);
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
    t.equal(policyOf(t, `entries:\n  - {name: ${'a'.repeat(63)}, container: "0"}\n`).entries[0]!.name, 'a'.repeat(63), '63 characters, a digit alone');
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
    t.equal(policyOf(t, 'entries:\n  - {name: a, container: b, gracePeriodSeconds: 86400}\n').entries[0]!.gracePeriodSeconds, 86400);
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
    t.same(policyOf(t, `entries:\n  - {name: a, container: b, namespaceSelector: {matchLabels: {"kubernetes.io/metadata.name": team_A.1, "${'p'.repeat(253)}/a": ""}}}\n`).entries[0]!.namespaceSelector, {
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
    t.same(policyOf(t, 'entries:\n  - {name: a, container: b, namespaceSelector: {matchExpressions: [{key: a, operator: Exists, values: []}, {key: b, operator: NotIn, values: [""]}]}}\n').entries[0]!.namespaceSelector, {
      matchExpressions: [
        { key: 'a', operator: 'Exists' },
        { key: 'b', operator: 'NotIn', values: [''] },
      ],
    }, 'Exists with an empty list of values; NotIn the empty value');
  });
});

t.test('policyNeedsNamespaceLabels: when any entry has a namespaceSelector', async (t) => {
  t.equal(policyNeedsNamespaceLabels(EMPTY_INJECTED_SIDECAR_POLICY), false);
  t.equal(policyNeedsNamespaceLabels(policyOf(t, ISTIO)), false);
  t.equal(policyNeedsNamespaceLabels(policyOf(t, `${ISTIO}  - {name: linkerd, container: linkerd-proxy, namespaceSelector: {matchLabels: {mesh: linkerd}}}\n`)), true);
});

t.test('labelSelectorMatches: each operator, and labels the namespace does not have', async (t) => {
  const labels = { team: 'a', env: 'prod', empty: '' };
  t.equal(labelSelectorMatches({}, labels), true, 'the empty selector matches everything');
  t.equal(labelSelectorMatches({ matchLabels: { team: 'a', env: 'prod' } }, labels), true);
  t.equal(labelSelectorMatches({ matchLabels: { team: 'b' } }, labels), false);
  t.equal(labelSelectorMatches({ matchLabels: { owner: 'a' } }, labels), false, 'an unknown label');
  t.equal(labelSelectorMatches({ matchLabels: { empty: '' } }, labels), true);
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'env', operator: 'In', values: ['prod', 'staging'] }] }, labels), true);
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'env', operator: 'In', values: ['dev'] }] }, labels), false);
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'owner', operator: 'In', values: ['a'] }] }, labels), false, 'In: an unknown label');
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['dev'] }] }, labels), true);
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['prod'] }] }, labels), false);
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'owner', operator: 'NotIn', values: ['a'] }] }, labels), true, 'NotIn: an unknown label');
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'empty', operator: 'Exists' }] }, labels), true);
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'owner', operator: 'Exists' }] }, labels), false);
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'owner', operator: 'DoesNotExist' }] }, labels), true);
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] }, labels), false);
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'constructor', operator: 'Exists' }] }, labels), false, "an object's own labels only, never its prototype's");
  t.equal(labelSelectorMatches({ matchLabels: { team: 'a' }, matchExpressions: [{ key: 'env', operator: 'DoesNotExist' }] }, labels), false, 'every requirement must hold');
});

t.test('applied to a pod: the annotations its author would write', async (t) => {
  t.test('a Job pod with the injected container', async (t) => {
    const policy = policyOf(t, 'entries:\n  - {name: istio, container: istio-proxy, stop: istio-proxy, gracePeriodSeconds: 30, ignoreExitCode: true}\n');
    t.same(injectedSidecarAnnotations(jobPod(), undefined, policy), {
      annotations: {
        [SIDECARS]: 'istio-proxy',
        [IGNORE]: 'istio-proxy',
        [stopOf('istio-proxy')]: 'istio-proxy',
        [graceOf('istio-proxy')]: '30',
        [INJECTED_POLICY_ANNOTATION]: 'istio',
      },
      entries: ['istio'],
    });
  });

  t.test('only what the entry gives: no stop, grace period or ignore-exit-code of its own', async (t) => {
    t.same(injectedSidecarAnnotations(jobPod(['vault-agent']), undefined, policyOf(t, 'entries:\n  - {name: vault, container: vault-agent, ignoreExitCode: false}\n')), {
      annotations: { [SIDECARS]: 'vault-agent', [INJECTED_POLICY_ANNOTATION]: 'vault' },
      entries: ['vault'],
    });
  });

  t.test('the pod then has the sidecar, as if its author had written the annotations', async (t) => {
    const pod = jobPod();
    const output = injectedSidecarAnnotations(pod, undefined, policyOf(t, ISTIO))!;
    const roles = classifyContainers(pod.spec!, output.annotations);
    t.same(roles.map((role) => [role.name, role.role]), [['app', 'main'], ['istio-proxy', 'sidecar']]);
    t.same(roles[1]!.markers.stop, { kind: 'http', method: 'POST', url: 'http://localhost:15020/quitquitquit', proxy: 'istio-proxy' });
  });

  t.test('several entries: the lists joined, the entries named in the policy order', async (t) => {
    const policy = policyOf(
      t,
      `entries:
  - {name: vault, container: vault-agent, ignoreExitCode: true}
  - {name: istio, container: istio-proxy, stop: istio-proxy}
  - {name: dapr, container: daprd, ignoreExitCode: true}
  - {name: linkerd, container: linkerd-proxy}
`,
    );
    const pod = jobPod(['istio-proxy', 'daprd', 'vault-agent'], { [SIDECARS]: ' logs , metrics,logs', [IGNORE]: 'metrics' });
    t.same(injectedSidecarAnnotations(pod, undefined, policy), {
      annotations: {
        [SIDECARS]: 'logs,metrics,vault-agent,istio-proxy,daprd',
        [IGNORE]: 'metrics,vault-agent,daprd',
        [stopOf('istio-proxy')]: 'istio-proxy',
        [INJECTED_POLICY_ANNOTATION]: 'vault,istio,dapr',
      },
      entries: ['vault', 'istio', 'dapr'],
    });
  });

  t.test('no entry applies: undefined', async (t) => {
    t.equal(injectedSidecarAnnotations(jobPod(['linkerd-proxy']), undefined, policyOf(t, ISTIO)), undefined, 'the container is not in the pod');
    t.equal(injectedSidecarAnnotations(jobPod(), undefined, EMPTY_INJECTED_SIDECAR_POLICY), undefined, 'the empty policy');
    const native = jobPod([]);
    native.spec!.initContainers = [{ name: 'istio-proxy', image: 'proxy:1', restartPolicy: 'Always' }];
    t.equal(injectedSidecarAnnotations(native, undefined, policyOf(t, ISTIO)), undefined, 'an init container (a native sidecar stops itself)');
  });
});

t.test('restartPolicy: only pods that can finish', async (t) => {
  const policy = policyOf(t, ISTIO);
  const withPolicy = (restartPolicy: string | undefined) => {
    const pod = jobPod();
    pod.spec!.restartPolicy = restartPolicy;
    return injectedSidecarAnnotations(pod, undefined, policy);
  };
  t.equal(withPolicy('Always'), undefined, 'Always');
  t.equal(withPolicy(undefined), undefined, 'absent: Always');
  t.equal(withPolicy('Sometimes'), undefined, 'not a restart policy');
  t.same(withPolicy('OnFailure')?.entries, ['istio'], 'OnFailure');
  t.same(withPolicy('Never')?.entries, ['istio'], 'Never');
});

t.test("owners: by the pod's controller", async (t) => {
  const owned = (ownerReferences: unknown) => {
    const pod = jobPod();
    pod.metadata.ownerReferences = ownerReferences;
    return pod;
  };
  const applies = (policy: InjectedSidecarPolicy, ownerReferences: unknown) => injectedSidecarAnnotations(owned(ownerReferences), undefined, policy) !== undefined;

  t.test('by default, the pods of Jobs only', async (t) => {
    const policy = policyOf(t, ISTIO);
    t.equal(applies(policy, [{ ...JOB_OWNER }]), true, 'a Job pod');
    t.equal(applies(policy, [{ apiVersion: 'argoproj.io/v1alpha1', kind: 'Workflow', controller: true }]), false, 'an Argo Workflow pod (Argo stops its own sidecars)');
    t.equal(applies(policy, [{ apiVersion: 'tekton.dev/v1', kind: 'TaskRun', controller: true }]), false, 'a Tekton TaskRun pod');
    t.equal(applies(policy, [{ apiVersion: 'batch/v2', kind: 'Job', controller: true }]), false, 'another apiVersion');
    t.equal(applies(policy, undefined), false, 'a bare pod');
    t.equal(applies(policy, [{ ...JOB_OWNER, controller: false }]), false, 'a Job that owns the pod without controlling it: a bare pod');
    t.equal(applies(policy, [{ apiVersion: 'v1', kind: 'ConfigMap' }, { ...JOB_OWNER }]), true, 'the controller among other owners');
    t.equal(applies(policy, [{ controller: true }]), false, 'a controller reference without apiVersion and kind');
  });

  t.test('listed owners, and bare pods as {apiVersion: v1, kind: Pod}', async (t) => {
    const policy = policyOf(t, `${ISTIO}    owners: [{apiVersion: argoproj.io/v1alpha1, kind: Workflow}, {apiVersion: v1, kind: Pod}]\n`);
    t.equal(applies(policy, [{ apiVersion: 'argoproj.io/v1alpha1', kind: 'Workflow', controller: true }]), true, 'an Argo Workflow pod');
    t.equal(applies(policy, [{ ...JOB_OWNER }]), false, 'a Job pod, no longer listed');
    t.equal(applies(policy, undefined), true, 'a bare pod');
    t.equal(applies(policy, []), true, 'no owner: a bare pod');
    t.equal(applies(policy, 'garbage'), true, 'ownerReferences that cannot be read: no controller');
    t.equal(applies(policy, [null, 'x', { apiVersion: 'v1', kind: 'Pod' }]), true, 'references that are no controller');
    t.equal(applies(policy, [{ apiVersion: 'v1', kind: 'Pod', controller: true }]), true, 'a pod controlled by a Pod (as the owners say)');
  });
});

t.test('namespaceSelector: by the labels of the pod namespace', async (t) => {
  const policy = policyOf(t, `${ISTIO}    namespaceSelector: {matchLabels: {istio-injection: enabled}, matchExpressions: [{key: team, operator: NotIn, values: [mesh-free]}]}\n`);
  const applies = (labels: Record<string, string> | undefined) => injectedSidecarAnnotations(jobPod(), labels, policy) !== undefined;
  t.equal(applies({ 'istio-injection': 'enabled' }), true, 'matched');
  t.equal(applies({ 'istio-injection': 'enabled', team: 'a' }), true, 'matched, with another team');
  t.equal(applies({ 'istio-injection': 'enabled', team: 'mesh-free' }), false, 'NotIn');
  t.equal(applies({ 'istio-injection': 'disabled' }), false, 'another value');
  t.equal(applies({}), false, 'no labels');
  t.equal(applies(undefined), false, 'labels unknown: an entry with a selector does not apply');
  t.equal(injectedSidecarAnnotations(jobPod(), undefined, policyOf(t, ISTIO)) !== undefined, true, 'labels unknown: an entry without one applies');

  for (const [operator, values, labels, expected] of [
    ['In', ['a', 'b'], { tier: 'b' }, true],
    ['In', ['a'], { tier: 'b' }, false],
    ['In', ['a'], {}, false],
    ['NotIn', ['a'], { tier: 'b' }, true],
    ['NotIn', ['a'], { tier: 'a' }, false],
    ['NotIn', ['a'], {}, true],
    ['Exists', undefined, { tier: '' }, true],
    ['Exists', undefined, {}, false],
    ['DoesNotExist', undefined, {}, true],
    ['DoesNotExist', undefined, { tier: 'a' }, false],
  ] as const) {
    const valuesText = values ? `, values: [${values.join(', ')}]` : '';
    const selected = policyOf(t, `${ISTIO}    namespaceSelector: {matchExpressions: [{key: tier, operator: ${operator}${valuesText}}]}\n`);
    t.equal(injectedSidecarAnnotations(jobPod(), labels, selected) !== undefined, expected, `${operator} ${JSON.stringify(values)} on ${JSON.stringify(labels)}`);
  }
});

t.test("the pod's own markers win", async (t) => {
  const policy = policyOf(t, 'entries:\n  - {name: istio, container: istio-proxy, stop: istio-proxy, gracePeriodSeconds: 30}\n');

  t.test("a container the pod's env makes a sidecar or a main container is left alone", async (t) => {
    for (const [name, value] of [
      [ENV_WHEN_JOB_EXIT, 'true'],
      [ENV_WHEN_JOB_EXIT, 'false'],
      [ENV_WHEN_JOB_EXIT, 'yes'],
      [ENV_WITH_IMAGE, 'registry.example.com/quick-exit:1'],
    ] as const) {
      const pod = jobPod();
      (pod.spec!.containers as Array<{ name: string; env?: unknown }>)[1]!.env = [{ name: 'OTHER', value: 'x' }, { name, value }];
      t.equal(injectedSidecarAnnotations(pod, undefined, policy), undefined, `${name}=${value}`);
    }
  });

  t.test("a container the pod's sidecars annotation names is left alone", async (t) => {
    t.equal(injectedSidecarAnnotations(jobPod(['istio-proxy'], { [SIDECARS]: 'istio-proxy' }), undefined, policy), undefined);
    const other = policyOf(t, `${ISTIO}  - {name: linkerd, container: linkerd-proxy}\n`);
    t.same(injectedSidecarAnnotations(jobPod(['istio-proxy', 'linkerd-proxy'], { [SIDECARS]: 'istio-proxy' }), undefined, other), {
      annotations: { [SIDECARS]: 'istio-proxy,linkerd-proxy', [INJECTED_POLICY_ANNOTATION]: 'linkerd' },
      entries: ['linkerd'],
    }, 'the other entry applies');
  });

  t.test('an existing stop or grace period annotation is kept, not overwritten', async (t) => {
    const pod = jobPod(['istio-proxy'], { [stopOf('istio-proxy')]: 'istio-proxy:15021', [graceOf('istio-proxy')]: '5' });
    t.same(injectedSidecarAnnotations(pod, undefined, policy), {
      annotations: { [SIDECARS]: 'istio-proxy', [INJECTED_POLICY_ANNOTATION]: 'istio' },
      entries: ['istio'],
    });
  });

  t.test('an existing stop or grace period equal to the policy: repeated, a change of nothing', async (t) => {
    const pod = jobPod(['istio-proxy'], { [stopOf('istio-proxy')]: 'istio-proxy', [graceOf('istio-proxy')]: '30' });
    t.same(injectedSidecarAnnotations(pod, undefined, policy)?.annotations, {
      [SIDECARS]: 'istio-proxy',
      [stopOf('istio-proxy')]: 'istio-proxy',
      [graceOf('istio-proxy')]: '30',
      [INJECTED_POLICY_ANNOTATION]: 'istio',
    });
  });

  t.test('a container named by an earlier admission for an entry the policy no longer has is the pod own', async (t) => {
    const pod = jobPod(['istio-proxy'], { [SIDECARS]: 'istio-proxy', [INJECTED_POLICY_ANNOTATION]: 'mesh' });
    t.equal(injectedSidecarAnnotations(pod, undefined, policy), undefined);
  });
});

t.test('never every container: a pod with no main container left', async (t) => {
  const policy = policyOf(t, `${ISTIO}  - {name: vault, container: vault-agent}\n`);
  const only = (names: string[], annotations?: Record<string, string>) => {
    const pod = jobPod([], annotations);
    pod.spec!.containers = names.map((name) => ({ name, image: `${name}:1` }));
    return injectedSidecarAnnotations(pod, undefined, policy);
  };
  t.equal(only(['istio-proxy']), undefined, 'the injected container alone');
  t.equal(only(['app', 'istio-proxy'], { [SIDECARS]: 'app' }), undefined, 'the only other container is a sidecar already');
  t.same(only(['istio-proxy', 'vault-agent'])?.entries, ['istio'], 'two injected containers: the first entry applies, the second would leave no main container');
  t.same(only(['istio-proxy', 'vault-agent'], { [SIDECARS]: 'istio-proxy', [INJECTED_POLICY_ANNOTATION]: 'istio' })?.entries, ['istio'], 'and so again on a second admission');
  t.equal(only([]), undefined, 'no containers');
});

t.test('idempotent: the pod with the output gets the same output', async (t) => {
  const policy = policyOf(
    t,
    `entries:
  - {name: istio, container: istio-proxy, stop: istio-proxy, gracePeriodSeconds: 30, ignoreExitCode: true}
  - {name: vault, container: vault-agent}
  - {name: dapr, container: daprd, stop: "POST http://localhost:3500/v1.0/shutdown", namespaceSelector: {matchLabels: {dapr: "on"}}}
`,
  );
  for (const [what, annotations] of [
    ['no annotations of its own', undefined],
    ['its own sidecar and settings', { [SIDECARS]: 'logs', [IGNORE]: 'logs', [stopOf('vault-agent')]: 'signal', [graceOf('istio-proxy')]: '10', other: 'x' }],
  ] as const) {
    const pod = jobPod(['istio-proxy', 'vault-agent', 'daprd', 'logs'], annotations);
    const first = injectedSidecarAnnotations(pod, { dapr: 'on' }, policy);
    t.same(first?.entries, ['istio', 'vault', 'dapr'], what);
    const admitted = withAnnotations(pod, first!.annotations);
    t.same(injectedSidecarAnnotations(admitted, { dapr: 'on' }, policy), first, `${what}: the same output`);
    const again = withAnnotations(admitted, injectedSidecarAnnotations(admitted, { dapr: 'on' }, policy)!.annotations);
    t.same(again.metadata, admitted.metadata, `${what}: nothing changes`);
  }
});

t.test('a malformed pod is read without throwing', async (t) => {
  const policy = policyOf(t, 'entries:\n  - {name: istio, container: istio-proxy, owners: [{apiVersion: v1, kind: Pod}]}\n');
  t.equal(injectedSidecarAnnotations({}, undefined, policy), undefined, 'no spec: restartPolicy Always');
  t.equal(injectedSidecarAnnotations({ metadata: null, spec: null }, undefined, policy), undefined);
  t.same(
    injectedSidecarAnnotations({ metadata: { annotations: 'garbage', ownerReferences: 7 }, spec: { restartPolicy: 'Never', containers: ['x', null, { name: 'app', env: 'garbage' }, { name: 'istio-proxy', env: [null, { name: 5 }] }] } }, undefined, policy),
    { annotations: { [SIDECARS]: 'istio-proxy', [INJECTED_POLICY_ANNOTATION]: 'istio' }, entries: ['istio'] },
  );
  t.equal(injectedSidecarAnnotations({ spec: { restartPolicy: 'Never', containers: 'garbage' } }, undefined, policy), undefined);
});
