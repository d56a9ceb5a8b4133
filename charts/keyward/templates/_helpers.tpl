{{/* Prefix of every object name. */}}
{{- define "keyward.fullname" -}}
{{- default "keyward" .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "keyward.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: keyward
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: keyward
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "webhook") */}}
{{- define "keyward.selectorLabels" -}}
app.kubernetes.io/name: keyward
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "keyward.componentLabels" -}}
{{ include "keyward.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "keyward.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "keyward.webhookService" -}}{{ include "keyward.fullname" . }}-webhook{{- end -}}
{{- define "keyward.webhookSecret" -}}{{ include "keyward.fullname" . }}-webhook-tls{{- end -}}
{{- define "keyward.caSecret" -}}{{ include "keyward.fullname" . }}-ca{{- end -}}
{{/* The reconciler's provider client TLS Secret: its name is a contract between components. */}}
{{- define "keyward.clientSecret" -}}keyward-provider-tls{{- end -}}
{{/* A component's metrics Service: (dict "root" $ "component" "reconciler"). Named so the
prometheus-operator's `service` label matches External Secrets' dashboards and alerts
(metrics.service.namePrefix); refused when longer than a Service name may be. */}}
{{- define "keyward.metricsService" -}}
{{- $prefix := .root.Values.metrics.service.namePrefix -}}
{{- $name := printf "%s-%s-metrics" (include "keyward.fullname" .root) .component -}}
{{- if and $prefix (not (hasPrefix $prefix $name)) }}{{ $name = printf "%s-%s" $prefix $name }}{{ end -}}
{{- if gt (len $name) 63 }}
{{- fail (printf "the metrics Service name %q is longer than 63 characters: shorten fullnameOverride or the provider's name, or set metrics.service.namePrefix to \"\"" $name) }}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* Whether to render a prometheus-operator object: (dict "root" $ "values" $sm "kind" "ServiceMonitor").
"true" when enabled and its kind exists in the cluster, or renderMode says to render it anyway;
fails the install with failIfMissing when the kind is missing. */}}
{{- define "keyward.renderMonitoring" -}}
{{- if .values.enabled -}}
{{- $has := .root.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" .kind) -}}
{{- $mode := .values.renderMode | default "skipIfMissing" -}}
{{- if or $has (eq $mode "alwaysRender") -}}true
{{- else if eq $mode "failIfMissing" -}}
{{- fail (printf "metrics: %s is enabled but the cluster has no monitoring.coreos.com/v1 %s (install the prometheus-operator's CRDs, or set renderMode: skipIfMissing)" .kind .kind) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "keyward.providerService" -}}{{ include "keyward.fullname" .root }}-provider-{{ .provider.name }}{{- end -}}
{{- define "keyward.providerSecret" -}}{{ include "keyward.fullname" .root }}-provider-{{ .provider.name }}-tls{{- end -}}

{{/* DNS names of a Service in the release namespace: (dict "root" $ "service" "name") */}}
{{- define "keyward.serviceDNSNames" -}}
- {{ .service }}.{{ .root.Release.Namespace }}.svc
- {{ .service }}
- {{ .service }}.{{ .root.Release.Namespace }}
- {{ .service }}.{{ .root.Release.Namespace }}.svc.{{ .root.Values.clusterDomain }}
{{- end -}}

{{/* Namespaces admission never sees: kube-system, the release namespace, and the user's list. */}}
{{- define "keyward.namespaceSelector" -}}
{{- $excluded := concat (list "kube-system" .Release.Namespace) .Values.webhook.excludeNamespaces | uniq -}}
{{- $user := .Values.webhook.namespaceSelector -}}
{{- with $user.matchLabels }}
matchLabels:
  {{- toYaml . | nindent 2 }}
{{- end }}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      {{- toYaml $excluded | nindent 6 }}
{{- with $user.matchExpressions }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Labels of one component's object plus user labels, which never replace Keyward's own:
(dict "root" $ "component" "webhook" "extra" (list map…)) — earlier maps win. */}}
{{- define "keyward.mergedLabels" -}}
{{- $labels := fromYaml (include "keyward.componentLabels" .) -}}
{{- range .extra }}{{- $labels = merge $labels (. | default dict) }}{{- end -}}
{{- toYaml $labels -}}
{{- end -}}

{{/* The ServiceAccount a component runs as: (dict "root" $ "component" "webhook" "values" $v) */}}
{{- define "keyward.serviceAccountName" -}}
{{- $sa := .values.serviceAccount | default dict -}}
{{- $sa.name | default (printf "%s-%s" (include "keyward.fullname" .root) .component) -}}
{{- end -}}

{{/* A component's ServiceAccount object, unless serviceAccount.create is false. */}}
{{- define "keyward.serviceAccount" -}}
{{- $sa := .values.serviceAccount | default dict -}}
{{- if dig "create" true $sa }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "keyward.serviceAccountName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "keyward.mergedLabels" (dict "root" .root "component" .component "extra" (list $sa.extraLabels)) | nindent 4 }}
  {{- with $sa.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Pod template metadata: Keyward's labels, then the component's and global podLabels and
podAnnotations (the component's win). */}}
{{- define "keyward.podMetadata" -}}
{{- $g := .root.Values.global | default dict -}}
labels:
  {{- include "keyward.mergedLabels" (dict "root" .root "component" .component "extra" (list .values.podLabels $g.podLabels)) | nindent 2 }}
{{- $annotations := merge (dict) (.values.podAnnotations | default dict) ($g.podAnnotations | default dict) }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A security context: the chart-wide one with the component's merged over it; `enabled: false`
leaves it out. (dict "global" map "own" map) */}}
{{- define "keyward.securityContext" -}}
{{- $sc := mergeOverwrite (deepCopy (.global | default dict)) (deepCopy (.own | default dict)) -}}
{{- if dig "enabled" true $sc -}}
securityContext:
  {{- toYaml (omit $sc "enabled") | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* Pod spec parts every component shares: (dict "root" $ "component" "webhook" "values" $v
"defaultAffinity" map). nodeSelector merges with global.nodeSelector; tolerations, affinity and
topologySpreadConstraints fall back to the global ones when the component sets none; a spread
constraint without a labelSelector selects the component's Pods. */}}
{{- define "keyward.podCommon" -}}
{{- $g := .root.Values.global | default dict -}}
{{- $v := .values -}}
serviceAccountName: {{ include "keyward.serviceAccountName" . }}
{{- $sa := $v.serviceAccount | default dict }}
{{- if kindIs "bool" $sa.automount }}
automountServiceAccountToken: {{ $sa.automount }}
{{- end }}
{{- if $v.hostNetwork }}
hostNetwork: true
{{- end }}
{{- /* On the node's network, cluster DNS names still resolve through the cluster's DNS. */}}
{{- with $v.dnsPolicy | default (ternary "ClusterFirstWithHostNet" "" (eq (toString $v.hostNetwork) "true")) }}
dnsPolicy: {{ . }}
{{- end }}
{{- with $v.dnsConfig }}
dnsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if kindIs "bool" $v.hostUsers }}
hostUsers: {{ $v.hostUsers }}
{{- end }}
{{- with $v.hostAliases | default $g.hostAliases }}
hostAliases:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.schedulerName }}
schedulerName: {{ . | quote }}
{{- end }}
{{- with $v.runtimeClassName }}
runtimeClassName: {{ . | quote }}
{{- end }}
{{- with $v.extraInitContainers }}
initContainers:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with include "keyward.securityContext" (dict "global" .root.Values.podSecurityContext "own" $v.podSecurityContext) }}
{{ . }}
{{- end }}
{{- with merge (dict) ($v.nodeSelector | default dict) ($g.nodeSelector | default dict) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations | default $g.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity | default $g.affinity | default .defaultAffinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.topologySpreadConstraints | default $g.topologySpreadConstraints }}
{{- $constraints := list }}
{{- range . }}
{{- $c := deepCopy . }}
{{- if not $c.labelSelector }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "keyward.selectorLabels" $ | fromYaml)) }}
{{- end }}
{{- $constraints = append $constraints $c }}
{{- end }}
topologySpreadConstraints:
  {{- toYaml $constraints | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A component's Deployment-level values: deploymentAnnotations under metadata
(keyward.deploymentAnnotations), revisionHistoryLimit and strategy under spec
(keyward.deploymentSpec). (dict "values" $v) */}}
{{- define "keyward.deploymentAnnotations" -}}
{{- with .values.deploymentAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "keyward.deploymentSpec" -}}
{{- if not (kindIs "invalid" .values.revisionHistoryLimit) }}
revisionHistoryLimit: {{ .values.revisionHistoryLimit }}
{{- end }}
{{- with .values.strategy }}
strategy:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* More containers of the component's Pod, after Keyward's (a list item each). */}}
{{- define "keyward.extraContainers" -}}
{{- with .values.extraContainers }}
{{- toYaml . }}
{{- end }}
{{- end -}}

