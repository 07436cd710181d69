{{/* Names: the release's fullname prefixes every object (gpuledger when the release is "gpuledger");
nameOverride replaces the chart's name in it, fullnameOverride replaces it whole. */}}
{{- define "gpuledger.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpuledger.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "gpuledger.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The old snake_case keys of `plans` → their camelCase names (docs/decisions/0190): the
ConfigMap reads either (the old one wins), NOTES.txt names each old one used. */}}
{{- define "gpuledger.oldPlanKeys" -}}
{{- toJson (dict "expire_after_hours" "expireAfterHours" "state_timeout_s" "stateTimeoutSeconds" "nodes_in_parallel" "nodesInParallel") -}}
{{- end -}}

{{/* The ServiceAccounts: the dashboard's (plan writes) and the collector's (reads only), the
chart's own unless serviceAccount.create is false, then the named ones, made by the admin. */}}
{{- define "gpuledger.serviceAccount" -}}
{{- .Values.serviceAccount.name | default (include "gpuledger.fullname" .) -}}
{{- end -}}

{{- define "gpuledger.collectorServiceAccount" -}}
{{- .Values.serviceAccount.collectorName | default (printf "%s-collector" (include "gpuledger.serviceAccount" .)) -}}
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

{{/* The secret settings (docs/decisions/0189): each reaches the pods as an environment variable
from a Secret, the one the values name (`<setting>Secret.name`) or the chart's own
(<fullname>-secrets, made from the plain values), and the ConfigMap says only `${VARIABLE}`.
The one list of them, every entry [environment variable, settings path, Secret reference value,
plain value, key in the chart's own Secret]. */}}
{{- define "gpuledger.secretTable" -}}
{{- toJson (list
      (list "GPULEDGER_PROMETHEUS_AUTH" "prometheus.auth_header" .Values.prometheus.authSecret .Values.prometheus.authHeader "prometheus-auth")
      (list "GPULEDGER_REPORT_KEY" "reports.signing_key" .Values.report.signingKeySecret .Values.report.signingKey "report-signing-key")
      (list "GPULEDGER_BUDGET_WEBHOOK" "finance.budget_webhook" .Values.budgetAlerts.webhookSecret .Values.budgetAlerts.webhook "budget-webhook")) -}}
{{- end -}}

{{/* The secret settings that are set: a list of [environment variable, settings path, Secret name,
key, plain value for the chart's own Secret ("" when the values name a Secret)]. */}}
{{- define "gpuledger.secretSettings" -}}
{{- $own := printf "%s-secrets" (include "gpuledger.fullname" .) -}}
{{- $out := list -}}
{{- range (include "gpuledger.secretTable" . | fromJsonArray) -}}
{{- $ref := index . 2 -}}
{{- if $ref.name -}}
{{- $out = append $out (list (index . 0) (index . 1) $ref.name $ref.key "") -}}
{{- else if index . 3 -}}
{{- $out = append $out (list (index . 0) (index . 1) $own (index . 4) (index . 3)) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The environment of every gpuledger container: the secret settings, then extraEnv. */}}
{{- define "gpuledger.env" -}}
- {name: HOME, value: /tmp}
- {name: XDG_CACHE_HOME, value: /tmp/cache}
{{- range (include "gpuledger.secretSettings" . | fromJsonArray) }}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef: {name: {{ index . 2 | quote }}, key: {{ index . 3 | quote }}}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Pod metadata every gpuledger pod carries beside its own labels: podLabels, podAnnotations. */}}
{{- define "gpuledger.podLabels" -}}
{{- with .Values.podLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "gpuledger.podAnnotations" -}}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Scheduling of a CronJob's pod: nodeSelector and tolerations from the values; affinity from
the values with the pod affinity to the dashboard's node forced (the warehouse volume is
ReadWriteOnce), unless persistence is off. */}}
{{- define "gpuledger.jobScheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{ toYaml . | nindent 2 }}
{{- end }}
{{- $affinity := deepCopy (.Values.affinity | default dict) -}}
{{- if .Values.persistence.enabled -}}
{{- $_ := set $affinity "podAffinity" (include "gpuledger.besideDashboard" . | fromYaml) -}}
{{- end -}}
{{- with $affinity }}
affinity: {{ toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* extraVolumeMounts / extraVolumes, for every gpuledger container and pod. */}}
{{- define "gpuledger.extraVolumeMounts" -}}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "gpuledger.extraVolumes" -}}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
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

