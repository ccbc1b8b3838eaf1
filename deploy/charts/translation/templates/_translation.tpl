{{- define "translation.usesRedis" -}}true{{- end }}

{{- define "translation.rpcFrom" -}}
{{- $from := list (dict "podSelector" (dict "matchLabels" (dict "app.kubernetes.io/instance" .Release.Name "app.kubernetes.io/component" "ingest"))) -}}
{{- toYaml (concat $from .Values.networkPolicy.rpcFrom) }}
{{- end }}

{{- define "translation.specificArgs" -}}
{{- with .Values.workloadClusterDomain }}
- --cluster-domain={{ . }}
{{- end }}
{{- with .Values.debounce }}
- --debounce={{ . }}
{{- end }}
{{- if ne (toString .Values.encodingCacheMiB) "" }}
- --encoding-cache-mib={{ .Values.encodingCacheMiB }}
{{- end }}
{{- if .Values.expectedClusters.enabled }}
- --clusters-namespace={{ .Release.Namespace }}
{{- with .Values.expectedClusters.refresh }}
- --expected-clusters-refresh={{ . }}
{{- end }}
{{- if .Values.expectedClusters.managementCluster }}
- --expect-management-cluster
{{- end }}
{{- end }}
{{- if .Values.lastKnownGood.records }}
- --records-namespace={{ .Release.Namespace }}
{{- end }}
{{- end }}

{{- define "translation.specificMounts" -}}{{- end }}
{{- define "translation.specificVolumes" -}}{{- end }}

{{- define "translation.extraNotes" -}}{{- end }}
