// The ValidatingAdmissionPolicies (and their bindings) that fence the watcher's and the webhook's
// ServiceAccounts: the API server refuses any write of theirs that is not one the add-on makes
// (the rules: src/kube/fence-rules.ts). The chart ships the same objects; with
// --register-webhooks the add-on writes them itself (local runs, the tests).
import type { AdmissionregistrationV1Api, V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding } from '@kubernetes/client-node';
import { MANAGED_BY_LABELS } from '../policy/index.ts';
import { isApiError } from './api-errors.ts';
import { FENCE_RULES, PARAMETERS, literal, type FencedComponent } from './fence-rules.ts';
import { createOrReplace } from './webhook-configurations.ts';

export interface FenceTarget {
  /** The add-on's namespace, home of both ServiceAccounts. */
  namespace: string;
  serviceAccounts: Record<FencedComponent, string>;
  /** The watcher's leader-election Lease. */
  leaseName: string;
  signalImage: string;
  /** --quick-exit-image: the watcher may put it in place of a sidecar's image. */
  quickExitImage: string;
  /** The webhook's certificate Secret. */
  tlsSecret: string;
  /** Name of the webhook configurations, and the prefix of the policies' names. */
  configurationName: string;
}

export interface FenceObjects {
  policy: V1ValidatingAdmissionPolicy;
  binding: V1ValidatingAdmissionPolicyBinding;
}

/** `<configuration name>-<component>`: the policy and its binding. */
export const fenceName = (configurationName: string, component: FencedComponent) => `${configurationName}-${component}`;

export const serviceAccountUser = (namespace: string, serviceAccount: string) => `system:serviceaccount:${namespace}:${serviceAccount}`;

/** The policy and binding of each component, as the chart renders them too (test/chart/fence.test.ts). */
export function desiredFence(target: FenceTarget): Record<FencedComponent, FenceObjects> {
  const values: Record<string, string> = {
    ownNamespace: target.namespace,
    leaseName: target.leaseName,
    signalImage: target.signalImage,
    quickExitImage: target.quickExitImage,
    tlsSecret: target.tlsSecret,
    configurationName: target.configurationName,
  };
  const objects = (component: FencedComponent): FenceObjects => {
    const name = fenceName(target.configurationName, component);
    const rules = FENCE_RULES[component];
    return {
      policy: {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        metadata: { name, labels: { ...MANAGED_BY_LABELS } },
        spec: {
          // Every write, of any resource: the rules refuse what the component never writes.
          failurePolicy: 'Fail',
          matchConstraints: { resourceRules: [{ apiGroups: ['*'], apiVersions: ['*'], resources: ['*/*'], operations: ['*'] }] },
          matchConditions: [{ name: 'service-account', expression: `request.userInfo.username == ${literal(serviceAccountUser(target.namespace, target.serviceAccounts[component]))}` }],
          variables: [...PARAMETERS[component].map((parameter) => ({ name: parameter, expression: literal(values[parameter]!) })), ...rules.variables],
          validations: rules.validations,
        },
      },
      binding: {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name, labels: { ...MANAGED_BY_LABELS } },
        spec: { policyName: name, validationActions: ['Deny'] },
      },
    };
  };
  return { watcher: objects('watcher'), webhook: objects('webhook') };
}

/**
 * Creates or replaces both policies and their bindings. 'unsupported' when the API server does not
 * serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (before Kubernetes 1.30).
 */
export async function registerFence(api: AdmissionregistrationV1Api, target: FenceTarget): Promise<'registered' | 'unsupported'> {
  const policies = {
    read: (name: string) => api.readValidatingAdmissionPolicy({ name }),
    create: (body: V1ValidatingAdmissionPolicy) => api.createValidatingAdmissionPolicy({ body }),
    replace: (name: string, body: V1ValidatingAdmissionPolicy) => api.replaceValidatingAdmissionPolicy({ name, body }),
  };
  const bindings = {
    read: (name: string) => api.readValidatingAdmissionPolicyBinding({ name }),
    create: (body: V1ValidatingAdmissionPolicyBinding) => api.createValidatingAdmissionPolicyBinding({ body }),
    replace: (name: string, body: V1ValidatingAdmissionPolicyBinding) => api.replaceValidatingAdmissionPolicyBinding({ name, body }),
  };
  try {
    for (const { policy, binding } of Object.values(desiredFence(target))) {
      // The policy first, then the binding that puts it in force.
      await createOrReplace(policies, policy);
      await createOrReplace(bindings, binding);
    }
    return 'registered';
  } catch (err) {
    if (isApiError(err, 404)) return 'unsupported';
    throw err;
  }
}
