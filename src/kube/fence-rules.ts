// The fence: CEL rules of a ValidatingAdmissionPolicy that the API server applies to every write
// of the add-on's two ServiceAccounts. RBAC grants the watcher `patch` on every pod; these rules
// narrow that to exactly the writes the add-on makes, so a stolen token can do no more than the
// add-on itself. One validation per write, named after it; each is an implication
// (`!thisWrite || allowed`), and a last one refuses any other write.
//
// The rules are static text. What an installation decides (its namespace, the names of its
// objects, the signal image) arrives as the policy's first variables, written by src/kube/fence.ts
// or by the chart, which reads this text from charts/sidecar-terminator/files/fence-rules.json
// (node scripts/fence-rules.ts --write).
//
// `object`, `oldObject` and `request` are read as the API server holds them: an absent field is
// absent (hence `.?field.orValue(...)`), and `dyn(...)` lets a rule walk the keys of an object, so
// "everything else unchanged" also covers fields a later Kubernetes adds.
//
// Each rule is composed of named pieces: the CEL builders of cel.ts, and the policy's reading of a
// pod (markers, main containers' exit codes, the phase they make) in fence-pod.ts.
import {
  COMPONENT,
  CONDITION_REASONS,
  CRR,
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  EVENT_REASONS,
  INJECTED_POLICY_INVALID_REASON,
  KILL_MECHANISM_CHANGED,
  MANAGED,
  MANAGED_BY_LABELS,
  MANAGED_LABEL,
  OWNER_EVENT_REASON,
  PHASE_SET_ANNOTATION,
  POD_ANNOTATIONS,
  SIGNAL_COMMAND,
  STOP_ARGUMENT_FORMS,
  SIGNAL_CONTAINER_PREFIX,
  TERMINATED_CONDITION,
  TLS_SECRET_KEYS,
  crrName,
} from '../policy/index.ts';
import { and, celMap, group, holds, literal, not, onlyIf, onlyKeys, or, request, sameEntriesExcept, sameExcept, ternary, variable } from './cel.ts';
import { isKillSidecar, isSidecar, isTerminal, mainExitCodes, mainsExited, phaseOfMains, quickExitImage, triggeredRestartPolicy } from './fence-pod.ts';

export interface Variable {
  name: string;
  expression: string;
}

export interface Validation {
  expression: string;
  message?: string;
  messageExpression?: string;
}

export interface FenceRules {
  variables: Variable[];
  validations: Validation[];
}

/** The variables each installation sets (CEL literals), in the order the policy declares them. */
export const PARAMETERS = {
  watcher: ['ownNamespace', 'leaseName', 'signalImage', 'quickExitImage'],
  webhook: ['ownNamespace', 'tlsSecret', 'configurationName'],
} as const;

export { literal };

/** What the API server itself changes in metadata on every write. */
const SERVER_METADATA = ['resourceVersion', 'managedFields', 'generation'];

const LABEL = literal(MANAGED_LABEL);
const PHASE_SET = literal(PHASE_SET_ANNOTATION);

/** Shorthands of the watcher's variables. */
const PODS = { updated: variable('podUpdate'), statusUpdated: variable('podStatusUpdate'), oldLabels: variable('oldLabels'), newLabels: variable('newLabels') };
const MAIN_EXIT_CODES = variable('mainExitCodes');
const MAINS_EXITED = variable('mainsExited');
const ADDED_EPHEMERAL = variable('addedEphemeral');

/** The managed label unchanged, or set to managed on an unlabelled pod the watcher would stop sidecars of. */
const managedLabelWrite = or(
  `${PODS.newLabels}[?${LABEL}] == ${PODS.oldLabels}[?${LABEL}]`,
  group(and(not(group(`${LABEL} in ${PODS.oldLabels}`)), holds(`${PODS.newLabels}[?${LABEL}]`, literal(MANAGED)), triggeredRestartPolicy('oldObject'), `oldObject.spec.containers.exists(c, ${isSidecar('c')})`)),
);

/**
 * Container `c` of the new spec, `o` of the old: the same image, or, once every main container
 * has exited, the quick-exit image its env declares; or the end of a sidecar still running after
 * its grace period: --quick-exit-image, where it sets no command, or once the pod's phase is
 * terminal (the kubelet then runs no container of it).
 */
