{{/* Checks that fail the install with a message that says what to set. */}}
{{- define "agent.validate" -}}
{{- if not .Values.cluster }}
{{- fail "agent: the value 'cluster' is required: the name this cluster registers under (a DNS label), e.g. --set cluster=east. `meshctl cluster register` prints it." }}
{{- end }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" .Values.cluster) }}
{{- fail (printf "agent: cluster %q must be a DNS label (lower-case letters, digits and '-', at most 63)" .Values.cluster) }}
{{- end }}
{{- if not .Values.relayAddr }}
{{- if not (and .Values.registrationAddr .Values.ingestAddr .Values.distributionAddr) }}
{{- fail "agent: set relayAddr (the management plane's front door, host:port), or all of registrationAddr, ingestAddr and distributionAddr" }}
{{- end }}
{{- end }}
{{- if and (not .Values.caBundle) (not .Values.caBundleSecret.name) }}
{{- fail "agent: set caBundle (PEM) or caBundleSecret.name: the agent must verify the management plane's certificates" }}
{{- end }}
{{- if and .Values.caBundle .Values.caBundleSecret.name }}
{{- fail "agent: set caBundle or caBundleSecret.name, not both" }}
{{- end }}
{{- if and .Values.bootstrapToken .Values.bootstrapTokenSecret.name }}
{{- fail "agent: set bootstrapToken or bootstrapTokenSecret.name, not both" }}
{{- end }}
{{- end }}

{{- define "agent.inlineSecretName" -}}
{{- printf "%s-bootstrap" (include "agent.fullname" .) }}
{{- end }}
