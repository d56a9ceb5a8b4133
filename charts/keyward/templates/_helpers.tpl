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

{{/* Pod spec parts every component shares. */}}
{{- define "keyward.podCommon" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "keyward.commonEnv" -}}
- name: KEYWARD_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
- name: KEYWARD_POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: KEYWARD_IDENTITY
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end -}}