const imageWrite = group(
  or(
    'c.image == o.image',
    group(
      and(
        variable('managedBefore'),
        MAINS_EXITED,
        'c.image != ""',
        group(or(`c.image == ${quickExitImage('o')}`, group(and(`c.image == ${variable('quickExitImage')}`, isKillSidecar('o'), group(or('!has(o.command)', isTerminal('oldObject'))))))),
      ),
    ),
  ),
);

/** The fields of a signal container: the API server fills in imagePullPolicy, terminationMessagePath and an empty resources. */
const SIGNAL_CONTAINER_FIELDS = ['name', 'image', 'command', 'args', 'targetContainerName', 'terminationMessagePolicy', 'terminationMessagePath', 'imagePullPolicy', 'resources', 'securityContext'];

/** Signal container `n` as src/policy/signal-container.ts writes it; its arguments (stopArguments) send a shutdown request to the pod's own loopback only. */
const signalContainer = and(
  onlyKeys('n', SIGNAL_CONTAINER_FIELDS),
  'dyn(n.?resources.orValue({})).size() == 0',
  `n.name.startsWith(${literal(SIGNAL_CONTAINER_PREFIX)})`,
  `n.image == ${variable('signalImage')}`,
  `n.?command.orValue([]) == ${variable('signalCommand')}`,
  'n.?args.orValue([]).size() <= 4',
  `n.?args.orValue([]).all(a, ${literal(STOP_ARGUMENT_FORMS)}.exists(f, a.matches(f)))`,
);

/** The target `t`'s setting, else the pod's: `t.?securityContext.?runAsUser.or(oldObject.spec.?securityContext.?runAsUser)`. */
const targetSetting = (field: string) => `t.?securityContext.?${field}.or(oldObject.spec.?securityContext.?${field})`;

/**
 * The user of signal container `n` for its target `t` (src/policy/signal-container.ts
 * signalUser): the sidecar's runAsUser/runAsGroup, else the user the kubelet reports, else root
 * with CAP_KILL alone.
 */
const signalUser = ternary(
  `${targetSetting('runAsUser')}.hasValue()`,
  group(and(`n.securityContext.?runAsUser == ${targetSetting('runAsUser')}`, `n.securityContext.?runAsGroup == ${targetSetting('runAsGroup')}`, '!has(n.securityContext.capabilities.add)')),
  ternary(
    'oldObject.status.?containerStatuses.orValue([]).exists(s, s.name == t.name && has(s.user) && has(s.user.linux))',
    `oldObject.status.containerStatuses.exists(s, ${and('s.name == t.name', 'n.securityContext.?runAsUser == s.user.linux.?uid', 'n.securityContext.?runAsGroup == s.user.linux.?gid', '!has(n.securityContext.capabilities.add)')})`,
    group(and(holds('n.securityContext.?runAsUser', '0'), '!has(n.securityContext.runAsGroup)', holds('n.securityContext.?capabilities.?add', '["KILL"]'))),
  ),
);

/** Signal container `n`'s security settings, for its target `t`. */
const signalSecurity = and(
  onlyKeys('n.securityContext', ['runAsUser', 'runAsGroup', 'capabilities', 'allowPrivilegeEscalation', 'seccompProfile']),
  holds('n.securityContext.?allowPrivilegeEscalation', 'false'),
  holds('n.securityContext.?seccompProfile', '{"type": "RuntimeDefault"}'),
  onlyKeys('n.securityContext.?capabilities.orValue({})', ['drop', 'add']),
  holds('n.securityContext.?capabilities.?drop', '["ALL"]'),
  group(signalUser),
);

/** The target of signal container `n`, `t` in the old spec, that `allowed` holds of. */
const signalTarget = (allowed: string) => `oldObject.spec.containers.exists(t, ${and('t.name == n.?targetContainerName.orValue("")', allowed)})`;

/** The SidecarTerminated condition `n`, as the watcher writes it. */
const terminatedCondition = and(
  `n.type == ${literal(TERMINATED_CONDITION)}`,
  onlyKeys('n', ['type', 'status', 'reason', 'message', 'lastTransitionTime', 'lastProbeTime']),
  'n.status in ["True", "False"]',
  `n.?reason.orValue("") in ${literal(Object.values(CONDITION_REASONS))}`,
);

/** The CRR's one owner reference: to its pod, as controller. */
const OWNER = 'object.metadata.ownerReferences[0]';
const crrOwner = and(
  'object.metadata.?ownerReferences.orValue([]).size() == 1',
  onlyKeys(OWNER, ['apiVersion', 'kind', 'name', 'uid', 'controller', 'blockOwnerDeletion']),
  `${OWNER}.apiVersion == "v1"`,
  `${OWNER}.kind == "Pod"`,
  `${OWNER}.name == object.spec.?podName.orValue("")`,
  holds(`${OWNER}.?controller`, 'true'),
  holds(`${OWNER}.?blockOwnerDeletion`, 'true'),
);

