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
import {
  COMPONENT,
  CONDITION_REASONS,
  CRR,
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  EVENT_REASONS,
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

/** A CEL literal: a JSON string or list of strings reads the same in CEL. */
export const literal = (value: string | readonly string[]): string => JSON.stringify(value);

const list = (values: readonly string[]) => literal(values);

/** Every key of `next` but `except` equal in `previous`, and none removed. */
const sameExcept = (next: string, previous: string, except: readonly string[]) =>
  `dyn(${next}).all(k, k in ${list(except)} || (k in dyn(${previous}) && dyn(${next})[k] == dyn(${previous})[k])) && ` +
  `dyn(${previous}).all(k, k in ${list(except)} || k in dyn(${next}))`;

/** A CEL map literal of strings, `{"key": "value"}`. */
const celMap = (map: Readonly<Record<string, string>>) => `{${Object.entries(map).map(([key, value]) => `${literal(key)}: ${literal(value)}`).join(', ')}}`;

/** Only these keys in the object. */
const onlyKeys = (object: string, keys: readonly string[]) => `dyn(${object}).all(k, k in ${list(keys)})`;

/** What the API server itself changes in metadata on every write. */
const SERVER_METADATA = ['resourceVersion', 'managedFields', 'generation'];

const request = (group: string, resource: string, subResource: string, operations: readonly string[]) =>
  `request.resource.group == ${literal(group)} && request.resource.resource == ${literal(resource)} && request.?subResource.orValue("") == ${literal(subResource)} && request.operation in ${list(operations)}`;

// A container's sidecar markers, read as OpenKruise reads them, or its name in the pod's
// sidecars annotation (src/policy/markers.ts).
const env = (container: string) => `${container}.?env.orValue([])`;
const isKillSidecar = (container: string) =>
  `(${env(container)}.exists(e, e.name == ${literal(ENV_WHEN_JOB_EXIT)} && e.?value.orValue("").lowerAscii() == "true") || ${container}.name in variables.namedSidecars)`;
/** The first KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE entry's value, "" when there is none. */
const quickExitImage = (container: string) =>
  `(${env(container)}.exists(e, e.name == ${literal(ENV_WITH_IMAGE)}) ? ${env(container)}.filter(e, e.name == ${literal(ENV_WITH_IMAGE)})[0].?value.orValue("") : "")`;
const isSidecar = (container: string) => `(${isKillSidecar(container)} || ${quickExitImage(container)} != "")`;

const LABEL = literal(MANAGED_LABEL);
const PHASE_SET = literal(PHASE_SET_ANNOTATION);
const TERMINAL_PHASES = ['Succeeded', 'Failed'];

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
    { name: 'managedBefore', expression: `variables.oldLabels[?${LABEL}].orValue("") == ${literal(MANAGED)}` },
    // The containers the pod's annotation names as sidecars.
    {
      name: 'namedSidecars',
      expression: `variables.oldAnnotations[?${literal(POD_ANNOTATIONS.sidecars)}].orValue("").split(",").map(n, n.trim()).filter(n, n != "")`,
    },
    { name: 'signalCommand', expression: list(SIGNAL_COMMAND) },
    { name: 'oldEphemeral', expression: 'oldObject.spec.?ephemeralContainers.orValue([])' },
    { name: 'newEphemeral', expression: 'object.spec.?ephemeralContainers.orValue([])' },
    { name: 'addedEphemeral', expression: 'variables.newEphemeral.filter(n, !variables.oldEphemeral.exists(o, o.name == n.name))' },
    { name: 'oldConditions', expression: 'oldObject.status.?conditions.orValue([])' },
    { name: 'newConditions', expression: 'object.status.?conditions.orValue([])' },
    // The exit code of each main container (one without a marker), -1000 while it has not exited.
    {
      name: 'mainExitCodes',
      expression:
        `oldObject.spec.containers.filter(c, !${isSidecar('c')}).map(c, oldObject.status.?containerStatuses.orValue([]).exists(s, s.name == c.name && has(s.state) && has(s.state.terminated)) ? ` +
        'oldObject.status.containerStatuses.filter(s, s.name == c.name)[0].state.terminated.exitCode : -1000)',
    },
    // The watcher stops sidecars only once every main container has exited (src/policy/decide.ts).
    { name: 'mainsExited', expression: 'variables.mainExitCodes.size() > 0 && !variables.mainExitCodes.exists(code, code == -1000)' },
  ],
  validations: [
    // The sweeper: the managed label, and nothing else of the metadata.
    {
      expression: `!variables.podUpdate || (${sameExcept('object.metadata', 'oldObject.metadata', [...SERVER_METADATA, 'labels'])})`,
      message: 'sidecar-terminator fence: the watcher may not change the annotations, owners, finalizers or other metadata of a pod',
    },
    {
      expression:
        `!variables.podUpdate || (variables.newLabels.all(k, k == ${LABEL} || (k in variables.oldLabels && variables.oldLabels[k] == variables.newLabels[k])) && ` +
        `variables.oldLabels.all(k, k == ${LABEL} || k in variables.newLabels) && (` +
        `variables.newLabels[?${LABEL}] == variables.oldLabels[?${LABEL}] || ` +
        `(!(${LABEL} in variables.oldLabels) && variables.newLabels[?${LABEL}] == optional.of(${literal(MANAGED)}) && oldObject.spec.?restartPolicy.orValue("Always") in ["Never", "OnFailure"] && oldObject.spec.containers.exists(c, ${isSidecar('c')}))))`,
      message: `sidecar-terminator fence: the watcher may change only the ${MANAGED_LABEL} label of a pod: to "${MANAGED}" on an unlabelled pod with restartPolicy Never or OnFailure and a sidecar marker`,
    },
    // PodWriter.replaceImage: a sidecar's image, to the quick-exit image its own env declares.
    {
      expression:
        `!variables.podUpdate || (${sameExcept('object.spec', 'oldObject.spec', ['containers'])} && object.spec.containers.size() == oldObject.spec.containers.size() && ` +
        `object.spec.containers.all(c, oldObject.spec.containers.exists(o, o.name == c.name && ${sameExcept('c', 'o', ['image'])} && ` +
        `(c.image == o.image || (variables.managedBefore && variables.mainsExited && c.image != "" && (c.image == ${quickExitImage('o')} || ` +
        // The end of a sidecar still running after its grace period: --quick-exit-image, where it sets
        // no command, or once the pod's phase is terminal (the kubelet then runs no container of it).
        `(c.image == variables.quickExitImage && ${isKillSidecar('o')} && (!has(o.command) || oldObject.status.?phase.orValue("") in ${list(TERMINAL_PHASES)}))))))))`,
      messageExpression: `"sidecar-terminator fence: the watcher may change the spec of a pod labelled ${MANAGED_LABEL}=${MANAGED} only to replace a sidecar's image with the first ${ENV_WITH_IMAGE} of that container, or a sidecar's with " + variables.quickExitImage + " where it sets no command or the pod's phase is terminal, once every main container has exited"`,
    },
    // PodWriter.addEphemeralContainers: the signal containers of src/policy/signal-container.ts.
    {
      expression: '!variables.signalContainersAdded || variables.mainsExited',
      message: 'sidecar-terminator fence: the watcher may add a signal container only once every main container of the pod has exited',
    },
    {
      expression:
        '!variables.signalContainersAdded || (variables.managedBefore && variables.oldEphemeral.all(o, variables.newEphemeral.exists(n, n == o)) && variables.addedEphemeral.size() > 0 && ' +
        // The API server fills in imagePullPolicy, terminationMessagePath and an empty resources.
        `variables.addedEphemeral.all(n, ${onlyKeys('n', ['name', 'image', 'command', 'args', 'targetContainerName', 'terminationMessagePolicy', 'terminationMessagePath', 'imagePullPolicy', 'resources', 'securityContext'])} && ` +
        `dyn(n.?resources.orValue({})).size() == 0 && n.name.startsWith(${literal(SIGNAL_CONTAINER_PREFIX)}) && n.image == variables.signalImage && n.?command.orValue([]) == variables.signalCommand && ` +
        // Its arguments (src/policy/signal-container.ts stopArguments): a shutdown request goes to the pod's own loopback only.
        `n.?args.orValue([]).size() <= 4 && n.?args.orValue([]).all(a, ${list(STOP_ARGUMENT_FORMS)}.exists(f, a.matches(f)))))`,
      messageExpression: `"sidecar-terminator fence: the watcher may only add its signal container to a pod labelled ${MANAGED_LABEL}=${MANAGED}: named stop-<sidecar>, image " + variables.signalImage + ", command " + variables.signalCommand.join(" ") + ", arguments --grace-period, --method, --url (http://localhost, 127.0.0.1 or [::1] only) and --container-id, and no other field"`,
    },
    {
      expression: `!variables.signalContainersAdded || variables.addedEphemeral.all(n, oldObject.spec.containers.exists(t, t.name == n.?targetContainerName.orValue("") && ${isKillSidecar('t')}))`,
      message: `sidecar-terminator fence: the watcher's signal container must target a container marked ${ENV_WHEN_JOB_EXIT}=true or named in the pod's ${POD_ANNOTATIONS.sidecars} annotation`,
    },
    {
      // The user of src/policy/signal-container.ts signalUser: the sidecar's runAsUser/runAsGroup,
      // else the user the kubelet reports, else root with CAP_KILL alone.
      expression:
        '!variables.signalContainersAdded || variables.addedEphemeral.all(n, has(n.securityContext) && oldObject.spec.containers.exists(t, t.name == n.?targetContainerName.orValue("") && ' +
        `${onlyKeys('n.securityContext', ['runAsUser', 'runAsGroup', 'capabilities', 'allowPrivilegeEscalation', 'seccompProfile'])} && ` +
        'n.securityContext.?allowPrivilegeEscalation == optional.of(false) && n.securityContext.?seccompProfile == optional.of({"type": "RuntimeDefault"}) && ' +
        `${onlyKeys('n.securityContext.?capabilities.orValue({})', ['drop', 'add'])} && n.securityContext.?capabilities.?drop == optional.of(["ALL"]) && ` +
        '(t.?securityContext.?runAsUser.or(oldObject.spec.?securityContext.?runAsUser).hasValue() ? ' +
        '(n.securityContext.?runAsUser == t.?securityContext.?runAsUser.or(oldObject.spec.?securityContext.?runAsUser) && n.securityContext.?runAsGroup == t.?securityContext.?runAsGroup.or(oldObject.spec.?securityContext.?runAsGroup) && !has(n.securityContext.capabilities.add)) : ' +
        'oldObject.status.?containerStatuses.orValue([]).exists(s, s.name == t.name && has(s.user) && has(s.user.linux)) ? ' +
        'oldObject.status.containerStatuses.exists(s, s.name == t.name && n.securityContext.?runAsUser == s.user.linux.?uid && n.securityContext.?runAsGroup == s.user.linux.?gid && !has(n.securityContext.capabilities.add)) : ' +
        '(n.securityContext.?runAsUser == optional.of(0) && !has(n.securityContext.runAsGroup) && n.securityContext.?capabilities.?add == optional.of(["KILL"])))))',
      message:
        "sidecar-terminator fence: the watcher's signal container runs as the sidecar's runAsUser/runAsGroup, else as the user the kubelet reports for it, else as root with only CAP_KILL added; " +
        'all capabilities dropped otherwise, allowPrivilegeEscalation false, RuntimeDefault seccomp, no other security setting',
    },
    // PodWriter.setStatus: the terminal phase and the SidecarTerminated condition, and with the
    // phase, the phase-set annotation that makes the kubelet sync the pod.
    {
      expression:
        `!variables.podStatusUpdate || (variables.managedBefore && ${sameExcept('object.metadata', 'oldObject.metadata', [...SERVER_METADATA, 'annotations'])} && ` +
        `${sameExcept('variables.newAnnotations', 'variables.oldAnnotations', [PHASE_SET_ANNOTATION])} && (variables.newAnnotations[?${PHASE_SET}] == variables.oldAnnotations[?${PHASE_SET}] || ` +
        `(object.status.?phase != oldObject.status.?phase && variables.newAnnotations[?${PHASE_SET}] == object.status.?phase)))`,
      message: `sidecar-terminator fence: the watcher may write the status only of a pod labelled ${MANAGED_LABEL}=${MANAGED}, and no metadata through it but the ${PHASE_SET_ANNOTATION} annotation, set to the phase it sets`,
    },
    {
      expression:
        `!variables.podStatusUpdate || (${sameExcept('object.status', 'oldObject.status', ['phase', 'conditions'])} && ` +
        `variables.oldConditions.all(o, o.type == ${literal(TERMINATED_CONDITION)} || variables.newConditions.exists(n, n == o)) && ` +
        `variables.newConditions.filter(n, n.type == ${literal(TERMINATED_CONDITION)}).size() <= 1 && ` +
        `variables.newConditions.all(n, variables.oldConditions.exists(o, o == n) || (n.type == ${literal(TERMINATED_CONDITION)} && ` +
        `${onlyKeys('n', ['type', 'status', 'reason', 'message', 'lastTransitionTime', 'lastProbeTime'])} && n.status in ["True", "False"] && n.?reason.orValue("") in ${list(Object.values(CONDITION_REASONS))})))`,
      message: `sidecar-terminator fence: the watcher may change only the phase and the ${TERMINATED_CONDITION} condition (reason ${Object.values(CONDITION_REASONS).join(' or ')}) of a pod's status`,
    },
    {
      expression:
        `!variables.podStatusUpdate || object.status.?phase == oldObject.status.?phase || (!(oldObject.status.?phase.orValue("") in ${list(TERMINAL_PHASES)}) && ` +
        'variables.mainsExited && (variables.mainExitCodes.all(code, code == 0) ? object.status.?phase == optional.of("Succeeded") : object.status.?phase == optional.of("Failed")))',
      message:
        'sidecar-terminator fence: the watcher may set the phase of a running pod only from its main containers once all have exited: Succeeded when every one exited 0, else Failed',
    },
    // createCrr: OpenKruise's ContainerRecreateRequest for the pod (src/watcher/crr.ts), plus
    // what Kruise's own webhook adds (its crr.apps.kruise.io/ labels, each container's preStop,
    // ports and statusContext copied from the pod, the pod's grace period).
    {
      expression:
        '!variables.crrCreate || (object.metadata.?ownerReferences.orValue([]).size() == 1 && ' +
        `${onlyKeys('object.metadata.ownerReferences[0]', ['apiVersion', 'kind', 'name', 'uid', 'controller', 'blockOwnerDeletion'])} && ` +
        'object.metadata.ownerReferences[0].apiVersion == "v1" && object.metadata.ownerReferences[0].kind == "Pod" && object.metadata.ownerReferences[0].name == object.spec.?podName.orValue("") && ' +
        'object.metadata.ownerReferences[0].?controller == optional.of(true) && object.metadata.ownerReferences[0].?blockOwnerDeletion == optional.of(true) && ' +
        // The name's prefix: crrName of a pod without uid.
        `object.metadata.name == ${literal(crrName(''))} + object.metadata.ownerReferences[0].uid && ` +
        'object.metadata.?labels.orValue({}).all(k, k.startsWith("crr.apps.kruise.io/")) && object.metadata.?labels[?"crr.apps.kruise.io/pod-uid"].orValue(object.metadata.ownerReferences[0].uid) == object.metadata.ownerReferences[0].uid && ' +
        '!has(object.metadata.annotations) && !has(object.metadata.finalizers))',
      message:
        'sidecar-terminator fence: the watcher may create a ContainerRecreateRequest only named sidecar-termination-<pod uid>, owned by that pod alone (controller, blockOwnerDeletion), without annotations, finalizers or labels of its own',
    },
    {
      expression:
        `!variables.crrCreate || (${onlyKeys('object.spec', ['podName', 'containers', 'strategy'])} && object.spec.?containers.orValue([]).size() > 0 && ` +
        `object.spec.containers.all(c, ${onlyKeys('c', ['name', 'preStop', 'ports', 'statusContext'])}) && ` +
        `${onlyKeys('object.spec.?strategy.orValue({})', ['failurePolicy', 'forceRecreate', 'terminationGracePeriodSeconds'])} && ` +
        'object.spec.?strategy.?failurePolicy == optional.of("Ignore") && object.spec.?strategy.?forceRecreate == optional.of(true))',
      message:
        'sidecar-terminator fence: the watcher may create a ContainerRecreateRequest only with podName, the containers by name, and the strategy failurePolicy Ignore, forceRecreate true',
    },
    // EventRecorder: its events on pods, and on its Lease when the kill mechanism follows the cluster.
    {
      expression:
        `!variables.eventCreate || (object.metadata.name.startsWith(object.involvedObject.?name.orValue("") + ".") && object.involvedObject.?namespace == optional.of(request.namespace) && ` +
        `object.?source.?component == optional.of(${literal(COMPONENT)}) && object.?reportingComponent == optional.of(${literal(COMPONENT)}) && (` +
        `(object.involvedObject.?kind == optional.of("Pod") && object.involvedObject.?apiVersion == optional.of("v1") && object.reason in ${list(Object.values(EVENT_REASONS))}) || ` +
        `(object.involvedObject.?kind == optional.of("Lease") && object.involvedObject.?apiVersion == optional.of("coordination.k8s.io/v1") && request.namespace == variables.ownNamespace && ` +
        `object.involvedObject.?name == optional.of(variables.leaseName) && object.reason == ${literal(KILL_MECHANISM_CHANGED)})))`,
      message: `sidecar-terminator fence: the watcher may create only its own events (component ${COMPONENT}): ${Object.values(EVENT_REASONS).join(' or ')} on a pod of the event's namespace, ${KILL_MECHANISM_CHANGED} on its Lease`,
    },
    // LeaderElector: its Lease, in the add-on's namespace.
    {
      expression: '!variables.leaseWrite || (request.namespace == variables.ownNamespace && object.metadata.name == variables.leaseName)',
      messageExpression: '"sidecar-terminator fence: the watcher may write only the Lease " + variables.ownNamespace + "/" + variables.leaseName',
    },
    {
      expression: 'variables.podUpdate || variables.signalContainersAdded || variables.podStatusUpdate || variables.crrCreate || variables.eventCreate || variables.leaseWrite',
      message:
        "sidecar-terminator fence: the watcher's ServiceAccount makes no such write (only patches of pods, their status and ephemeral containers, ContainerRecreateRequests, events and its Lease)",
    },
  ],
};

