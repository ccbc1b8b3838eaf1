{{/* Names. Prefixed with the chart name: named templates are global across an umbrella and its subcharts. */}}
{{- define "translation.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "translation.fullname" -}}
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

{{- define "translation.selectorLabels" -}}
app.kubernetes.io/name: {{ include "translation.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "translation.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "translation.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: translation
app.kubernetes.io/part-of: meshplane
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "translation.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "translation.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "translation.image" -}}
{{- $registry := .Values.image.registry | default .Values.global.imageRegistry -}}
{{- $repo := .Values.image.repository -}}
{{- if $registry }}{{ $repo = printf "%s/%s" $registry $repo }}{{ end -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Values.global.imageTag | default .Chart.AppVersion) }}
{{- end }}

{{/* Settings that an umbrella chart may set once under global. */}}
{{- define "translation.logLevel" -}}{{ .Values.logLevel | default .Values.global.logLevel | default "info" }}{{- end }}
{{- define "translation.logFormat" -}}{{ .Values.logFormat | default .Values.global.logFormat | default "json" }}{{- end }}
{{- define "translation.trustDomain" -}}{{ .Values.trustDomain | default .Values.global.trustDomain | default "meshplane.local" }}{{- end }}
{{- define "translation.install" -}}{{ .Values.install | default .Values.global.install | default "meshplane" }}{{- end }}

{{- define "translation.tlsSecretName" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "translation.fullname" .)) }}
{{- end }}

{{- define "translation.certManagerIssuer" -}}
{{- $ref := .Values.tls.certManager.issuerRef | default dict -}}
{{- if not $ref.name }}{{ $ref = (.Values.global.tls.certManager.issuerRef | default dict) }}{{ end -}}
{{- if $ref.name }}{{ toJson $ref }}{{ else }}{}{{ end -}}
{{- end }}

{{- define "translation.clientCA" -}}
{{- $ca := .Values.tls.clientCA | default dict -}}
{{- if not $ca.secretName }}{{ $ca = (.Values.global.tls.clientCA | default dict) }}{{ end -}}
{{- if $ca.secretName }}{{ toJson $ca }}{{ else }}{}{{ end -}}
{{- end }}

{{/* Redis: this chart's values, else global.redis, else the umbrella's bundled Redis. */}}
{{- define "translation.redis" -}}
{{- $r := dict "addrs" (list) "masterName" "" "db" 0 "passwordSecret" (dict) -}}
{{- $g := .Values.global.redis | default dict -}}
{{- if .Values.redis.addrs -}}
{{- $r = .Values.redis -}}
{{- else if $g.addrs -}}
{{- $r = $g -}}
{{- else if $g.bundled -}}
{{- $_ := set $r "addrs" (list (printf "%s-redis:6379" .Release.Name)) -}}
{{- $_ := set $r "passwordSecret" ($g.passwordSecret | default dict) -}}
{{- end -}}
{{- toJson $r -}}
{{- end }}

{{- define "translation.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}