/** An event of the add-on's component, in the namespace of its object. */
const ownEvent = (first: string) =>
  and(first, holds('object.involvedObject.?namespace', 'request.namespace'), holds('object.?source.?component', literal(COMPONENT)), holds('object.?reportingComponent', literal(COMPONENT)));

/** The watcher's ServiceAccount: the writes of src/watcher and src/kube/leader-election.ts. */
const watcher: FenceRules = {
  variables: [
    { name: 'podUpdate', expression: request('', 'pods', '', ['UPDATE']) },
    { name: 'signalContainersAdded', expression: request('', 'pods', 'ephemeralcontainers', ['UPDATE']) },
    { name: 'podStatusUpdate', expression: request('', 'pods', 'status', ['UPDATE']) },
    { name: 'crrCreate', expression: request(CRR.group, CRR.plural, '', ['CREATE']) },
    { name: 'eventCreate', expression: request('', 'events', '', ['CREATE']) },
    { name: 'leaseWrite', expression: request('coordination.k8s.io', 'leases', '', ['CREATE', 'UPDATE']) },
    { name: 'oldLabels', expression: 'oldObject.metadata.?labels.orValue({})' },
    { name: 'newLabels', expression: 'object.metadata.?labels.orValue({})' },
    { name: 'oldAnnotations', expression: 'oldObject.metadata.?annotations.orValue({})' },
    { name: 'newAnnotations', expression: 'object.metadata.?annotations.orValue({})' },
    { name: 'managedBefore', expression: `${PODS.oldLabels}[?${LABEL}].orValue("") == ${literal(MANAGED)}` },
    // The containers the pod's annotation names as sidecars.
    {
      name: 'namedSidecars',
      expression: `variables.oldAnnotations[?${literal(POD_ANNOTATIONS.sidecars)}].orValue("").split(",").map(n, n.trim()).filter(n, n != "")`,
    },
    { name: 'signalCommand', expression: literal(SIGNAL_COMMAND) },
    { name: 'oldEphemeral', expression: 'oldObject.spec.?ephemeralContainers.orValue([])' },
    { name: 'newEphemeral', expression: 'object.spec.?ephemeralContainers.orValue([])' },
    { name: 'addedEphemeral', expression: 'variables.newEphemeral.filter(n, !variables.oldEphemeral.exists(o, o.name == n.name))' },
    { name: 'oldConditions', expression: 'oldObject.status.?conditions.orValue([])' },
    { name: 'newConditions', expression: 'object.status.?conditions.orValue([])' },
    // The exit code of each main container (one without a marker), -1000 while it has not exited.
    { name: 'mainExitCodes', expression: mainExitCodes('oldObject') },
    // The watcher stops sidecars only once every main container has exited (src/policy/decide.ts).
    { name: 'mainsExited', expression: mainsExited(MAIN_EXIT_CODES) },
  ],
  validations: [
    // The sweeper: the managed label, and nothing else of the metadata.
    {
      expression: onlyIf(PODS.updated, group(sameExcept('object.metadata', 'oldObject.metadata', [...SERVER_METADATA, 'labels']))),
      message: 'sidecar-terminator fence: the watcher may not change the annotations, owners, finalizers or other metadata of a pod',
    },
    {
      expression: onlyIf(PODS.updated, group(and(sameEntriesExcept(PODS.newLabels, PODS.oldLabels, LABEL), group(managedLabelWrite)))),
      message: `sidecar-terminator fence: the watcher may change only the ${MANAGED_LABEL} label of a pod: to "${MANAGED}" on an unlabelled pod with restartPolicy Never or OnFailure and a sidecar marker`,
    },
    // PodWriter.replaceImage: a sidecar's image, to the quick-exit image its own env declares.
    {
      expression: onlyIf(
        PODS.updated,
        group(
          and(
            sameExcept('object.spec', 'oldObject.spec', ['containers']),
            'object.spec.containers.size() == oldObject.spec.containers.size()',
            `object.spec.containers.all(c, oldObject.spec.containers.exists(o, ${and('o.name == c.name', sameExcept('c', 'o', ['image']), imageWrite)}))`,
          ),
        ),
      ),
      messageExpression: `"sidecar-terminator fence: the watcher may change the spec of a pod labelled ${MANAGED_LABEL}=${MANAGED} only to replace a sidecar's image with the first ${ENV_WITH_IMAGE} of that container, or a sidecar's with " + variables.quickExitImage + " where it sets no command or the pod's phase is terminal, once every main container has exited"`,
    },
    // PodWriter.addEphemeralContainers: the signal containers of src/policy/signal-container.ts.
    {
      expression: onlyIf(variable('signalContainersAdded'), MAINS_EXITED),
      message: 'sidecar-terminator fence: the watcher may add a signal container only once every main container of the pod has exited',
    },
    {
      expression: onlyIf(
        variable('signalContainersAdded'),
        group(and(variable('managedBefore'), 'variables.oldEphemeral.all(o, variables.newEphemeral.exists(n, n == o))', `${ADDED_EPHEMERAL}.size() > 0`, `${ADDED_EPHEMERAL}.all(n, ${signalContainer})`)),
      ),
      messageExpression: `"sidecar-terminator fence: the watcher may only add its signal container to a pod labelled ${MANAGED_LABEL}=${MANAGED}: named stop-<sidecar>, image " + variables.signalImage + ", command " + variables.signalCommand.join(" ") + ", arguments --grace-period, --method, --url (http://localhost, 127.0.0.1 or [::1] only) and --container-id, and no other field"`,
    },
    {
      expression: onlyIf(variable('signalContainersAdded'), `${ADDED_EPHEMERAL}.all(n, ${signalTarget(isKillSidecar('t'))})`),
      message: `sidecar-terminator fence: the watcher's signal container must target a container marked ${ENV_WHEN_JOB_EXIT}=true or named in the pod's ${POD_ANNOTATIONS.sidecars} annotation`,
    },
    {
      expression: onlyIf(variable('signalContainersAdded'), `${ADDED_EPHEMERAL}.all(n, ${and('has(n.securityContext)', signalTarget(signalSecurity))})`),
      message:
        "sidecar-terminator fence: the watcher's signal container runs as the sidecar's runAsUser/runAsGroup, else as the user the kubelet reports for it, else as root with only CAP_KILL added; " +
        'all capabilities dropped otherwise, allowPrivilegeEscalation false, RuntimeDefault seccomp, no other security setting',
    },
    // PodWriter.setStatus: the terminal phase and the SidecarTerminated condition, and with the
    // phase, the phase-set annotation that makes the kubelet sync the pod.
    {
      expression: onlyIf(
        PODS.statusUpdated,
        group(
          and(
            variable('managedBefore'),
            sameExcept('object.metadata', 'oldObject.metadata', [...SERVER_METADATA, 'annotations']),
            sameExcept('variables.newAnnotations', 'variables.oldAnnotations', [PHASE_SET_ANNOTATION]),
            group(or(`variables.newAnnotations[?${PHASE_SET}] == variables.oldAnnotations[?${PHASE_SET}]`, group(and('object.status.?phase != oldObject.status.?phase', `variables.newAnnotations[?${PHASE_SET}] == object.status.?phase`)))),
          ),
        ),
      ),
      message: `sidecar-terminator fence: the watcher may write the status only of a pod labelled ${MANAGED_LABEL}=${MANAGED}, and no metadata through it but the ${PHASE_SET_ANNOTATION} annotation, set to the phase it sets`,
    },
    {
      expression: onlyIf(
        PODS.statusUpdated,
        group(
          and(
            sameExcept('object.status', 'oldObject.status', ['phase', 'conditions']),
            `variables.oldConditions.all(o, o.type == ${literal(TERMINATED_CONDITION)} || variables.newConditions.exists(n, n == o))`,
            `variables.newConditions.filter(n, n.type == ${literal(TERMINATED_CONDITION)}).size() <= 1`,
            `variables.newConditions.all(n, variables.oldConditions.exists(o, o == n) || ${group(terminatedCondition)})`,
          ),
        ),
      ),
      message: `sidecar-terminator fence: the watcher may change only the phase and the ${TERMINATED_CONDITION} condition (reason ${Object.values(CONDITION_REASONS).join(' or ')}) of a pod's status`,
    },
    {
      expression: or(not(PODS.statusUpdated), 'object.status.?phase == oldObject.status.?phase', group(and(not(group(isTerminal('oldObject'))), MAINS_EXITED, phaseOfMains(MAIN_EXIT_CODES, 'object')))),
      message:
        'sidecar-terminator fence: the watcher may set the phase of a running pod only from its main containers once all have exited: Succeeded when every one exited 0, else Failed',
    },
    // createCrr: OpenKruise's ContainerRecreateRequest for the pod (src/watcher/crr.ts), plus
    // what Kruise's own webhook adds (its crr.apps.kruise.io/ labels, each container's preStop,
    // ports and statusContext copied from the pod, the pod's grace period).
    {
      expression: onlyIf(
        variable('crrCreate'),
        group(
          and(
            crrOwner,
            // The name's prefix: crrName of a pod without uid.
            `object.metadata.name == ${literal(crrName(''))} + ${OWNER}.uid`,
            'object.metadata.?labels.orValue({}).all(k, k.startsWith("crr.apps.kruise.io/"))',
            `object.metadata.?labels[?"crr.apps.kruise.io/pod-uid"].orValue(${OWNER}.uid) == ${OWNER}.uid`,
            '!has(object.metadata.annotations)',
            '!has(object.metadata.finalizers)',
          ),
        ),
      ),
      message:
        'sidecar-terminator fence: the watcher may create a ContainerRecreateRequest only named sidecar-termination-<pod uid>, owned by that pod alone (controller, blockOwnerDeletion), without annotations, finalizers or labels of its own',
    },
    {
      expression: onlyIf(
        variable('crrCreate'),
        group(
          and(
            onlyKeys('object.spec', ['podName', 'containers', 'strategy']),
            'object.spec.?containers.orValue([]).size() > 0',
            `object.spec.containers.all(c, ${onlyKeys('c', ['name', 'preStop', 'ports', 'statusContext'])})`,
            onlyKeys('object.spec.?strategy.orValue({})', ['failurePolicy', 'forceRecreate', 'terminationGracePeriodSeconds']),
            holds('object.spec.?strategy.?failurePolicy', '"Ignore"'),
            holds('object.spec.?strategy.?forceRecreate', 'true'),
          ),
        ),
      ),
      message:
        'sidecar-terminator fence: the watcher may create a ContainerRecreateRequest only with podName, the containers by name, and the strategy failurePolicy Ignore, forceRecreate true',
    },
    // EventRecorder: its events on pods, and on its Lease when the kill mechanism follows the cluster.
    {
      expression: onlyIf(
        variable('eventCreate'),
        group(
          and(
            ownEvent('object.metadata.name.startsWith(object.involvedObject.?name.orValue("") + ".")'),
            group(
              or(
                group(and(holds('object.involvedObject.?kind', '"Pod"'), holds('object.involvedObject.?apiVersion', '"v1"'), `object.reason in ${literal(Object.values(EVENT_REASONS))}`)),
                group(
                  and(
                    holds('object.involvedObject.?kind', '"Lease"'),
                    holds('object.involvedObject.?apiVersion', '"coordination.k8s.io/v1"'),
                    `request.namespace == ${variable('ownNamespace')}`,
                    holds('object.involvedObject.?name', variable('leaseName')),
                    `object.reason == ${literal(KILL_MECHANISM_CHANGED)}`,
                  ),
                ),
              ),
            ),
          ),
        ),
      ),
      message: `sidecar-terminator fence: the watcher may create only its own events (component ${COMPONENT}): ${Object.values(EVENT_REASONS).join(' or ')} on a pod of the event's namespace, ${KILL_MECHANISM_CHANGED} on its Lease`,
    },
    // LeaderElector: its Lease, in the add-on's namespace.
    {
      expression: onlyIf(variable('leaseWrite'), group(and(`request.namespace == ${variable('ownNamespace')}`, `object.metadata.name == ${variable('leaseName')}`))),
      messageExpression: '"sidecar-terminator fence: the watcher may write only the Lease " + variables.ownNamespace + "/" + variables.leaseName',
    },
    {
      expression: or(...['podUpdate', 'signalContainersAdded', 'podStatusUpdate', 'crrCreate', 'eventCreate', 'leaseWrite'].map(variable)),
      message:
        "sidecar-terminator fence: the watcher's ServiceAccount makes no such write (only patches of pods, their status and ephemeral containers, ContainerRecreateRequests, events and its Lease)",
    },
  ],
};