/** The webhook's ServiceAccount: the writes of src/tls/secret-store.ts, syncCaBundles and OwnerEventRecorder. */
const webhook: FenceRules = {
  variables: [
    { name: 'secretWrite', expression: request('', 'secrets', '', ['CREATE', 'UPDATE']) },
    {
      name: 'configurationUpdate',
      expression: `request.resource.group == "admissionregistration.k8s.io" && request.resource.resource in ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"] && request.?subResource.orValue("") == "" && request.operation == "UPDATE"`,
    },
    { name: 'eventCreate', expression: request('', 'events', '', ['CREATE']) },
  ],
  validations: [
    // The certificate Secret, as secretStore writes it: every field, so that a stolen token
    // cannot, say, make it immutable (then no replica could renew it).
    {
      expression:
        '!variables.secretWrite || (request.namespace == variables.ownNamespace && object.metadata.name == variables.tlsSecret && object.type == "kubernetes.io/tls" && ' +
        `${onlyKeys('object', ['apiVersion', 'kind', 'metadata', 'type', 'data', 'immutable'])} && object.?immutable.orValue(false) == false && ` +
        `${onlyKeys('object.?data.orValue({})', Object.values(TLS_SECRET_KEYS))} && object.metadata.?labels == optional.of(${celMap(MANAGED_BY_LABELS)}) && ` +
        `${onlyKeys('object.metadata', [...SERVER_METADATA, 'name', 'namespace', 'labels', 'uid', 'creationTimestamp'])})`,
      messageExpression:
        `"sidecar-terminator fence: the webhook may write only the Secret " + variables.ownNamespace + "/" + variables.tlsSecret + " of type kubernetes.io/tls, not immutable, with the keys ${Object.values(TLS_SECRET_KEYS).join(', ')} and the label app.kubernetes.io/managed-by=${COMPONENT} alone, and no other field"`,
    },
    // syncCaBundles: the caBundle of each webhook of its two configurations, nothing else.
    {
      expression:
        `!variables.configurationUpdate || (object.metadata.name == variables.configurationName && ${sameExcept('object.metadata', 'oldObject.metadata', SERVER_METADATA)} && ` +
        `${sameExcept('object', 'oldObject', ['metadata', 'webhooks'])} && object.?webhooks.orValue([]).size() == oldObject.?webhooks.orValue([]).size() && ` +
        `object.?webhooks.orValue([]).all(w, oldObject.webhooks.exists(o, o.name == w.name && ${sameExcept('w', 'o', ['clientConfig'])} && ${sameExcept('w.clientConfig', 'o.clientConfig', ['caBundle'])})))`,
      messageExpression: '"sidecar-terminator fence: the webhook may change only the caBundle of the webhook configurations " + variables.configurationName',
    },
    // OwnerEventRecorder: InvalidSidecarConfiguration on the owner of an object admitted despite errors.
    {
      expression:
        `!variables.eventCreate || (object.reason == ${literal(OWNER_EVENT_REASON)} && object.?type == optional.of("Warning") && object.involvedObject.?namespace == optional.of(request.namespace) && ` +
        `object.?source.?component == optional.of(${literal(COMPONENT)}) && object.?reportingComponent == optional.of(${literal(COMPONENT)}))`,
      message: `sidecar-terminator fence: the webhook may create only its ${OWNER_EVENT_REASON} Warning events (component ${COMPONENT}) on an object of the event's namespace`,
    },
    {
      expression: 'variables.secretWrite || variables.configurationUpdate || variables.eventCreate',
      message: "sidecar-terminator fence: the webhook's ServiceAccount makes no such write (only its certificate Secret, the caBundle of its webhook configurations, and events)",
    },
  ],
};

export const FENCE_RULES = { watcher, webhook } as const;

export type FencedComponent = keyof typeof FENCE_RULES;