{{/* The container's args: extraArgs as --key=value (--key alone for an empty value). */}}
{{- define "keyward.args" -}}
{{- with .values.extraArgs -}}
args:
  {{- range $key, $value := . }}
  {{- if or (kindIs "invalid" $value) (eq (toString $value) "") }}
  - {{ printf "--%s" $key | quote }}
  {{- else }}
  - {{ printf "--%s=%v" $key $value | quote }}
  {{- end }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* The container's security context: (dict "root" $ "values" $v) */}}
{{- define "keyward.containerSecurityContext" -}}
{{- include "keyward.securityContext" (dict "global" .root.Values.securityContext "own" .values.securityContext) -}}
{{- end -}}

{{/* Environment every component gets: (dict "root" $ "values" $v) */}}
{{- define "keyward.commonEnv" -}}
- name: KEYWARD_LOG_FORMAT
  value: {{ dig "log" "format" "" .values | default .root.Values.logFormat | quote }}
{{- with dig "log" "level" "" .values | default .root.Values.logLevel }}
- name: KEYWARD_LOG_LEVEL
  value: {{ . | quote }}
{{- end }}
- name: KEYWARD_POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: KEYWARD_IDENTITY
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end -}}

{{/* The user's variables, after Keyward's: env, then extraEnv. */}}
{{/* The Secret holding the key of the reconciler's data hashes. */}}
{{- define "keyward.hashKeySecret" -}}
{{- .Values.hashKey.existingSecret | default (printf "%s-hash-key" (include "keyward.fullname" .)) -}}
{{- end -}}

