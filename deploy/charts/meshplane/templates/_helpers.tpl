{{- define "meshplane.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: meshplane
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Service name of a subchart ("registration", ...), as its own fullname template computes it. */}}
{{- define "meshplane.serviceName" -}}
{{- $svc := index . 0 -}}{{- $ctx := index . 1 -}}
{{- $v := index $ctx.Values $svc | default dict -}}
{{- if $v.fullnameOverride -}}
{{- $v.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := $v.nameOverride | default $svc -}}
{{- if contains $name $ctx.Release.Name -}}
{{- $ctx.Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" $ctx.Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{- define "meshplane.servicePort" -}}
{{- $svc := index . 0 -}}{{- $ctx := index . 1 -}}
{{- $v := index $ctx.Values $svc | default dict -}}
{{- $defaults := dict "registration" 9901 "ingest" 9902 "distribution" 9904 "translation" 9903 -}}
{{- (($v.service | default dict).port) | default (($v.ports | default dict).rpc) | default (index $defaults $svc) -}}
{{- end }}

{{/* The services agents call, with the Connect path prefix of their procedures. */}}
{{- define "meshplane.relayRoutes" -}}
- {service: registration, prefix: /meshplane.registration.v1.}
- {service: ingest, prefix: /meshplane.ingest.v1.}
- {service: distribution, prefix: /meshplane.distribution.v1.}
{{- end }}

{{- define "meshplane.validate" -}}
{{- if and .Values.redis.enabled .Values.global.redis.addrs }}
{{- fail "meshplane: choose one Redis: redis.enabled (bundled, for evaluation) or global.redis.addrs (external), not both" }}
{{- end }}
{{- if and (not .Values.redis.enabled) (not .Values.global.redis.addrs) }}
{{- fail "meshplane: distribution needs Redis: set global.redis.addrs (and global.redis.masterName for Sentinel), or redis.enabled=true for the bundled one" }}
{{- end }}
{{- if not (has .Values.frontDoor.type (list "none" "httproute" "istio")) }}
{{- fail (printf "meshplane: frontDoor.type must be none, httproute or istio, not %q" .Values.frontDoor.type) }}
{{- end }}
{{- if and (eq .Values.frontDoor.type "httproute") (not .Values.frontDoor.httproute.parentRefs) }}
{{- fail "meshplane: frontDoor.type=httproute needs frontDoor.httproute.parentRefs (the Gateway to attach to)" }}
{{- end }}
{{- end }}
