{{- define "registration.usesRedis" -}}true{{- end }}

{{- define "registration.rpcFrom" -}}
{{- toYaml .Values.networkPolicy.rpcFrom }}
{{- end }}

{{- define "registration.specificArgs" -}}
- --ca-dir=/var/run/meshplane/ca
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

WARNING: no ca.secretName is set, so registration creates a DEVELOPMENT CA in
an emptyDir at start. Every pod has its own CA, and it is lost when the pod
goes away: cluster certificates stop verifying, and the other services do not
trust it unless their client CA holds its root. For anything but a trial,
create a Secret with root.crt, intermediate.crt and intermediate.key and set
ca.secretName.
{{- end }}
{{- end }}
