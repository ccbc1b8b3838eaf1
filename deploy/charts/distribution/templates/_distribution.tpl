{{- define "distribution.usesRedis" -}}true{{- end }}

{{- define "distribution.rpcFrom" -}}
{{- toYaml .Values.networkPolicy.rpcFrom }}
{{- end }}

{{- define "distribution.specificArgs" -}}
{{- $redis := include "distribution.redis" . | fromJson }}
{{- if not $redis.addrs }}
{{- fail "distribution needs Redis: set redis.addrs, or install it with the meshplane chart (redis.enabled or global.redis.addrs)" }}
{{- end }}
- --deltas={{ .Values.deltas }}
{{- end }}

{{- define "distribution.specificMounts" -}}{{- end }}
{{- define "distribution.specificVolumes" -}}{{- end }}

{{- define "distribution.extraNotes" -}}{{- end }}
