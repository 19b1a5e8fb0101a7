// Which rule of a Job's podFailurePolicy judges a failed pod by a container's exit code. Mirrors
// matchPodFailurePolicy and getMatchingContainerFromList of k8s.io/kubernetes
// pkg/controller/job/pod_failure_policy.go (v1.37): the rules are tried in order, the first whose
// onExitCodes match a terminated container decides; a rule applies to every container (init
// containers included) unless onExitCodes.containerName names one; exit code 0 never matches.
// The Job controller applies the policy only to failed pods (isPodFailed in job_controller.go:
// phase Failed, or deleted before it succeeded unless podReplacementPolicy is Failed, which a
// podFailurePolicy requires and defaults to): a pod in phase Succeeded is never judged by it.
import { arrayOf, isRecord } from './types.ts';

export type PodFailureAction = 'FailJob' | 'FailIndex' | 'Ignore' | 'Count';

export interface PodFailureRule {
  /** Its position in spec.podFailurePolicy.rules, from 0 (the Job controller counts from 0 too). */
  index: number;
  action: PodFailureAction;
}

/** The API server accepts at most this many rules (maxPodFailurePolicyRules); more are not read. */
export const MAX_POD_FAILURE_RULES = 20;

interface ExitCodeRule extends PodFailureRule {
  /** onExitCodes.containerName; undefined when the rule judges every container. */
  containerName: string | undefined;
  matches: (exitCode: number) => boolean;
}

/**
 * A reader of a podFailurePolicy (anything: read defensively): `ruleFor(container, exitCode)` is
 * the rule that decides a failed pod whose only non-zero exit code is this container's, or
 * undefined when no rule with onExitCodes matches it. A rule with onPodConditions, an unknown
 * action or operator, values that are no list, or a containerName that is no string matches
 * nothing here.
 */
export function podFailureRules(policy: unknown): { ruleFor: (container: string, exitCode: number) => PodFailureRule | undefined } {
  const rules = arrayOf(isRecord(policy) ? policy.rules : undefined)
    .slice(0, MAX_POD_FAILURE_RULES)
    .flatMap((rule, index): ExitCodeRule[] => {
      const parsed = isRecord(rule) ? exitCodeRule(rule, index) : undefined;
      return parsed ? [parsed] : [];
    });
  return {
    ruleFor: (container, exitCode) => {
      if (exitCode === 0) return undefined;
      const rule = rules.find((r) => (r.containerName === undefined || r.containerName === container) && r.matches(exitCode));
      return rule && { index: rule.index, action: rule.action };
    },
  };
}

/** What the Job controller makes of a failed pod that a rule with this action judges (Count: what it does without a rule). */
export const POD_FAILURE_OUTCOMES: Record<PodFailureAction, string> = {
  FailJob: 'fails the whole Job, with no retry',
  FailIndex: 'fails its index, with no retry',
  Ignore: 'is not counted as failed but replaced, so its work runs again, with no limit',
  Count: "counts as failed toward the Job's backoffLimit, and is replaced",
};

const ACTIONS: ReadonlySet<unknown> = new Set<PodFailureAction>(['FailJob', 'FailIndex', 'Ignore', 'Count']);

function exitCodeRule(rule: Record<string, unknown>, index: number): ExitCodeRule | undefined {
  const { action, onExitCodes } = rule;
  if (!ACTIONS.has(action) || !isRecord(onExitCodes)) return undefined;
  const { operator } = onExitCodes;
  const containerName = onExitCodes.containerName ?? undefined;
  if ((containerName !== undefined && typeof containerName !== 'string') || (operator !== 'In' && operator !== 'NotIn') || !Array.isArray(onExitCodes.values)) return undefined;
  // A set, so that a hostile list of values is read once, not once per container.
  const values = new Set(onExitCodes.values.filter((value) => typeof value === 'number'));
  const matches = (exitCode: number) => values.has(exitCode) === (operator === 'In');
  return { index, action: action as PodFailureAction, containerName, matches };
}
