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

{{/* The --redis URL: the password comes from the environment ($(REDIS_PASSWORD), from a Secret). */}}
{{- define "ivmstream.redisUrl" -}}
{{- if .Values.redis.existingSecret -}}
redis://:$(REDIS_PASSWORD)@{{ .Values.redis.host }}:{{ .Values.redis.port }}/{{ .Values.redis.db }}
{{- else -}}
redis://{{ .Values.redis.host }}:{{ .Values.redis.port }}/{{ .Values.redis.db }}
{{- end -}}
{{- end -}}

{{- define "ivmstream.redisEnv" -}}
{{- if .Values.redis.existingSecret }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.existingSecret }}
      key: {{ .Values.redis.passwordKey }}
{{- end }}
{{- end -}}

{{/*
The config file a container reads: the ConfigMap's, or with Kafka SASL the one an init container writes
into a memory-backed emptyDir after adding the credentials from the Secret's files.
*/}}
{{- define "ivmstream.configPath" -}}
{{- if .Values.kafka.sasl.enabled -}}/run/ivmstream/config.yaml{{- else -}}/etc/ivmstream/config.yaml{{- end -}}
{{- end -}}

{{/* Init container and volumes for SASL: call with (dict "root" $ "service" $name). */}}
{{- define "ivmstream.saslInit" -}}
{{- if .root.Values.kafka.sasl.enabled }}
initContainers:
  - name: kafka-credentials
    image: {{ include "ivmstream.image" .root }}
    imagePullPolicy: {{ .root.Values.image.pullPolicy }}
    command: ["python", "-c"]
    args:
      - |
        import pathlib, yaml
        config = yaml.safe_load(pathlib.Path("/etc/ivmstream/config.yaml").read_text()) or {}
        secret = pathlib.Path("/run/secrets/kafka")
        sasl = {
            "security.protocol": {{ .root.Values.kafka.sasl.securityProtocol | quote }},
            "sasl.mechanisms": {{ .root.Values.kafka.sasl.mechanism | quote }},
            "sasl.username": (secret / "username").read_text().strip(),
            "sasl.password": (secret / "password").read_text().strip(),
        }
        kafka = config.setdefault("kafka", {})
        for role in ("consumer", "producer"):
            kafka.setdefault(role, {}).update(sasl)
        pathlib.Path("/run/ivmstream/config.yaml").write_text(yaml.safe_dump(config))
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {cpu: 100m, memory: 64Mi}
    securityContext: {{- toYaml .root.Values.securityContext | nindent 6 }}
    volumeMounts:
      - {name: config, mountPath: /etc/ivmstream, readOnly: true}
      - {name: kafka-credentials, mountPath: /run/secrets/kafka, readOnly: true}
      - {name: rendered-config, mountPath: /run/ivmstream}
{{- end }}
{{- end -}}

{{- define "ivmstream.saslVolumes" -}}
{{- if .Values.kafka.sasl.enabled }}
- name: kafka-credentials
  secret:
    secretName: {{ required "kafka.sasl.existingSecret: the Secret with the SASL username and password" .Values.kafka.sasl.existingSecret }}
- name: rendered-config
  emptyDir: {medium: Memory, sizeLimit: 1Mi}
{{- end }}
{{- end -}}

{{- define "ivmstream.saslMounts" -}}
{{- if .Values.kafka.sasl.enabled }}
- {name: rendered-config, mountPath: /run/ivmstream, readOnly: true}
{{- end }}
{{- end -}}
