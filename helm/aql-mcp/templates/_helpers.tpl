{{/* Names, labels and the values the templates compute. */}}

{{- define "aql-mcp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "aql-mcp.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "aql-mcp.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "aql-mcp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aql-mcp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The `helm test` pod's labels: not the selector labels, so the Service never selects it. */}}
{{- define "aql-mcp.testSelectorLabels" -}}
app.kubernetes.io/name: {{ include "aql-mcp.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The TCP port a URL reaches: the one it names, else its scheme's (443 for https, 80 for http), as
an HTTP client connects; for the NetworkPolicy egress rule of an endpoint in the settings.
*/}}
{{- define "aql-mcp.urlPort" -}}
{{- $url := urlParse . }}
{{- if regexMatch ":[0-9]+$" $url.host }}{{ regexFind "[0-9]+$" $url.host }}
{{- else if eq (lower $url.scheme) "https" }}443
{{- else }}80
{{- end }}
{{- end }}

{{- define "aql-mcp.labels" -}}
helm.sh/chart: {{ include "aql-mcp.chart" . }}
{{ include "aql-mcp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: server
app.kubernetes.io/part-of: aql-mcp
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "aql-mcp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "aql-mcp.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "aql-mcp.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The named port /metrics is served on: its own when config.metrics.port is set. */}}
{{- define "aql-mcp.metricsPortName" -}}
{{- if .Values.config.metrics.port }}metrics{{ else }}http{{ end }}
{{- end }}

{{/* The named port the kubelet probes: its own when config.probes.port is set, out of reach of a
connection flood on the service port (docs/connections.md). */}}
{{- define "aql-mcp.probesPortName" -}}
{{- if .Values.config.probes.port }}probes{{ else }}http{{ end }}
{{- end }}

{{/* Where the pod keeps things: the image's state directory, the config file, the secrets. */}}
{{- define "aql-mcp.statePath" -}}/var/lib/aql-mcp{{- end }}
{{- define "aql-mcp.configDir" -}}/etc/aql-mcp{{- end }}
{{- define "aql-mcp.opaqueTokensFile" -}}/etc/aql-mcp/secrets/opaque-tokens.yaml{{- end }}
{{- define "aql-mcp.postgresCaFile" -}}/etc/aql-mcp/postgres/ca.crt{{- end }}

{{/*
The Secret holding mcp.request_state_key: the one secrets.requestStateKey.name names, or with the
modern era on and no name, the one this chart creates (request-state-secret.yaml). Empty when the
pod gets no key (the modern era off and no Secret named).
*/}}
{{- define "aql-mcp.requestStateSecretName" -}}
{{- if .Values.secrets.requestStateKey.name }}
{{- .Values.secrets.requestStateKey.name }}
{{- else if .Values.config.mcp.modern_era }}
{{- include "aql-mcp.fullname" . }}-request-state
{{- end }}
{{- end }}
{{- define "aql-mcp.createsRequestStateSecret" -}}
{{- if and .Values.config.mcp.modern_era (not .Values.secrets.requestStateKey.name) }}true{{ end }}
{{- end }}

{{/*
The one place that refuses values the service cannot honour. The embedded SQLite store has one
writer on a ReadWriteOnce disk: a second replica would either not schedule (the disk is attached
elsewhere) or corrupt the store, so replicas and the autoscaler wait for the PostgreSQL engine.
*/}}
{{- define "aql-mcp.validate" -}}
{{- if and (eq .Values.store.engine "postgres") (not .Values.store.postgres.secretName) }}
{{- fail "store.engine=postgres needs store.postgres.secretName: the Secret whose key store.postgres.urlKey holds the postgresql:// URL (the URL never goes into values or the ConfigMap)" }}
{{- end }}
{{- if eq .Values.store.engine "sqlite" }}
{{- if gt (int .Values.replicaCount) 1 }}
{{- fail (printf "replicaCount=%d is refused with store.engine=sqlite: the embedded SQLite store has one writer on a ReadWriteOnce disk, so it runs exactly one replica (several replicas need the PostgreSQL engine)" (int .Values.replicaCount)) }}
{{- end }}
{{- if .Values.autoscaling.enabled }}
{{- fail "autoscaling.enabled=true is refused with store.engine=sqlite: the embedded SQLite store has one writer on a ReadWriteOnce disk, so it runs exactly one replica (the HorizontalPodAutoscaler needs the PostgreSQL engine)" }}
{{- end }}
{{- end }}
{{- $metrics := .Values.config.metrics }}
{{- if and .Values.metrics.serviceMonitor.enabled (not $metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs config.metrics.enabled: the ServiceMonitor would scrape a /metrics the service does not serve" }}
{{- end }}
{{- if and .Values.prometheusRule.enabled (not $metrics.enabled) }}
{{- fail "prometheusRule.enabled needs config.metrics.enabled: the alerts read the /metrics the service would not serve" }}
{{- end }}
{{- if and $metrics.port (eq (int $metrics.port) (int .Values.containerPort)) }}
{{- fail "config.metrics.port must differ from containerPort (leave it null to serve /metrics on the service port)" }}
{{- end }}
{{- $probes := .Values.config.probes.port }}
{{- if and $probes (or (eq (int $probes) (int .Values.containerPort)) (eq (int $probes) (int ($metrics.port | default 0)))) }}
{{- fail "config.probes.port must differ from containerPort and config.metrics.port (leave it null to probe the service port)" }}
{{- end }}
{{- /* What the service would refuse at startup, refused at install time instead (settings.check_safety). */}}
{{- $auth := .Values.config.auth }}
{{- if and $auth.jwks_url (not (and $auth.issuer $auth.audience)) }}
{{- fail "config.auth.jwks_url needs config.auth.issuer and config.auth.audience: the service checks every token for who issued it and for whom" }}
{{- end }}
{{- range $name := list "jwks_url" "introspection_url" }}
{{- $url := index $auth $name | default "" }}
{{- if and (hasPrefix "http://" (lower $url)) (not $auth.allow_insecure_http) }}
{{- fail (printf "config.auth.%s is plain http: the IdP must be reached over https (config.auth.allow_insecure_http is for test IdPs only)" $name) }}
{{- end }}
{{- end }}
{{- range $index, $entry := $auth.issuers | default list }}
{{- if and (hasPrefix "http://" (lower ($entry.jwks_url | default ""))) (not $auth.allow_insecure_http) }}
{{- fail (printf "config.auth.issuers[%d].jwks_url is plain http: the IdP must be reached over https (config.auth.allow_insecure_http is for test IdPs only)" $index) }}
{{- end }}
{{- end }}
{{- $current := .Values.secrets.requestStateKey }}
{{- $previous := .Values.secrets.requestStatePreviousKey }}
{{- if and $previous.name (eq $previous.name (include "aql-mcp.requestStateSecretName" .)) (eq $previous.key $current.key) }}
{{- fail "secrets.requestStatePreviousKey names the same Secret key as secrets.requestStateKey: after a rotation the previous key is the old one, in another Secret or under another key" }}
{{- end }}
{{- if $auth.introspection_url }}
{{- $fromExtra := false }}
{{- range .Values.extraSecretEnv }}
{{- if eq (upper .name) "AQL_MCP_AUTH__INTROSPECTION_CLIENT_SECRET" }}{{ $fromExtra = true }}{{ end }}
{{- end }}
{{- if not (and $auth.introspection_client_id (or .Values.secrets.introspectionClientSecret.name $fromExtra)) }}
{{- fail "config.auth.introspection_url needs config.auth.introspection_client_id and secrets.introspectionClientSecret.name (the Secret holding the client secret)" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
terminationGracePeriodSeconds: on SIGTERM the service keeps serving for shutdown.drain_seconds
(/ready already 503), then gives in-flight calls shutdown.grace_seconds, and a call runs at most
limits.tool_timeout_seconds; the kubelet must not SIGKILL before all of that, plus a margin.
*/}}
{{- define "aql-mcp.terminationGracePeriodSeconds" -}}
{{- $c := .Values.config }}
{{- $sum := addf $c.shutdown.drain_seconds $c.shutdown.grace_seconds $c.limits.tool_timeout_seconds .Values.terminationGraceMarginSeconds }}
{{- ceil $sum | int }}
{{- end }}

{{/* The service's config file: the settings from .Values.config plus what the chart owns. */}}
{{- define "aql-mcp.configFile" -}}
{{- $config := deepCopy .Values.config }}
{{- $server := merge (dict "host" "0.0.0.0" "port" (int .Values.containerPort) "dev" false) $config.server }}
{{- $_ := set $server "host" "0.0.0.0" }}
{{- $_ = set $server "port" (int .Values.containerPort) }}
{{- $_ = set $server "dev" false }}
{{- $_ = set $config "server" $server }}
{{- $store := merge (dict "path" (include "aql-mcp.statePath" .)) ($config.store | default dict) }}
{{- $_ = set $store "path" (include "aql-mcp.statePath" .) }}
{{- if and (eq .Values.store.engine "postgres") .Values.store.postgres.caSecretName }}
{{- $_ = set $store "ssl_root_cert" (include "aql-mcp.postgresCaFile" .) }}
{{- end }}
{{- $_ = set $config "store" $store }}
{{- if .Values.secrets.opaqueTokens.name }}
{{- $_ = set $config.auth "opaque_tokens_file" (include "aql-mcp.opaqueTokensFile" .) }}
{{- end }}
{{- toYaml $config }}
{{- end }}
