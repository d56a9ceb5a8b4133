{{/* External Secrets' chart's value paths (upstream-keys.yaml): the aliases Keyward's templates
read, and the check that refuses the others with a message naming Keyward's key. */}}

{{/* The value at a dotted path of `values`, as JSON `{"v": value}`; empty when the path is unset.
(dict "values" map "path" "a.b.c") */}}
{{- define "keyward.upstream.get" -}}
{{- $cur := .values -}}
{{- $found := true -}}
{{- range splitList "." .path -}}
{{- if and $found (kindIs "map" $cur) (hasKey $cur .) -}}
{{- $cur = index $cur . -}}
{{- else -}}
{{- $found = false -}}
{{- end -}}
{{- end -}}
{{- if $found -}}{{- dict "v" $cur | toJson -}}{{- end -}}
{{- end -}}

{{/* Copies every upstream key that is set and has an alias onto Keyward's key, in .Values itself:
every template that reads an aliased value includes this first (it renders nothing, and applying
it twice changes nothing, so the order Helm renders templates in does not matter). A map merges
over Keyward's map (upstream's `resources: {}` keeps Keyward's defaults); anything else replaces
it. */}}
{{- define "keyward.upstream.apply" -}}
{{- $root := . -}}
{{- range (fromYaml (.Files.Get "upstream-keys.yaml")).keys -}}
{{- $e := . -}}
{{- if eq $e.how "alias" -}}
{{- with include "keyward.upstream.get" (dict "values" $root.Values "path" $e.path) -}}
{{- $value := (fromJson .).v -}}
{{- $segs := splitList "." $e.keyward -}}
{{- $cur := $root.Values -}}
{{- range initial $segs -}}
{{- if not (kindIs "map" (index $cur .)) -}}{{- $_ := set $cur . dict -}}{{- end -}}
{{- $cur = index $cur . -}}
{{- end -}}
{{- $last := last $segs -}}
{{- if and (kindIs "map" $value) (kindIs "map" (index $cur $last)) -}}
{{- $_ := set $cur $last (mergeOverwrite (deepCopy (index $cur $last)) $value) -}}
{{- else -}}
{{- $_ := set $cur $last $value -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Fails the render on an upstream key Keyward does not take, unless it holds upstream's
default; and on a flag in upstream's top-level extraArgs (the reconciler's, here) that
keyward-reconciler does not have. */}}
{{- define "keyward.upstream.check" -}}
{{- $root := . -}}
{{- $table := fromYaml (.Files.Get "upstream-keys.yaml") -}}
{{- range $table.keys -}}
{{- $e := . -}}
{{- if eq $e.how "refused" -}}
{{- with include "keyward.upstream.get" (dict "values" $root.Values "path" $e.path) -}}
{{- if ne . (dict "v" $e.default | toJson) -}}
{{- $why := "" -}}
{{- with $e.note }}{{ $why = printf " (%s)" . }}{{ end -}}
{{- if $e.keyward -}}
{{- fail (printf "values: `%s` is External Secrets' key, which Keyward's chart takes only at upstream's default %s: set `%s` instead%s. `keyward migrate --values FILE` translates a values file" $e.path (dict "v" $e.default | toJson | trimPrefix "{\"v\":" | trimSuffix "}") $e.keyward $why) -}}
{{- else -}}
{{- fail (printf "values: `%s` is External Secrets' key and has no equivalent in Keyward%s; remove it (only upstream's default %s is accepted)" $e.path $why (dict "v" $e.default | toJson | trimPrefix "{\"v\":" | trimSuffix "}")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* The schema's shared log and podDisruptionBudget blocks let upstream's webhook keys through
for every component: the others are Keyward's components, where these keys mean nothing. */}}
{{- $components := dict "reconciler" $root.Values.reconciler "certs" $root.Values.certs -}}
{{- range $name, $p := $root.Values.providers }}{{ $_ := set $components (printf "providers.%s" $name) $p }}{{ end -}}
{{- range $name, $v := $components -}}
{{- range list "log.timeEncoding" "podDisruptionBudget.nameOverride" -}}
{{- if include "keyward.upstream.get" (dict "values" $v "path" .) -}}
{{- fail (printf "values: `%s.%s` is not a key of Keyward's chart (only of External Secrets' webhook and cert controller)" $name .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Under External Secrets' own blocks (upstream-keys.yaml's `blocks`, which the schema takes
as they come) every key must be a path of the table: a misspelt one fails here, naming the keys
that block has. */}}
{{- $paths := list -}}
{{- range $table.keys }}{{ $paths = append $paths .path }}{{ end -}}
{{- range $table.blocks -}}
{{- if kindIs "map" (index $root.Values .) -}}
{{- include "keyward.upstream.walk" (dict "values" (index $root.Values .) "prefix" . "paths" $paths) -}}
{{- end -}}
{{- end -}}
{{- range $flag, $_ := $root.Values.extraArgs | default dict -}}
{{- if not (has $flag $table.reconcilerFlags) -}}
{{- $hint := "" -}}
{{- with index ($table.flags | default dict) $flag }}{{ $hint = printf ": Keyward's is `%s`" . }}{{ end -}}
{{- fail (printf "values: extraArgs: `--%s` is not a flag of keyward-reconciler%s (upstream's top-level extraArgs go to the reconciler; `keyward migrate --values FILE` lists the flags Keyward does not know)" $flag $hint) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Fails on a key under `prefix` that is no value path of External Secrets' chart (nor above
one: a path covers everything under it). (dict "values" map "prefix" "a.b" "paths" list) */}}
{{- define "keyward.upstream.walk" -}}
{{- $w := . -}}
{{- range $key, $value := $w.values -}}
{{- $path := printf "%s.%s" $w.prefix $key -}}
{{- if not (has $path $w.paths) -}}
{{- $under := list -}}
{{- range $w.paths }}{{ if hasPrefix (printf "%s." $path) . }}{{ $under = append $under . }}{{ end }}{{ end -}}
{{- if and $under (kindIs "map" $value) -}}
{{- include "keyward.upstream.walk" (dict "values" $value "prefix" $path "paths" $w.paths) -}}
{{- else if not $under -}}
{{- $known := list -}}
{{- range $w.paths }}{{ if hasPrefix (printf "%s." $w.prefix) . }}{{ $known = append $known (index (splitList "." (trimPrefix (printf "%s." $w.prefix) .)) 0) }}{{ end }}{{ end -}}
{{- fail (printf "values: `%s` is no key of External Secrets' chart (2.9.0), whose `%s` block Keyward's chart takes: misspelt? `%s` has %s" $path $w.prefix $w.prefix (printf "`%s`" ($known | uniq | join "`, `"))) -}}
{{- else if not (kindIs "invalid" $value) -}}
{{- fail (printf "values: `%s` is a block of External Secrets' chart (with %s), not a value" $path (printf "`%s`" ($under | join "`, `"))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