{{/* The pod affinity that puts the collect, report, compact and publish pods on the dashboard's
node: the warehouse volume is ReadWriteOnce. */}}
{{- define "gpuledger.besideDashboard" -}}
requiredDuringSchedulingIgnoredDuringExecution:
  - labelSelector:
      matchLabels: {app.kubernetes.io/name: {{ include "gpuledger.fullname" . }}-dashboard}
    topologyKey: kubernetes.io/hostname
{{- end -}}

{{/* A CronJob that works on the warehouse only (report, compact, publish; collect also reads the
cluster and is its own template): no Kubernetes API token is mounted. Called with
`dict "root" $ "job" NAME "values" .Values.NAME "args" "the gpuledger command's arguments"`
and optionally "serviceAccount" (named only for its cloud-identity annotations: publish's S3),
"startingDeadlineSeconds" and "activeDeadlineSeconds" (default 21600 and 3600: a frequent job
such as publish-capacity sets shorter ones, so a missed run is skipped rather than caught up). */}}
{{- define "gpuledger.warehouseCronJob" -}}
{{- $root := .root -}}
{{- $name := include "gpuledger.fullname" $root -}}
apiVersion: batch/v1
kind: CronJob
metadata:
  name: {{ $name }}-{{ .job }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "gpuledger.labels" $root | nindent 4 }}
    app.kubernetes.io/name: {{ $name }}-{{ .job }}
spec:
  schedule: {{ .values.schedule | quote }}
  timeZone: Etc/UTC
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: {{ .startingDeadlineSeconds | default 21600 }}
  successfulJobsHistoryLimit: 3
  failedJobsHistoryLimit: 3
  jobTemplate:
    spec:
      backoffLimit: 4
      activeDeadlineSeconds: {{ .activeDeadlineSeconds | default 3600 }}
      template:
        metadata:
          labels:
            {{- include "gpuledger.labels" $root | nindent 12 }}
            app.kubernetes.io/name: {{ $name }}-{{ .job }}
            {{- include "gpuledger.podLabels" $root | nindent 12 }}
          {{- with $root.Values.podAnnotations }}
          annotations: {{ toYaml . | nindent 12 }}
          {{- end }}
        spec:
          {{- with .serviceAccount }}
          serviceAccountName: {{ . }}
          {{- end }}
          automountServiceAccountToken: false
          restartPolicy: OnFailure
          securityContext:
            {{- include "gpuledger.podSecurity" $root | nindent 12 }}
          {{- include "gpuledger.jobScheduling" $root | nindent 10 }}
          containers:
            - name: {{ .job }}
              image: {{ include "gpuledger.image" $root }}
              imagePullPolicy: {{ $root.Values.image.pullPolicy }}
              args: [--config, /etc/gpuledger/config/gpuledger.yaml, --warehouse, /data/gpuledger.duckdb,
                     {{ .args }}]
              env:
                {{- include "gpuledger.env" $root | nindent 16 }}
              resources: {{ toYaml .values.resources | nindent 16 }}
              securityContext:
                {{- include "gpuledger.containerSecurity" $root | nindent 16 }}
              volumeMounts:
                - {name: config, mountPath: /etc/gpuledger/config, readOnly: true}
                - {name: data, mountPath: /data}
                - {name: tmp, mountPath: /tmp}
                {{- include "gpuledger.extraVolumeMounts" $root | nindent 16 }}
          volumes:
            - name: config
              configMap: {name: {{ $name }}-config}
            {{- include "gpuledger.dataVolume" $root | nindent 12 }}
            - name: tmp
              emptyDir: {}
            {{- include "gpuledger.extraVolumes" $root | nindent 12 }}
{{- end -}}
