// The injected-sidecar policy of a file's text, as serve reads it, for tests that write policies
// as an operator does.
import { parseInjectedSidecarPolicy } from '../../src/policy/injected-sidecar-file.ts';
import type { InjectedSidecarPolicy } from '../../src/policy/index.ts';

/** The policy of `text`; throws with its errors when it has any. */
export function injectedSidecarPolicy(text: string): InjectedSidecarPolicy {
  const parsed = parseInjectedSidecarPolicy(text);
  if ('errors' in parsed) throw new Error(`the policy has errors: ${parsed.errors.join('; ')}`);
  return parsed.policy;
}
