{{/* Names: the release's fullname prefixes every object (gpuledger when the release is "gpuledger"). */}}
{{- define "gpuledger.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gpuledger.labels" -}}
app.kubernetes.io/part-of: gpuledger
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpuledger.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "gpuledger.claim" -}}
{{ .Values.persistence.existingClaim | default (printf "%s-data" (include "gpuledger.fullname" .)) }}
{{- end -}}

{{/* The pod security context every gpuledger pod runs with (restricted Pod Security level). */}}
{{- define "gpuledger.podSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "gpuledger.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{/* The Prometheus Authorization header from its Secret, when one is named. */}}
{{- define "gpuledger.env" -}}
- {name: HOME, value: /tmp}
- {name: XDG_CACHE_HOME, value: /tmp/cache}
{{- if .Values.prometheus.authSecret.name }}
- name: GPULEDGER_PROMETHEUS_AUTH
  valueFrom:
    secretKeyRef: {name: {{ .Values.prometheus.authSecret.name | quote }}, key: {{ .Values.prometheus.authSecret.key | quote }}}
{{- end }}
{{- end -}}

{{- define "gpuledger.dataVolume" -}}
- name: data
{{- if .Values.persistence.enabled }}
  persistentVolumeClaim: {claimName: {{ include "gpuledger.claim" . }}}
{{- else }}
  emptyDir: {}
{{- end }}
{{- end -}}

{{/* The collect and report pods share the dashboard's node: the warehouse volume is ReadWriteOnce. */}}
{{- define "gpuledger.besideDashboard" -}}
affinity:
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchLabels: {app.kubernetes.io/name: {{ include "gpuledger.fullname" . }}-dashboard}
        topologyKey: kubernetes.io/hostname
{{- end -}}
