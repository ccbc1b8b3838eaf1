{{- define "ingest.usesRedis" -}}true{{- end }}

{{- define "ingest.rpcFrom" -}}
{{- toYaml .Values.networkPolicy.rpcFrom }}
{{- end }}

{{- define "ingest.specificArgs" -}}
- --translation-addr={{ .Values.translation.addr | default (printf "%s-translation:9903" .Release.Name) }}
{{- if or .Values.tls.plaintext .Values.translation.plaintext }}
- --translation-plaintext
{{- else }}
- --translation-ca-file=/etc/meshplane/tls/ca.crt
- --translation-cert-file=/etc/meshplane/tls/tls.crt
- --translation-key-file=/etc/meshplane/tls/tls.key
{{- end }}
{{- with .Values.translation.serverName }}
- --translation-server-name={{ . }}
{{- end }}
{{- with .Values.translation.timeout }}
- --translation-timeout={{ . }}
{{- end }}
{{- with .Values.flushInterval }}
- --flush-interval={{ . }}
{{- end }}
{{- with .Values.accessLogs.bufferSize }}
- --accesslog-buffer={{ . }}
{{- end }}
{{- with .Values.accessLogs.watcherQueue }}
- --accesslog-watcher-queue={{ . }}
{{- end }}
{{- with .Values.accessLogs.maxBatch }}
- --accesslog-max-batch={{ . }}
{{- end }}
{{- with .Values.accessLogs.maxEntryBytes }}
- --accesslog-max-entry-bytes={{ . }}
{{- end }}
{{- with .Values.inputLimits }}
- --max-input-destinations={{ .destinations | int }}
- --max-input-workloads={{ .workloads | int }}
- --max-input-meshes={{ .meshes | int }}
- --max-input-policies={{ .policies | int }}
- --max-input-istio-objects={{ .istioObjects | int }}
{{- end }}
{{- if .Values.managementCluster.watch }}
- --watch-management-cluster=true
{{- with .Values.managementCluster.name }}
- --management-cluster-name={{ . }}
{{- end }}
{{- with .Values.managementCluster.debounce }}
- --management-debounce={{ . }}
{{- end }}
{{- else }}
- --watch-management-cluster=false
{{- end }}
{{- end }}

{{- define "ingest.specificMounts" -}}{{- end }}
{{- define "ingest.specificVolumes" -}}{{- end }}

{{- define "ingest.extraNotes" -}}{{- end }}
