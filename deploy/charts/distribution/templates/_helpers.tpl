{{/* Names. Prefixed with the chart name: named templates are global across an umbrella and its subcharts. */}}
{{- define "distribution.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "distribution.fullname" -}}
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

{{- define "distribution.selectorLabels" -}}
app.kubernetes.io/name: {{ include "distribution.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "distribution.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "distribution.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: distribution
app.kubernetes.io/part-of: meshplane
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "distribution.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "distribution.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "distribution.image" -}}
{{- $registry := .Values.image.registry | default .Values.global.imageRegistry -}}
{{- $repo := .Values.image.repository -}}
{{- if $registry }}{{ $repo = printf "%s/%s" $registry $repo }}{{ end -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Values.global.imageTag | default .Chart.AppVersion) }}
{{- end }}

{{/* Settings that an umbrella chart may set once under global. */}}
{{- define "distribution.logLevel" -}}{{ .Values.logLevel | default .Values.global.logLevel | default "info" }}{{- end }}
{{- define "distribution.logFormat" -}}{{ .Values.logFormat | default .Values.global.logFormat | default "json" }}{{- end }}
{{- define "distribution.trustDomain" -}}{{ .Values.trustDomain | default .Values.global.trustDomain | default "meshplane.local" }}{{- end }}
{{- define "distribution.install" -}}{{ .Values.install | default .Values.global.install | default "meshplane" }}{{- end }}

{{- define "distribution.tlsSecretName" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "distribution.fullname" .)) }}
{{- end }}

{{- define "distribution.certManagerIssuer" -}}
{{- $ref := .Values.tls.certManager.issuerRef | default dict -}}
{{- if not $ref.name }}{{ $ref = (.Values.global.tls.certManager.issuerRef | default dict) }}{{ end -}}
{{- if $ref.name }}{{ toJson $ref }}{{ else }}{}{{ end -}}
{{- end }}

{{- define "distribution.clientCA" -}}
{{- $ca := .Values.tls.clientCA | default dict -}}
{{- if not $ca.secretName }}{{ $ca = (.Values.global.tls.clientCA | default dict) }}{{ end -}}
{{- if $ca.secretName }}{{ toJson $ca }}{{ else }}{}{{ end -}}
{{- end }}

{{/* Redis: this chart's values, else global.redis, else the umbrella's bundled Redis. */}}
{{- define "distribution.redis" -}}
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

{{- define "distribution.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}