/** The webhook's ServiceAccount: the writes of src/tls/secret-store.ts, syncCaBundles, OwnerEventRecorder and InjectedSidecarPolicySource. */
const webhook: FenceRules = {
  variables: [
    { name: 'secretWrite', expression: request('', 'secrets', '', ['CREATE', 'UPDATE']) },
    {
      name: 'configurationUpdate',
      expression: and(
        'request.resource.group == "admissionregistration.k8s.io"',
        'request.resource.resource in ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]',
        'request.?subResource.orValue("") == ""',
        'request.operation == "UPDATE"',
      ),
    },
    { name: 'eventCreate', expression: request('', 'events', '', ['CREATE']) },
  ],
  validations: [
    // The certificate Secret, as secretStore writes it: every field, so that a stolen token
    // cannot, say, make it immutable (then no replica could renew it).
    {
      expression: onlyIf(
        variable('secretWrite'),
        group(
          and(
            `request.namespace == ${variable('ownNamespace')}`,
            `object.metadata.name == ${variable('tlsSecret')}`,
            'object.type == "kubernetes.io/tls"',
            onlyKeys('object', ['apiVersion', 'kind', 'metadata', 'type', 'data', 'immutable']),
            'object.?immutable.orValue(false) == false',
            onlyKeys('object.?data.orValue({})', Object.values(TLS_SECRET_KEYS)),
            holds('object.metadata.?labels', celMap(MANAGED_BY_LABELS)),
            onlyKeys('object.metadata', [...SERVER_METADATA, 'name', 'namespace', 'labels', 'uid', 'creationTimestamp']),
          ),
        ),
      ),
      messageExpression:
        `"sidecar-terminator fence: the webhook may write only the Secret " + variables.ownNamespace + "/" + variables.tlsSecret + " of type kubernetes.io/tls, not immutable, with the keys ${Object.values(TLS_SECRET_KEYS).join(', ')} and the label app.kubernetes.io/managed-by=${COMPONENT} alone, and no other field"`,
    },
    // syncCaBundles: the caBundle of each webhook of its two configurations, nothing else.
    {
      expression: onlyIf(
        variable('configurationUpdate'),
        group(
          and(
            `object.metadata.name == ${variable('configurationName')}`,
            sameExcept('object.metadata', 'oldObject.metadata', SERVER_METADATA),
            sameExcept('object', 'oldObject', ['metadata', 'webhooks']),
            'object.?webhooks.orValue([]).size() == oldObject.?webhooks.orValue([]).size()',
            `object.?webhooks.orValue([]).all(w, oldObject.webhooks.exists(o, ${and('o.name == w.name', sameExcept('w', 'o', ['clientConfig']), sameExcept('w.clientConfig', 'o.clientConfig', ['caBundle']))}))`,
          ),
        ),
      ),
      messageExpression: '"sidecar-terminator fence: the webhook may change only the caBundle of the webhook configurations " + variables.configurationName',
    },
    // OwnerEventRecorder: InvalidSidecarConfiguration on the owner of an object admitted despite
    // errors. InjectedSidecarPolicySource: InjectedSidecarPolicyInvalid on the webhook's own pod,
    // in the add-on's namespace, when a changed policy file cannot be used.
    {
      expression: onlyIf(
        variable('eventCreate'),
        group(
          ownEvent(
            and(
              holds('object.?type', '"Warning"'),
              group(
                or(
                  `object.reason == ${literal(OWNER_EVENT_REASON)}`,
                  group(
                    and(
                      `object.reason == ${literal(INJECTED_POLICY_INVALID_REASON)}`,
                      `request.namespace == ${variable('ownNamespace')}`,
                      holds('object.involvedObject.?kind', '"Pod"'),
                      holds('object.involvedObject.?apiVersion', '"v1"'),
                      'object.metadata.name.startsWith(object.involvedObject.?name.orValue("") + ".")',
                    ),
                  ),
                ),
              ),
            ),
          ),
        ),
      ),
      messageExpression: `"sidecar-terminator fence: the webhook may create only its ${OWNER_EVENT_REASON} Warning events (component ${COMPONENT}) on an object of the event's namespace, and ${INJECTED_POLICY_INVALID_REASON} Warning events on a pod of " + variables.ownNamespace`,
    },
    {
      expression: or(...['secretWrite', 'configurationUpdate', 'eventCreate'].map(variable)),
      message: "sidecar-terminator fence: the webhook's ServiceAccount makes no such write (only its certificate Secret, the caBundle of its webhook configurations, and events)",
    },
  ],
};

export const FENCE_RULES = { watcher, webhook } as const;

export type FencedComponent = keyof typeof FENCE_RULES;
