{{/*
Generic targets (docs/reconciler.md): ExternalSecrets with spec.target.manifest write ConfigMaps
or other namespaced kinds, only when genericTargets.enabled, and only the resources listed. One
list feeds the reconciler's and the webhook's --generic-target-resources and the reconciler's
RBAC, so the flags and the rights never disagree.
*/}}

{{/* The listed resources as kubectl names them, comma-separated (configmaps,appconfigs.config.example.com). */}}
{{- define "keyward.genericTargetResources" -}}
{{- $g := .Values.genericTargets -}}
{{- $out := list -}}
{{- if $g.configMaps -}}{{- $out = append $out "configmaps" -}}{{- end -}}
{{- range $g.resources -}}
{{- if kindIs "string" . -}}
{{- $out = append $out . -}}
{{- else -}}
{{- /* Upstream's form: {apiGroup, resources, verbs}; Keyward grants its own verbs. */ -}}
{{- $group := .apiGroup | default "" -}}
{{- range .resources -}}
{{- $out = append $out (ternary . (printf "%s.%s" . $group) (eq $group "")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $out | uniq | join "," -}}
{{- end -}}

{{/* The variables the reconciler and the webhook take (nothing while off). */}}
{{- define "keyward.genericTargetEnv" -}}
{{- if .Values.genericTargets.enabled }}
- name: KEYWARD_GENERIC_TARGETS
  value: "true"
- name: KEYWARD_GENERIC_TARGET_RESOURCES
  value: {{ include "keyward.genericTargetResources" . | quote }}
{{- end }}
{{- end -}}

{{/* The reconciler's rights on exactly the listed resources: read one, apply it, delete it
(deletionPolicy Delete). Nothing while off. */}}
{{- define "keyward.genericTargetRules" -}}
{{- if .Values.genericTargets.enabled }}
{{- range splitList "," (include "keyward.genericTargetResources" .) }}
{{- if . }}
{{- $parts := splitn "." 2 . }}
- apiGroups: [{{ $parts._1 | default "" | quote }}]
  resources: [{{ $parts._0 | quote }}]
  verbs: ["get", "create", "update", "patch", "delete"]
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