{{/* clusterNetworks as one comma-separated list (empty when none is set). */}}
{{- define "keyward.clusterNetworks" -}}
{{- $n := .Values.clusterNetworks | default dict -}}
{{- concat ($n.podCIDRs | default list) ($n.serviceCIDRs | default list) ($n.apiServerAddresses | default list) | join "," -}}
{{- end -}}

{{- define "keyward.userEnv" -}}
{{- with concat (.values.env | default list) (.values.extraEnv | default list) }}
{{- toYaml . }}
{{- end }}
{{- end -}}

{{/* A PodDisruptionBudget for a component when podDisruptionBudget.enabled: maxUnavailable when
given, else minAvailable (default 1). (dict "root" $ "component" "webhook" "values" $v "name" n) */}}
{{- define "keyward.podDisruptionBudget" -}}
{{- $pdb := .values.podDisruptionBudget | default dict -}}
{{- if $pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "keyward.componentLabels" . | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" $pdb.maxUnavailable) }}
  maxUnavailable: {{ $pdb.maxUnavailable }}
  {{- else }}
  minAvailable: {{ hasKey $pdb "minAvailable" | ternary $pdb.minAvailable 1 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "keyward.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/* The provider-identity namespaces as an env entry, for the webhook and every provider (both
must hold the same list: the webhook admits what the providers then serve). */}}
{{- define "keyward.providerIdentityEnv" -}}
{{- with .Values.providerIdentityNamespaces }}
- name: KEYWARD_PROVIDER_IDENTITY_NAMESPACES
  value: {{ join "," . | quote }}
{{- end }}
{{- end }}
