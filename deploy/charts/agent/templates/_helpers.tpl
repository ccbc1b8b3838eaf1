{{/* Names. Prefixed with the chart name: named templates are global across an umbrella and its subcharts. */}}
{{- define "agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agent.fullname" -}}
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

{{- define "agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
app.kubernetes.io/part-of: meshplane
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "agent.image" -}}
{{- $registry := .Values.image.registry | default .Values.global.imageRegistry -}}
{{- $repo := .Values.image.repository -}}
{{- if $registry }}{{ $repo = printf "%s/%s" $registry $repo }}{{ end -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Values.global.imageTag | default .Chart.AppVersion) }}
{{- end }}

{{/* Settings that an umbrella chart may set once under global. */}}
{{- define "agent.logLevel" -}}{{ .Values.logLevel | default .Values.global.logLevel | default "info" }}{{- end }}
{{- define "agent.logFormat" -}}{{ .Values.logFormat | default .Values.global.logFormat | default "json" }}{{- end }}
{{- define "agent.trustDomain" -}}{{ .Values.trustDomain | default .Values.global.trustDomain | default "meshplane.local" }}{{- end }}
{{- define "agent.install" -}}{{ .Values.install | default .Values.global.install | default "meshplane" }}{{- end }}

{{- define "agent.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}


{{/* Non-empty when the replicas run Raft: more than one, or raft.enabled. */}}
{{- define "agent.raftEnabled" -}}
{{- if or .Values.raft.enabled (gt (int .Values.replicas) 1) }}true{{ end }}
{{- end }}
