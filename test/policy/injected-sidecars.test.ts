// The operator's policy for sidecars other webhooks inject, applied to a pod as the annotations its
// author would write (its file as serve reads it: injected-sidecar-file.test.ts).
import t from 'tap';
import {
  EMPTY_INJECTED_SIDECAR_POLICY,
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  INJECTED_POLICY_ANNOTATION,
  POD_ANNOTATIONS,
  classifyContainers,
  entriesAwaitingNamespaceLabels,
  injectedSidecarAnnotations,
  labelSelectorMatches,
  policyNeedsNamespaceLabels,
  type InjectedSidecarPod,
  type InjectedSidecarPolicy,
} from '../../src/policy/index.ts';
import { injectedSidecarPolicy } from '../support/injected-sidecar-policy.ts';

const SIDECARS = POD_ANNOTATIONS.sidecars;
const IGNORE = POD_ANNOTATIONS.ignoreExitCode;
const stopOf = (container: string) => `${POD_ANNOTATIONS.stopPrefix}${container}`;
const graceOf = (container: string) => `${POD_ANNOTATIONS.gracePeriodPrefix}${container}`;

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

t.test('policyNeedsNamespaceLabels: when any entry has a namespaceSelector', async (t) => {
  t.equal(policyNeedsNamespaceLabels(EMPTY_INJECTED_SIDECAR_POLICY), false);
  t.equal(policyNeedsNamespaceLabels(injectedSidecarPolicy(ISTIO)), false);
  t.equal(policyNeedsNamespaceLabels(injectedSidecarPolicy(`${ISTIO}  - {name: linkerd, container: linkerd-proxy, namespaceSelector: {matchLabels: {mesh: linkerd}}}\n`)), true);
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
  t.equal(labelSelectorMatches({ matchExpressions: [{ key: 'owner', operator: 'Gt', values: ['1'] }] }, labels), false, 'an operator a label selector does not have matches nothing');
});

t.test('applied to a pod: the annotations its author would write', async (t) => {
  t.test('a Job pod with the injected container', async (t) => {
    const policy = injectedSidecarPolicy('entries:\n  - {name: istio, container: istio-proxy, stop: istio-proxy, gracePeriodSeconds: 30, ignoreExitCode: true}\n');
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
    t.same(injectedSidecarAnnotations(jobPod(['vault-agent']), undefined, injectedSidecarPolicy('entries:\n  - {name: vault, container: vault-agent, ignoreExitCode: false}\n')), {
      annotations: { [SIDECARS]: 'vault-agent', [INJECTED_POLICY_ANNOTATION]: 'vault' },
      entries: ['vault'],
    });
  });

  t.test('the pod then has the sidecar, as if its author had written the annotations', async (t) => {
    const pod = jobPod();
    const output = injectedSidecarAnnotations(pod, undefined, injectedSidecarPolicy(ISTIO))!;
    const roles = classifyContainers(pod.spec!, output.annotations);
    t.same(roles.map((role) => [role.name, role.role]), [['app', 'main'], ['istio-proxy', 'sidecar']]);
    t.same(roles[1]!.markers.stop, { kind: 'http', method: 'POST', url: 'http://localhost:15020/quitquitquit', proxy: 'istio-proxy' });
  });

  t.test('several entries: the lists joined, the entries named in the policy order', async (t) => {
    const policy = injectedSidecarPolicy(
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
    t.equal(injectedSidecarAnnotations(jobPod(['linkerd-proxy']), undefined, injectedSidecarPolicy(ISTIO)), undefined, 'the container is not in the pod');
    t.equal(injectedSidecarAnnotations(jobPod(), undefined, EMPTY_INJECTED_SIDECAR_POLICY), undefined, 'the empty policy');
    const native = jobPod([]);
    native.spec!.initContainers = [{ name: 'istio-proxy', image: 'proxy:1', restartPolicy: 'Always' }];
    t.equal(injectedSidecarAnnotations(native, undefined, injectedSidecarPolicy(ISTIO)), undefined, 'an init container (a native sidecar stops itself)');
  });
});

t.test('restartPolicy: only pods that can finish', async (t) => {
  const policy = injectedSidecarPolicy(ISTIO);
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
    const policy = injectedSidecarPolicy(ISTIO);
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
    const policy = injectedSidecarPolicy(`${ISTIO}    owners: [{apiVersion: argoproj.io/v1alpha1, kind: Workflow}, {apiVersion: v1, kind: Pod}]\n`);
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
  const policy = injectedSidecarPolicy(`${ISTIO}    namespaceSelector: {matchLabels: {istio-injection: enabled}, matchExpressions: [{key: team, operator: NotIn, values: [mesh-free]}]}\n`);
  const applies = (labels: Record<string, string> | undefined) => injectedSidecarAnnotations(jobPod(), labels, policy) !== undefined;
  t.equal(applies({ 'istio-injection': 'enabled' }), true, 'matched');
  t.equal(applies({ 'istio-injection': 'enabled', team: 'a' }), true, 'matched, with another team');
  t.equal(applies({ 'istio-injection': 'enabled', team: 'mesh-free' }), false, 'NotIn');
  t.equal(applies({ 'istio-injection': 'disabled' }), false, 'another value');
  t.equal(applies({}), false, 'no labels');
  t.equal(applies(undefined), false, 'labels unknown: an entry with a selector does not apply');
  t.equal(injectedSidecarAnnotations(jobPod(), undefined, injectedSidecarPolicy(ISTIO)) !== undefined, true, 'labels unknown: an entry without one applies');

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
    const selected = injectedSidecarPolicy(`${ISTIO}    namespaceSelector: {matchExpressions: [{key: tier, operator: ${operator}${valuesText}}]}\n`);
    t.equal(injectedSidecarAnnotations(jobPod(), labels, selected) !== undefined, expected, `${operator} ${JSON.stringify(values)} on ${JSON.stringify(labels)}`);
  }
});

