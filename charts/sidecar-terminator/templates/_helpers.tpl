{{/* Names. With the release called sidecar-terminator, every name equals the default of its serve flag. */}}
{{- define "sidecar-terminator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sidecar-terminator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* <full name>-<suffix>, within 63 characters. Call with (list $ "suffix"). */}}
{{- define "sidecar-terminator.componentName" -}}
{{- $root := index . 0 }}
{{- $suffix := index . 1 }}
{{- printf "%s-%s" (include "sidecar-terminator.fullname" $root | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix }}
{{- end }}

{{/* The webhook Service (--service-name). */}}
{{- define "sidecar-terminator.serviceName" -}}
{{- include "sidecar-terminator.fullname" . }}
{{- end }}

{{/* The Mutating and Validating webhook configurations (--webhook-config-name). */}}
{{- define "sidecar-terminator.configurationName" -}}
{{- .Values.webhook.configurationName | default (include "sidecar-terminator.fullname" .) }}
{{- end }}

{{/* The certificate Secret (--tls-secret), created by the webhook itself. */}}
{{- define "sidecar-terminator.tlsSecretName" -}}
{{- .Values.webhook.tls.secretName | default (include "sidecar-terminator.componentName" (list . "tls")) }}
{{- end }}

{{/* The cert-manager Certificate of the serving certificate (webhook.tls.certManager). */}}
{{- define "sidecar-terminator.certificateName" -}}
{{- include "sidecar-terminator.componentName" (list . "serving") }}
{{- end }}

{{/* The watcher's leader election Lease (--leader-election-lease). */}}
{{- define "sidecar-terminator.leaseName" -}}
{{- .Values.watcher.leaderElection.leaseName | default (include "sidecar-terminator.componentName" (list . "watcher")) }}
{{- end }}

{{- define "sidecar-terminator.webhookServiceAccountName" -}}
{{- .Values.webhook.serviceAccount.name | default (include "sidecar-terminator.componentName" (list . "webhook")) }}
{{- end }}

{{- define "sidecar-terminator.watcherServiceAccountName" -}}
{{- .Values.watcher.serviceAccount.name | default (include "sidecar-terminator.componentName" (list . "watcher")) }}
{{- end }}

{{/* The fence's ValidatingAdmissionPolicy and binding of a component. Call with (list $ "watcher"). */}}
{{- define "sidecar-terminator.fenceName" -}}
{{- printf "%s-%s" (include "sidecar-terminator.configurationName" (index . 0)) (index . 1) }}
{{- end }}

{{/* The ConfigMap of the injected-sidecar policy (templates/injected-sidecars.yaml), its key, and where the webhook mounts it. */}}
{{- define "sidecar-terminator.injectedSidecarsName" -}}
{{- include "sidecar-terminator.componentName" (list . "injected-sidecars") }}
{{- end }}

{{- define "sidecar-terminator.injectedSidecarsKey" -}}
policy.yaml
{{- end }}

{{- define "sidecar-terminator.injectedSidecarsDir" -}}
/etc/sidecar-terminator/injected-sidecars
{{- end }}

{{/* Whether the injected-sidecar policy has an entry (a preset enabled, or an entry given): "true" or "". */}}
{{- define "sidecar-terminator.injectedSidecarsOn" -}}
{{- if (include "sidecar-terminator.injectedSidecarPolicy" . | fromYaml).entries }}true{{ end }}
{{- end }}

{{/*
Whether an entry of the policy has a namespaceSelector, so that the webhook reads the namespaces'
labels: "true" or "". A selector with no label and no expression matches every namespace, as none
does: serve reads no namespace for it.
*/}}
{{- define "sidecar-terminator.injectedSidecarsReadNamespaces" -}}
{{- range (include "sidecar-terminator.injectedSidecarPolicy" . | fromYaml).entries }}{{ with .namespaceSelector }}{{ if or .matchLabels .matchExpressions }}true{{ end }}{{ end }}{{ end }}
{{- end }}

{{/* The image of the signal mechanism's ephemeral container (--signal-image). */}}
{{- define "sidecar-terminator.signalImage" -}}
{{- .Values.watcher.signalImage | default (include "sidecar-terminator.besideImage" (list . "stop-sidecar")) }}
{{- end }}

{{- define "sidecar-terminator.quickExitImage" -}}
{{- if kindIs "invalid" .Values.watcher.quickExitImage }}
{{- include "sidecar-terminator.besideImage" (list . "quick-exit") }}
{{- else }}
{{- .Values.watcher.quickExitImage }}
{{- end }}
{{- end }}

{{/*
An image published beside the add-on's own (stop-sidecar, quick-exit), with its tag: in the
same registry and path (image.registry), or beside a repository that names its own registry.
Call with (list $ "stop-sidecar").
*/}}
{{- define "sidecar-terminator.besideImage" -}}
{{- $root := index . 0 }}
{{- $path := dir (include "sidecar-terminator.repository" $root) }}
{{- printf "%s%s:%s" (ternary "" (printf "%s/" $path) (eq $path ".")) (index . 1) ($root.Values.image.tag | default $root.Chart.AppVersion) }}
{{- end }}

{{- define "sidecar-terminator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" (include "sidecar-terminator.repository" .) .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" (include "sidecar-terminator.repository" .) (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
The add-on's repository: image.registry, then image.repository; a repository that names its own
registry (its first part has a dot or a port, or is localhost, as image references read) stands alone.
*/}}
{{- define "sidecar-terminator.repository" -}}
{{- $repository := .Values.image.repository }}
{{- $first := splitList "/" $repository | first }}
{{- if or (not .Values.image.registry) (and (contains "/" $repository) (or (contains "." $first) (contains ":" $first) (eq $first "localhost"))) }}
{{- $repository }}
{{- else }}
{{- printf "%s/%s" (trimSuffix "/" .Values.image.registry) $repository }}
{{- end }}
{{- end }}

{{/* Labels. Call the component ones with (list $ "webhook"). */}}
{{- define "sidecar-terminator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "sidecar-terminator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sidecar-terminator
{{- end }}

{{- define "sidecar-terminator.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "sidecar-terminator.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "sidecar-terminator.componentLabels" -}}
{{ include "sidecar-terminator.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* Whether the sweeper lists namespaces by label (webhook.namespaceLabels set, sweeper on): "true" or "". */}}
{{- define "sidecar-terminator.sweepsLabelledNamespaces" -}}
{{- if and .Values.webhook.namespaceLabels (not (regexMatch "^(0+(ms|s|m|h|d))+$" .Values.watcher.sweepInterval)) }}true{{ end }}
{{- end }}

{{/* Whether the watcher needs a permission for a kill mechanism: "true" or "". */}}
{{- define "sidecar-terminator.usesCrr" -}}
{{- if ne .Values.watcher.killMechanism "signal" }}true{{ end }}
{{- end }}

{{/* The pod-level settings both Deployments share. Call with (list $ .Values.webhook). */}}
{{- define "sidecar-terminator.podScheduling" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $component.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
terminationGracePeriodSeconds: {{ $root.Values.terminationGracePeriodSeconds }}
{{- end }}

{{/* A container's environment variables from a component's `env` map, by name. */}}
{{- define "sidecar-terminator.envList" -}}
{{- range $name, $value := . }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}

{{/* The watcher's pod permissions: one ClusterRole, or a Role per --namespaces entry. */}}
{{- define "sidecar-terminator.watcherPodRules" -}}
# The reflector lists and watches the managed pods (listPodForAllNamespaces or
# listNamespacedPod, then a watch); the sweeper lists unlabelled running pods the same way.
# The reconciler reads a pod as it is now before saying its sidecar ignores SIGTERM (readNamespacedPod).
# Patches (patchNamespacedPod): the sweeper's managed label and the quick-exit image (PodWriter.replaceImage).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch]
# PodWriter.setStatus: the terminal phase with the SidecarTerminated condition and the phase-set annotation, that condition while a quick-exit image cannot be pulled, and the stop record once the pod has ended (patchNamespacedPodStatus).
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]
# PodWriter.addEphemeralContainers: the signal containers that send SIGTERM or a sidecar's HTTP
# shutdown request, whatever the kill mechanism (patchNamespacedPodEphemeralcontainers).
- apiGroups: [""]
  resources: [pods/ephemeralcontainers]
  verbs: [patch]
# SidecarTerminator, SidecarTerminationFailed and SidecarExitFailedPod events on the pods (createNamespacedEvent).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# Executor.reportEnded: the Job of a pod that a stopped sidecar's exit code failed, whose
# podFailurePolicy the SidecarExitFailedPod event names (readNamespacedJob).
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get]
{{- if include "sidecar-terminator.usesCrr" . }}
# createCrr: an OpenKruise ContainerRecreateRequest (createNamespacedCustomObject).
- apiGroups: [apps.kruise.io]
  resources: [containerrecreaterequests]
  verbs: [create]
# Its owner reference to the pod sets blockOwnerDeletion, as Kruise's does; the API server's
# OwnerReferencesPermissionEnforcement admission plugin (on in some distributions) then requires
# update on the pod's finalizers.
- apiGroups: [""]
  resources: [pods/finalizers]
  verbs: [update]
{{- end }}
{{- end }}

{{/* What the webhooks share. Call with (list $ "/path" $excludedNamespaces), and a dict of namespace labels the webhook also requires as a fourth element. */}}
{{- define "sidecar-terminator.webhookCommon" -}}
{{- $root := index . 0 -}}
{{- $namespaceLabels := $root.Values.webhook.namespaceLabels -}}
{{- if gt (len .) 3 }}{{ $namespaceLabels = merge (dict) (index . 3) $root.Values.webhook.namespaceLabels }}{{ end -}}
clientConfig:
  service:
    name: {{ include "sidecar-terminator.serviceName" $root }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ index . 1 }}
    port: {{ $root.Values.webhook.service.port }}
admissionReviewVersions:
  - v1
failurePolicy: {{ $root.Values.webhook.failurePolicy }}
timeoutSeconds: {{ $root.Values.webhook.timeoutSeconds }}
namespaceSelector:
  {{- with $namespaceLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- toYaml (index . 2) | nindent 8 }}
{{- end }}

{{/*
matchConditions: the CEL the API server evaluates before calling a webhook, the same as
src/kube/webhook-configurations.ts writes (MATCH_CONDITIONS; test/chart/render.test.ts compares
them). The mutating webhooks keep every pod that can finish (restartPolicy Never or OnFailure) in
reach, marked or not: a mutating webhook skipped in the first round is never called again in the
reinvocation round, so it could not label a marked sidecar a later webhook injects. Other pods
reach them only with a marker. The validating webhook, called after every mutation, sees a pod or
template that can finish when one of its names may be a marker's or a near miss of one (it holds
KRUISE, SIDECAR or TERMINAT in any case; or the pod has too many names, or too long a name, to
test within the API server's CEL cost limit), so that `kubectl apply` of a Job whose only marker
is misspelt prints the webhook's warning; any other, only with a marker. A name is an env var's
on a container, or a key of the pod's annotations (its template's).
*/}}
{{- define "sidecar-terminator.markedSpec" -}}
{{- $anyMarked := "%s.exists(c, has(c.env) && c.env.exists(e, has(e.name) && e.name in ['KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE', 'SIDECAR_TERMINATOR_STOP', 'SIDECAR_TERMINATOR_GRACE_PERIOD_SECONDS']))" -}}
(has({{ . }}.containers) && {{ printf $anyMarked (printf "%s.containers" .) }}) || (has({{ . }}.initContainers) && {{ printf $anyMarked (printf "%s.initContainers" .) }})
{{- end }}

{{/* The object's fields at this path (a list of fields) reached one by one, each step tested with has() first. */}}
{{- define "sidecar-terminator.guarded" -}}
{{- $steps := list }}
{{- range $index, $_ := . }}{{ $steps = append $steps (printf "has(object.%s)" (slice $ 0 (add1 $index) | join ".")) }}{{ end -}}
{{ join " && " $steps }}
{{- end }}

{{/* A marker in the object's pod spec at this path (a list of fields). */}}
{{- define "sidecar-terminator.markedAt" -}}
{{ include "sidecar-terminator.guarded" . }} && ({{ include "sidecar-terminator.markedSpec" (printf "object.%s" (join "." .)) }})
{{- end }}

{{/* An annotation that names or configures a sidecar, in the object's metadata at this path (a list of fields). */}}
{{- define "sidecar-terminator.annotatedAt" -}}
{{ include "sidecar-terminator.guarded" (concat . (list "annotations")) }} && object.{{ join "." . }}.annotations.exists(k, k in ['sidecar-terminator.io/sidecars', 'sidecar-terminator.io/ignore-exit-code'] || k.startsWith('stop.sidecar-terminator.io/') || k.startsWith('grace-period-seconds.sidecar-terminator.io/'))
{{- end }}

{{/* A marker in the pod template at this path (a list of fields; the pod itself: an empty list): in its spec or its annotations. */}}
{{- define "sidecar-terminator.markedTemplate" -}}
({{ include "sidecar-terminator.markedAt" (concat . (list "spec")) }}) || ({{ include "sidecar-terminator.annotatedAt" (concat . (list "metadata")) }})
{{- end }}

{{/* A name (a CEL expression) that may be a marker's or a near miss of one: mayBeMarker in src/kube/webhook-configurations.ts. */}}
{{- define "sidecar-terminator.mayBeMarker" -}}
(size({{ . }}) > 64 || {{ . }}.upperAscii().contains('KRUISE') || {{ . }}.upperAscii().contains('SIDECAR') || {{ . }}.upperAscii().contains('TERMINAT'))
{{- end }}

{{/* The pod template at this path (its spec is there already) with a name that may be a marker's, or more names than are tested (NAMES_TESTED). */}}
{{- define "sidecar-terminator.mayBeMarkedAt" -}}
{{- $containers := "(has(%[1]s) && (%[1]s.size() > 32 || %[1]s.exists(c, has(c.env) && (c.env.size() > 128 || c.env.exists(e, has(e.name) && %[2]s)))))" }}
{{- $mayBeMarker := include "sidecar-terminator.mayBeMarker" "e.name" }}
{{- $spec := printf "object.%s" (concat . (list "spec") | join ".") }}
{{- $metadata := concat . (list "metadata") }}
{{- $annotations := printf "object.%s.annotations" (join "." $metadata) -}}
{{ printf $containers (printf "%s.containers" $spec) $mayBeMarker }} || {{ printf $containers (printf "%s.initContainers" $spec) $mayBeMarker }} || ({{ include "sidecar-terminator.guarded" (concat $metadata (list "annotations")) }} && ({{ $annotations }}.size() > 128 || {{ $annotations }}.exists(k, {{ include "sidecar-terminator.mayBeMarker" "k" }})))
{{- end }}

{{/* What the validating webhook sees of the pod template at this path (a list of fields; the pod itself: an empty list): one that can finish with a name that may be a marker's, another with a marker. */}}
{{- define "sidecar-terminator.validatedTemplate" -}}
{{- $restartPolicy := concat . (list "spec" "restartPolicy") -}}
{{ include "sidecar-terminator.guarded" $restartPolicy }} && object.{{ join "." $restartPolicy }} in ['Never', 'OnFailure'] ? ({{ include "sidecar-terminator.mayBeMarkedAt" . }}) : {{ include "sidecar-terminator.markedTemplate" . }}
{{- end }}

{{- define "sidecar-terminator.mutatingMatchConditions" -}}
matchConditions:
  - name: may-finish-or-marked
    expression: {{ printf "has(object.spec) && ((has(object.spec.restartPolicy) && object.spec.restartPolicy in ['Never', 'OnFailure']) || %s || (%s))" (include "sidecar-terminator.markedSpec" "object.spec") (include "sidecar-terminator.annotatedAt" (list "metadata")) | quote }}
{{- end }}

{{- define "sidecar-terminator.validatingMatchConditions" -}}
matchConditions:
  - name: marked
    expression: {{ printf "request.resource.resource == 'pods' ? (%s) : request.resource.resource == 'cronjobs' ? (%s) : (%s)" (include "sidecar-terminator.validatedTemplate" (list)) (include "sidecar-terminator.validatedTemplate" (list "spec" "jobTemplate" "spec" "template")) (include "sidecar-terminator.validatedTemplate" (list "spec" "template")) | quote }}
{{- end }}

{{/* With webhook.tls.certManager, cert-manager's cainjector writes the caBundle from this Certificate. */}}
{{- define "sidecar-terminator.injectCa" -}}
{{- if .Values.webhook.tls.certManager.enabled }}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "sidecar-terminator.certificateName" .) }}
{{- end }}
{{- end }}

{{/*
The addresses the API server calls the webhook from, as a YAML list of CIDRs:
networkPolicy.apiServerCIDRs, else those the `kubernetes` EndpointSlice lists, read at install
time (none with `helm template`).
*/}}
{{- define "sidecar-terminator.apiServerCIDRs" -}}
{{- $cidrs := .Values.networkPolicy.apiServerCIDRs }}
{{- if not $cidrs }}
{{- $slice := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes" }}
{{- range (get ($slice | default dict) "endpoints" | default list) }}
{{- range .addresses }}
{{- $cidrs = append $cidrs (printf "%s/%s" . (ternary "128" "32" (contains ":" .))) }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $cidrs }}
{{- end }}

{{/*
The NetworkPolicy peers allowed to call the webhook, as a YAML list: the API server's addresses
and networkPolicy.webhookFrom. An empty list admits every source.
*/}}
{{- define "sidecar-terminator.webhookPeers" -}}
{{- $peers := list }}
{{- range (include "sidecar-terminator.apiServerCIDRs" . | fromYamlArray) }}
{{- $peers = append $peers (dict "ipBlock" (dict "cidr" .)) }}
{{- end }}
{{- toYaml (concat $peers .Values.networkPolicy.webhookFrom) }}
{{- end }}
