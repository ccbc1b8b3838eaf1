{{- define "registration.usesRedis" -}}true{{- end }}

{{- define "registration.rpcFrom" -}}
{{- toYaml .Values.networkPolicy.rpcFrom }}
{{- end }}

{{- define "registration.caSecretName" -}}
{{- .Values.kubernetes.caSecret.name | default (printf "%s-ca" (include "registration.fullname" .)) }}
{{- end }}

{{- define "registration.specificArgs" -}}
- --ca-dir=/var/run/meshplane/ca
{{- if and .Values.kubernetes.caSecret.enabled (not .Values.ca.secretName) }}
- --ca-secret={{ .Release.Namespace }}/{{ include "registration.caSecretName" . }}
{{- end }}
{{- if .Values.kubernetes.virtualMeshRoots }}
- --virtual-mesh-roots-namespace={{ .Release.Namespace }}
{{- end }}
{{- if .Values.kubernetes.mirror.enabled }}
- --mirror-namespace={{ .Release.Namespace }}
{{- with .Values.kubernetes.mirror.resync }}
- --mirror-resync={{ . }}
{{- end }}
{{- end }}
{{- with .Values.virtualMeshIntermediateTTL }}
- --virtual-mesh-intermediate-ttl={{ . }}
{{- end }}
{{- with .Values.certTTL }}
- --cert-ttl={{ . }}
{{- end }}
{{- with .Values.bootstrapTokenTTL }}
- --bootstrap-token-ttl={{ . }}
{{- end }}
{{- with .Values.revocationRefresh }}
- --revocation-refresh={{ . }}
{{- end }}
{{- with .Values.advertiseAddr }}
- --advertise-addr={{ . }}
{{- end }}
{{- if .Values.bootstrapTokens.secretName }}
- --bootstrap-tokens-file=/etc/meshplane/bootstrap-tokens/tokens
{{- end }}
{{- if .Values.relayIdentityToken.secretName }}
- --relay-identity-token-file=/etc/meshplane/relay-identity-token/token
{{- end }}
{{- end }}

{{- define "registration.specificMounts" -}}
- name: ca
  mountPath: /var/run/meshplane/ca
  {{- if .Values.ca.secretName }}
  readOnly: true
  {{- end }}
{{- if .Values.bootstrapTokens.secretName }}
- name: bootstrap-tokens
  mountPath: /etc/meshplane/bootstrap-tokens
  readOnly: true
{{- end }}
{{- if .Values.relayIdentityToken.secretName }}
- name: relay-identity-token
  mountPath: /etc/meshplane/relay-identity-token
  readOnly: true
{{- end }}
{{- end }}

{{- define "registration.specificVolumes" -}}
- name: ca
  {{- if .Values.ca.secretName }}
  secret:
    secretName: {{ .Values.ca.secretName }}
    defaultMode: 0440
    items:
      - key: root.crt
        path: root.crt
      - key: intermediate.crt
        path: intermediate.crt
      - key: intermediate.key
        path: intermediate.key
  {{- else }}
  # Development CA: created by the service at start, lost with the pod.
  emptyDir:
    sizeLimit: 1Mi
  {{- end }}
{{- if .Values.bootstrapTokens.secretName }}
- name: bootstrap-tokens
  secret:
    secretName: {{ .Values.bootstrapTokens.secretName }}
    defaultMode: 0440
    items:
      - key: {{ .Values.bootstrapTokens.key }}
        path: tokens
{{- end }}
{{- if .Values.relayIdentityToken.secretName }}
- name: relay-identity-token
  secret:
    secretName: {{ .Values.relayIdentityToken.secretName }}
    defaultMode: 0440
    items:
      - key: {{ .Values.relayIdentityToken.key }}
        path: token
{{- end }}
{{- end }}

{{- define "registration.extraNotes" -}}
{{- if not .Values.ca.secretName }}
{{- if .Values.kubernetes.caSecret.enabled }}

WARNING: no ca.secretName is set, so registration keeps a DEVELOPMENT CA in the
Secret {{ .Release.Namespace }}/{{ include "registration.caSecretName" . }}, made on first start and shared by the
replicas. The other services do not trust it unless their client CA holds its
root (root.crt in that Secret). For production, create that Secret yourself
with your own root.crt, intermediate.crt and intermediate.key (or root.crt and
root.key), or set ca.secretName.
{{- else }}

WARNING: no ca.secretName is set, so registration creates a DEVELOPMENT CA in
an emptyDir at start. Every pod has its own CA, and it is lost when the pod
goes away: cluster certificates stop verifying, and the other services do not
trust it unless their client CA holds its root. For anything but a trial,
create a Secret with root.crt, intermediate.crt and intermediate.key and set
ca.secretName.
{{- end }}
{{- end }}
{{- end }}
