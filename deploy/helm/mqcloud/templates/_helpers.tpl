{{- define "mqcloud.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "mqcloud.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "mqcloud.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "mqcloud.secretName" -}}
{{ .Values.existingSecret | default (printf "%s-secrets" (include "mqcloud.fullname" .)) }}
{{- end -}}

{{/* The control plane's environment: the ConfigMap, then the Secret. */}}
{{- define "mqcloud.controlPlaneEnv" -}}
envFrom:
  - configMapRef:
      name: {{ include "mqcloud.fullname" . }}-config
  - secretRef:
      name: {{ include "mqcloud.secretName" . }}
{{- end -}}

{{- define "mqcloud.securityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
{{- end -}}

{{/* Pods that use the database start only once the schema is migrated (the migrate Job). */}}
{{- define "mqcloud.waitForMigrations" -}}
initContainers:
  - name: wait-for-migrations
    image: {{ include "mqcloud.image" . }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args: ["sh", "-c", "until python manage.py migrate --check >/dev/null; do sleep 5; done"]
    {{- include "mqcloud.controlPlaneEnv" . | nindent 4 }}
    volumeMounts:
      - {name: data, mountPath: /var/lib/mqcloud}
{{- end -}}

{{- define "mqcloud.healthGet" -}}
path: /api/v1/health
port: http
httpHeaders:
  - {name: Host, value: localhost}
  - {name: X-Forwarded-Proto, value: https}
{{- end -}}

{{/* Every controller's stable address, comma-separated (MQ_BROKER_CONTROLLER). */}}
{{- define "mqcloud.controllerAddresses" -}}
{{- $name := printf "%s-controller" (include "mqcloud.fullname" .) -}}
{{- $out := list -}}
{{- range $i := until (int .Values.controller.replicas) -}}
{{- $out = append $out (printf "%s-%d.%s.%s.svc:%d" $name $i $name $.Release.Namespace (int $.Values.controller.port)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
