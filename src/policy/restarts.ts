// Whether the kubelet restarts a container that exited, and what decided it. Since Kubernetes
// 1.35 (container restart rules, KEP-5307, gate ContainerRestartRules) a container may set its
// own restartPolicy and restartPolicyRules, which win over the pod's restartPolicy; where the
// gate is off the API server drops both fields, and the pod's policy decides as it always did.
// Mirrors ContainerShouldRestart and FindMatchingContainerRestartRule of k8s.io/kubernetes
// pkg/api/v1/pod/util.go (v1.37).
import { arrayOf, isRecord, restartPolicyOf, type Container, type PodSpec, type RestartPolicy } from './types.ts';

/** The actions of a restart rule that restart the container. */
export type RestartAction = 'Restart' | 'RestartAllContainers';

export type RestartDecider =
  /** The pod's restartPolicy: the container sets none (or one the kubelet does not know). */
  | { by: 'pod'; policy: RestartPolicy }
  /** The container's own restartPolicy: none of its rules matched. */
  | { by: 'container'; policy: RestartPolicy }
  /** The first of the container's restartPolicyRules that matched the exit code; `rule` counts from 1. */
  | { by: 'rule'; rule: number; action: RestartAction; operator: 'In' | 'NotIn'; values: number[] };

export interface Restart {
  restarts: boolean;
  exitCode: number;
  decidedBy: RestartDecider;
}

/** Whether the kubelet restarts this container of the pod after it exited with this code, and why. */
export function containerRestart(spec: PodSpec, container: Container, exitCode: number): Restart {
  if (setsOwnRestartPolicy(container)) {
    const rule = firstMatchingRule(container.restartPolicyRules, exitCode);
    // RestartAllContainers (alpha) restarts only where its own gate is on: counted as a restart
    // everywhere, since waiting for a main that does not restart is safer than stopping a sidecar it needs.
    if (rule?.action === 'Restart' || rule?.action === 'RestartAllContainers') {
      return { restarts: true, exitCode, decidedBy: { ...rule, action: rule.action } };
    }
    const own = knownPolicy(container.restartPolicy);
    if (own) return { restarts: restartsUnder(own, exitCode), exitCode, decidedBy: { by: 'container', policy: own } };
  }
  // The kubelet's default branch: an unset or unknown pod policy restarts as Always does.
  const policy = restartPolicyOf(spec) ?? 'Always';
  return { restarts: restartsUnder(policy, exitCode), exitCode, decidedBy: { by: 'pod', policy } };
}

/**
 * Whether the container's own restartPolicy and restartPolicyRules decide in place of the pod's
 * policy: the kubelet reads the rules only of a container that sets restartPolicy (the API server
 * requires one with rules).
 */
export function setsOwnRestartPolicy(container: Container): boolean {
  return container.restartPolicy !== undefined && container.restartPolicy !== null;
}

/** containerRestart of the container at this position of spec.containers (a ContainerRole's index). */
export function restartOfContainerAt(spec: PodSpec, index: number, exitCode: number): Restart {
  const container = arrayOf(spec.containers)[index];
  return containerRestart(spec, isRecord(container) ? container : {}, exitCode);
}

/** What decided, in words: `restartPolicy OnFailure`, `the container's restartPolicy Never`, `rule 1: exit code 42 In [42]`. */
export function restartCause({ decidedBy, exitCode }: Restart): string {
  if (decidedBy.by === 'pod') return `restartPolicy ${decidedBy.policy}`;
  if (decidedBy.by === 'container') return `the container's restartPolicy ${decidedBy.policy}`;
  const action = decidedBy.action === 'Restart' ? '' : `, ${decidedBy.action}`;
  return `rule ${decidedBy.rule}: exit code ${exitCode} ${decidedBy.operator} [${decidedBy.values.join(', ')}]${action}`;
}

/** `will be restarted (rule 1: exit code 42 In [42])`, or `will not be restarted (restartPolicy Never)`. */
export function explainRestart(restart: Restart): string {
  return `${restart.restarts ? 'will be restarted' : 'will not be restarted'} (${restartCause(restart)})`;
}

function restartsUnder(policy: RestartPolicy, exitCode: number): boolean {
  return policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0);
}

function knownPolicy(value: unknown): RestartPolicy | undefined {
  return value === 'Always' || value === 'OnFailure' || value === 'Never' ? value : undefined;
}

/**
 * The first rule whose exitCodes match, whatever its action: a matching rule whose action does
 * not restart ends the search too, and the container's restartPolicy decides. A rule without
 * exitCodes, or with an unknown operator, matches nothing.
 */
function firstMatchingRule(rules: unknown, exitCode: number): (Omit<Extract<RestartDecider, { by: 'rule' }>, 'action'> & { action: unknown }) | undefined {
  for (const [index, rule] of arrayOf(rules).entries()) {
    if (!isRecord(rule) || !isRecord(rule.exitCodes)) continue;
    const { operator } = rule.exitCodes;
    if (operator !== 'In' && operator !== 'NotIn') continue;
    const values = arrayOf(rule.exitCodes.values).filter((value): value is number => typeof value === 'number');
    if (values.includes(exitCode) === (operator === 'In')) return { by: 'rule', rule: index + 1, action: rule.action, operator, values };
  }
  return undefined;
}
