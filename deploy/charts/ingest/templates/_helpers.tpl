{{/* Names. Prefixed with the chart name: named templates are global across an umbrella and its subcharts. */}}
{{- define "ingest.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ingest.fullname" -}}
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

{{- define "ingest.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ingest.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ingest.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ingest.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: ingest
app.kubernetes.io/part-of: meshplane
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "ingest.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ingest.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ingest.image" -}}
{{- $registry := .Values.image.registry | default .Values.global.imageRegistry -}}
{{- $repo := .Values.image.repository -}}
{{- if $registry }}{{ $repo = printf "%s/%s" $registry $repo }}{{ end -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Values.global.imageTag | default .Chart.AppVersion) }}
{{- end }}

{{/* Settings that an umbrella chart may set once under global. */}}
{{- define "ingest.logLevel" -}}{{ .Values.logLevel | default .Values.global.logLevel | default "info" }}{{- end }}
{{- define "ingest.logFormat" -}}{{ .Values.logFormat | default .Values.global.logFormat | default "json" }}{{- end }}
{{- define "ingest.trustDomain" -}}{{ .Values.trustDomain | default .Values.global.trustDomain | default "meshplane.local" }}{{- end }}
{{- define "ingest.install" -}}{{ .Values.install | default .Values.global.install | default "meshplane" }}{{- end }}

{{- define "ingest.tlsSecretName" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "ingest.fullname" .)) }}
{{- end }}

{{- define "ingest.certManagerIssuer" -}}
{{- $ref := .Values.tls.certManager.issuerRef | default dict -}}
{{- if not $ref.name }}{{ $ref = (.Values.global.tls.certManager.issuerRef | default dict) }}{{ end -}}
{{- if $ref.name }}{{ toJson $ref }}{{ else }}{}{{ end -}}
{{- end }}

{{- define "ingest.clientCA" -}}
{{- $ca := .Values.tls.clientCA | default dict -}}
{{- if not $ca.secretName }}{{ $ca = (.Values.global.tls.clientCA | default dict) }}{{ end -}}
{{- if $ca.secretName }}{{ toJson $ca }}{{ else }}{}{{ end -}}
{{- end }}

{{/* Redis: this chart's values, else global.redis, else the umbrella's bundled Redis. */}}
{{- define "ingest.redis" -}}
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

{{- define "ingest.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}
