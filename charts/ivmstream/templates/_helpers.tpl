{{/* Names and labels. */}}
{{- define "ivmstream.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ivmstream.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains (include "ivmstream.name" .) .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "ivmstream.name" .) | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ivmstream.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ include "ivmstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels that select one service's workers: call with (dict "root" $ "service" $name). */}}
{{- define "ivmstream.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ivmstream.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .service }}
{{- end -}}

{{- define "ivmstream.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ivmstream.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ivmstream.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}
{{- end -}}

{{/*
The enabled services as YAML: every services/<name>.yaml of the chart (generated from the services'
declarations), with workerDefaults under it and the release's services.<name> values over it. A name in
values that has no file fails here (values.schema.json already refuses it at install time).
*/}}
{{- define "ivmstream.services" -}}
{{- $out := dict -}}
{{- range $path, $_ := .Files.Glob "services/*.yaml" -}}
{{- $name := base $path | trimSuffix ".yaml" -}}
{{- $declared := $.Files.Get $path | fromYaml -}}
{{- $override := get $.Values.services $name | default dict -}}
{{- $merged := mergeOverwrite (dict "enabled" true "reconcile" true) (deepCopy $.Values.workerDefaults) $declared (deepCopy $override) -}}
{{- if $merged.enabled -}}
{{- $_ := set $out $name $merged -}}
{{- end -}}
{{- end -}}
{{- range $name, $_ := .Values.services -}}
{{- if not ($.Files.Get (printf "services/%s.yaml" $name)) -}}
{{- fail (printf "services.%s: no such service in this chart" $name) -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The --redis URL: no credentials in it (they come from files, below). */}}
{{- define "ivmstream.redisUrl" -}}
redis://{{ .Values.redis.host }}:{{ .Values.redis.port }}/{{ .Values.redis.db }}
{{- end -}}

{{/* The --postgres DSN: no password in it (it comes from a file, below). */}}
{{- define "ivmstream.postgresDsn" -}}
postgresql://{{ .Values.postgres.user }}@{{ .Values.postgres.host }}:{{ .Values.postgres.port }}/{{ .Values.postgres.database }}?sslmode={{ .Values.postgres.sslmode }}
{{- end -}}

{{/*
Credentials reach the program as files from the Secrets (mounted read-only), named by the environment
variables the program reads (IVMSTREAM_REDIS_PASSWORD_FILE, IVMSTREAM_KAFKA_SASL_*_FILE, ...): never in
a manifest, a ConfigMap, an argument or an environment value.
*/}}
{{- define "ivmstream.credentialEnv" -}}
{{- if .Values.redis.existingSecret }}
- name: IVMSTREAM_REDIS_PASSWORD_FILE
  value: /run/secrets/redis/{{ .Values.redis.passwordKey }}
{{- end }}
{{- if and .Values.postgres.enabled .Values.postgres.existingSecret }}
- name: IVMSTREAM_POSTGRES_PASSWORD_FILE
  value: /run/secrets/postgres/{{ .Values.postgres.passwordKey }}
{{- end }}
{{- if .Values.kafka.sasl.enabled }}
- name: IVMSTREAM_KAFKA_SECURITY_PROTOCOL
  value: {{ .Values.kafka.sasl.securityProtocol | quote }}
- name: IVMSTREAM_KAFKA_SASL_MECHANISM
  value: {{ .Values.kafka.sasl.mechanism | quote }}
- name: IVMSTREAM_KAFKA_SASL_USERNAME_FILE
  value: /run/secrets/kafka/username
- name: IVMSTREAM_KAFKA_SASL_PASSWORD_FILE
  value: /run/secrets/kafka/password
{{- end }}
{{- if .Values.kafka.tls.caSecret }}
- name: IVMSTREAM_KAFKA_SSL_CA_LOCATION
  value: /run/secrets/kafka-ca/{{ .Values.kafka.tls.caKey }}
{{- end }}
{{- end -}}

{{- define "ivmstream.credentialVolumes" -}}
{{- if .Values.redis.existingSecret }}
- name: redis-credentials
  secret:
    secretName: {{ .Values.redis.existingSecret }}
    items:
      - {key: {{ .Values.redis.passwordKey }}, path: {{ .Values.redis.passwordKey }}}
{{- end }}
{{- if and .Values.postgres.enabled .Values.postgres.existingSecret }}
- name: postgres-credentials
  secret:
    secretName: {{ .Values.postgres.existingSecret }}
    items:
      - {key: {{ .Values.postgres.passwordKey }}, path: {{ .Values.postgres.passwordKey }}}
{{- end }}
{{- if .Values.kafka.sasl.enabled }}
- name: kafka-credentials
  secret:
    secretName: {{ required "kafka.sasl.existingSecret: the Secret with the SASL username and password" .Values.kafka.sasl.existingSecret }}
    items:
      - {key: username, path: username}
      - {key: password, path: password}
{{- end }}
{{- if .Values.kafka.tls.caSecret }}
- name: kafka-ca
  secret:
    secretName: {{ .Values.kafka.tls.caSecret }}
    items:
      - {key: {{ .Values.kafka.tls.caKey }}, path: {{ .Values.kafka.tls.caKey }}}
{{- end }}
{{- end -}}

{{- define "ivmstream.credentialMounts" -}}
{{- if .Values.redis.existingSecret }}
- {name: redis-credentials, mountPath: /run/secrets/redis, readOnly: true}
{{- end }}
{{- if and .Values.postgres.enabled .Values.postgres.existingSecret }}
- {name: postgres-credentials, mountPath: /run/secrets/postgres, readOnly: true}
{{- end }}
{{- if .Values.kafka.sasl.enabled }}
- {name: kafka-credentials, mountPath: /run/secrets/kafka, readOnly: true}
{{- end }}
{{- if .Values.kafka.tls.caSecret }}
- {name: kafka-ca, mountPath: /run/secrets/kafka-ca, readOnly: true}
{{- end }}
{{- end -}}
