{{/* Names. Prefixed with the chart name: named templates are global across an umbrella and its subcharts. */}}
{{- define "console.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "console.fullname" -}}
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

{{- define "console.selectorLabels" -}}
app.kubernetes.io/name: {{ include "console.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "console.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "console.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: console
app.kubernetes.io/part-of: meshplane
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "console.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "console.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "console.image" -}}
{{- $registry := .Values.image.registry | default .Values.global.imageRegistry -}}
{{- $repo := .Values.image.repository -}}
{{- if $registry }}{{ $repo = printf "%s/%s" $registry $repo }}{{ end -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Values.global.imageTag | default .Chart.AppVersion) }}
{{- end }}

{{- define "console.logLevel" -}}{{ .Values.logLevel | default .Values.global.logLevel | default "info" }}{{- end }}
{{- define "console.logFormat" -}}{{ .Values.logFormat | default .Values.global.logFormat | default "json" }}{{- end }}
{{- define "console.trustDomain" -}}{{ .Values.trustDomain | default .Values.global.trustDomain | default "meshplane.local" }}{{- end }}

{{- define "console.tlsSecretName" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "console.fullname" .)) }}
{{- end }}

{{- define "console.certManagerIssuer" -}}
{{- $ref := .Values.tls.certManager.issuerRef | default dict -}}
{{- if not $ref.name }}{{ $ref = (.Values.global.tls.certManager.issuerRef | default dict) }}{{ end -}}
{{- if $ref.name }}{{ toJson $ref }}{{ else }}{}{{ end -}}
{{- end }}

{{/* The address of a management service: the value, else the umbrella release's Service. */}}
{{- define "console.addr" -}}
{{- $v := index .root.Values.management (printf "%sAddr" .svc) -}}
{{- if $v }}{{ $v }}{{ else }}{{ printf "%s-%s:%d" .root.Release.Name .svc (int .port) }}{{ end -}}
{{- end }}