t.test('entriesAwaitingNamespaceLabels: the entries only the unknown labels of the namespace decide', async (t) => {
  const policy = injectedSidecarPolicy(`entries:
  - {name: istio, container: istio-proxy, namespaceSelector: {matchLabels: {istio-injection: enabled}}}
  - {name: vault, container: vault-agent}
  - {name: dapr, container: daprd, namespaceSelector: {matchLabels: {dapr: "on"}}}
  - {name: linkerd, container: linkerd-proxy, namespaceSelector: {matchLabels: {mesh: linkerd}}, owners: [{apiVersion: argoproj.io/v1alpha1, kind: Workflow}]}
`);
  t.same(entriesAwaitingNamespaceLabels(jobPod(['istio-proxy', 'vault-agent', 'linkerd-proxy']), policy), ['istio'], 'a selector with everything else in place; not one whose container is missing or whose owner differs, nor one without a selector');
  t.same(entriesAwaitingNamespaceLabels(jobPod(['istio-proxy', 'daprd']), policy), ['istio', 'dapr'], 'in the policy order');
  t.same(entriesAwaitingNamespaceLabels(jobPod(['vault-agent']), policy), [], 'no entry with a selector could apply');
  t.same(entriesAwaitingNamespaceLabels({ spec: { containers: [{ name: 'app' }, { name: 'istio-proxy' }] } }, policy), [], 'restartPolicy Always: no entry can apply');
  t.same(entriesAwaitingNamespaceLabels(jobPod(['istio-proxy'], { [SIDECARS]: 'istio-proxy' }), policy), [], 'the pod named the sidecar itself');
  const withLabels = injectedSidecarAnnotations(jobPod(['istio-proxy', 'daprd']), { 'istio-injection': 'enabled' }, policy);
  t.same(withLabels?.entries, ['istio'], 'the labels read, the entries they select apply');
});

t.test("the pod's own markers win", async (t) => {
  const policy = injectedSidecarPolicy('entries:\n  - {name: istio, container: istio-proxy, stop: istio-proxy, gracePeriodSeconds: 30}\n');

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
    const other = injectedSidecarPolicy(`${ISTIO}  - {name: linkerd, container: linkerd-proxy}\n`);
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
  const policy = injectedSidecarPolicy(`${ISTIO}  - {name: vault, container: vault-agent}\n`);
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
  const policy = injectedSidecarPolicy(
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
  const policy = injectedSidecarPolicy('entries:\n  - {name: istio, container: istio-proxy, owners: [{apiVersion: v1, kind: Pod}]}\n');
  t.equal(injectedSidecarAnnotations({}, undefined, policy), undefined, 'no spec: restartPolicy Always');
  t.equal(injectedSidecarAnnotations({ metadata: null, spec: null }, undefined, policy), undefined);
  t.same(
    injectedSidecarAnnotations({ metadata: { annotations: 'garbage', ownerReferences: 7 }, spec: { restartPolicy: 'Never', containers: ['x', null, { name: 'app', env: 'garbage' }, { name: 'istio-proxy', env: [null, { name: 5 }] }] } }, undefined, policy),
    { annotations: { [SIDECARS]: 'istio-proxy', [INJECTED_POLICY_ANNOTATION]: 'istio' }, entries: ['istio'] },
  );
  t.equal(injectedSidecarAnnotations({ spec: { restartPolicy: 'Never', containers: 'garbage' } }, undefined, policy), undefined);
});
