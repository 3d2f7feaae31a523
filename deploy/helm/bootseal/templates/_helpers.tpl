{{/* Names, labels and the pieces both Deployments share. */}}

{{- define "bootseal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "bootseal.fullname" -}}
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

{{/* The controller's objects: <fullname>-controller, within 63 characters. */}}
{{- define "bootseal.controllerName" -}}
{{- printf "%s-controller" (include "bootseal.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{- define "bootseal.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels every object carries beside its selector labels. */}}
{{- define "bootseal.metaLabels" -}}
helm.sh/chart: {{ include "bootseal.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: bootseal
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Object labels: name, instance and the meta labels (the component is added per object). */}}
{{- define "bootseal.labels" -}}
app.kubernetes.io/name: {{ include "bootseal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{ include "bootseal.metaLabels" . }}
{{- end }}

{{- define "bootseal.serverSelectorLabels" -}}
app.kubernetes.io/name: {{ include "bootseal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{- define "bootseal.controllerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "bootseal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "bootseal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "bootseal.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "bootseal.controllerServiceAccountName" -}}
{{- if .Values.controller.serviceAccount.create }}
{{- default (include "bootseal.controllerName" .) .Values.controller.serviceAccount.name }}
{{- else }}
{{- required "controller.serviceAccount.name is required when controller.serviceAccount.create is false" .Values.controller.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "bootseal.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The store's scheme: s3, gs, or "" when no URL is set. */}}
{{- define "bootseal.storeScheme" -}}
{{- if hasPrefix "s3://" .Values.store.url }}s3{{ else if hasPrefix "gs://" .Values.store.url }}gs{{ end }}
{{- end }}

{{/* Where the chart mounts what it mounts. */}}
{{- define "bootseal.paths" -}}
config: /etc/bootseal/config/bootseal.yaml
tlsDir: /etc/bootseal/tls
derivationKey: /etc/bootseal/derivation/key
gcsCredentials: /var/run/secrets/bootseal/store/credentials.json
saDir: /var/run/secrets/kubernetes.io/serviceaccount
controllerToken: /var/run/secrets/bootseal/token
controllerCa: /etc/bootseal/tls/ca.crt
{{- end }}

{{/*
limits.maxConnectionsPerAddress: the value when set; otherwise 64 (the service's default) when
the pods see each machine's own address (a LoadBalancer or NodePort Service with
externalTrafficPolicy Local), else 0: every peer is a balancer hop (a node after kube-proxy's
SNAT, an ingress controller's pod, a cloud load balancer) that carries the whole fleet.
*/}}
{{- define "bootseal.maxConnectionsPerAddress" -}}
{{- if not (kindIs "invalid" .Values.limits.maxConnectionsPerAddress) }}
{{- .Values.limits.maxConnectionsPerAddress | int }}
{{- else if and (has .Values.service.type (list "LoadBalancer" "NodePort")) (eq .Values.service.externalTrafficPolicy "Local") }}
{{- 64 }}
{{- else }}
{{- 0 }}
{{- end }}
{{- end }}

{{/* The service's scheme and URL inside the cluster (what the controller uses by default). */}}
{{- define "bootseal.scheme" -}}
{{- if .Values.tls.existingSecret }}https{{ else }}http{{ end }}
{{- end }}

{{- define "bootseal.serverUrl" -}}
{{- if .Values.controller.serverUrl }}
{{- .Values.controller.serverUrl }}
{{- else }}
{{- printf "%s://%s.%s.svc:%v" (include "bootseal.scheme" .) (include "bootseal.fullname" .) .Release.Namespace .Values.port }}
{{- end }}
{{- end }}

{{/* The controller's own kubernetesBindings entry, then the user's. */}}
{{- define "bootseal.kubernetesBindings" -}}
{{- $bindings := list }}
{{- if .Values.controller.enabled }}
{{- $bindings = append $bindings (dict "serviceAccount" (printf "%s/%s" .Release.Namespace (include "bootseal.controllerServiceAccountName" .)) "scopes" .Values.controller.scopes "namespaces" .Values.controller.namespaces) }}
{{- end }}
{{- range .Values.kubernetesBindings }}
{{- $bindings = append $bindings . }}
{{- end }}
{{- toJson $bindings }}
{{- end }}

{{/*
The keys the chart owns in bootseal.yaml, as a dict: merged over config.inline into the
ConfigMap, or turned into BOOTSEAL_* variables beside an existing Secret.
*/}}
{{- define "bootseal.chartConfig" -}}
{{- $p := include "bootseal.paths" . | fromYaml }}
{{- $c := dict }}
{{- with .Values.store.url }}{{ $_ := set $c "store" . }}{{ end }}
{{- $_ := set $c "publicUrl" (required "publicUrl is required: the URL machines reach the service at (e.g. https://bootseal.mgmt.example.com); every user-data stub names it, and the service never takes it from a request's Host header" .Values.publicUrl) }}
{{- with .Values.trustProxy }}{{ $_ := set $c "trustProxy" . }}{{ end }}
{{- $_ := set $c "limits" (dict "maxConnectionsPerAddress" (include "bootseal.maxConnectionsPerAddress" . | atoi)) }}
{{- $s3 := dict }}
{{- with .Values.store.s3.endpoint }}{{ $_ := set $s3 "endpoint" . }}{{ end }}
{{- with .Values.store.s3.region }}{{ $_ := set $s3 "region" . }}{{ end }}
{{- if not (kindIs "invalid" .Values.store.s3.forcePathStyle) }}{{ $_ := set $s3 "forcePathStyle" .Values.store.s3.forcePathStyle }}{{ end }}
{{- if $s3 }}{{ $_ := set $c "s3" $s3 }}{{ end }}
{{- if .Values.tls.existingSecret }}
{{- $_ := set $c "tls" (dict "cert" (printf "%s/tls.crt" $p.tlsDir) "key" (printf "%s/tls.key" $p.tlsDir)) }}
{{- end }}
{{- if .Values.derivationKey.existingSecret }}
{{- $_ := set $c "bootstrapToken" (dict "derivationKeyFile" $p.derivationKey) }}
{{- end }}
{{- if .Values.controllerAuth.kubernetes.enabled }}
{{- $k := dict "server" .Values.controllerAuth.kubernetes.server "caFile" (printf "%s/ca.crt" $p.saDir) "tokenFile" (printf "%s/token" $p.saDir) "audiences" (list .Values.controllerAuth.kubernetes.audience) "cacheTtl" .Values.controllerAuth.kubernetes.cacheTtl }}
{{- $_ := set $c "controllerAuth" (dict "kubernetes" $k) }}
{{- $_ := set $c "kubernetesBindings" (include "bootseal.kubernetesBindings" . | fromJsonArray) }}
{{- end }}
{{- toJson $c }}
{{- end }}

{{/* bootseal.yaml for the ConfigMap: config.inline with the chart's keys merged over it. */}}
{{- define "bootseal.inlineConfig" -}}
{{- $chart := include "bootseal.chartConfig" . | fromJson }}
{{- $cfg := deepCopy .Values.config.inline }}
{{- if and (hasKey $chart "kubernetesBindings") (hasKey $cfg "kubernetesBindings") }}
{{- $_ := set $chart "kubernetesBindings" (concat (get $chart "kubernetesBindings") (get $cfg "kubernetesBindings")) }}
{{- end }}
{{- range $key := list "bootstrapToken" "tls" "limits" }}
{{- if and (hasKey $chart $key) (hasKey $cfg $key) }}
{{- $_ := set $chart $key (merge (get $chart $key) (get $cfg $key)) }}
{{- end }}
{{- end }}
{{- toYaml (mergeOverwrite $cfg $chart) }}
{{- end }}

{{/* The chart's keys as BOOTSEAL_* variables (beside config.existingSecret). */}}
{{- define "bootseal.chartConfigEnv" -}}
{{- $c := include "bootseal.chartConfig" . | fromJson }}
{{- with $c.store }}
- name: BOOTSEAL_STORE
  value: {{ . | quote }}
{{- end }}
{{- with $c.publicUrl }}
- name: BOOTSEAL_PUBLIC_URL
  value: {{ . | quote }}
{{- end }}
{{- with $c.trustProxy }}
- name: BOOTSEAL_TRUST_PROXY
  value: {{ join "," . | quote }}
{{- end }}
- name: BOOTSEAL_LIMITS_MAX_CONNECTIONS_PER_ADDRESS
  value: {{ $c.limits.maxConnectionsPerAddress | quote }}
{{- with $c.s3 }}
{{- with .endpoint }}
- name: BOOTSEAL_S3_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .region }}
- name: BOOTSEAL_S3_REGION
  value: {{ . | quote }}
{{- end }}
{{- if hasKey . "forcePathStyle" }}
- name: BOOTSEAL_S3_FORCE_PATH_STYLE
  value: {{ .forcePathStyle | quote }}
{{- end }}
{{- end }}
{{- with $c.tls }}
- name: BOOTSEAL_TLS_CERT
  value: {{ .cert | quote }}
- name: BOOTSEAL_TLS_KEY
  value: {{ .key | quote }}
{{- end }}
{{- with $c.bootstrapToken }}
- name: BOOTSEAL_BOOTSTRAP_TOKEN_DERIVATION_KEY_FILE
  value: {{ .derivationKeyFile | quote }}
{{- end }}
{{- with $c.controllerAuth }}
- name: BOOTSEAL_CONTROLLER_AUTH_KUBERNETES_SERVER
  value: {{ .kubernetes.server | quote }}
- name: BOOTSEAL_CONTROLLER_AUTH_KUBERNETES_CA_FILE
  value: {{ .kubernetes.caFile | quote }}
- name: BOOTSEAL_CONTROLLER_AUTH_KUBERNETES_TOKEN_FILE
  value: {{ .kubernetes.tokenFile | quote }}
- name: BOOTSEAL_CONTROLLER_AUTH_KUBERNETES_AUDIENCES
  value: {{ .kubernetes.audiences | toJson | quote }}
- name: BOOTSEAL_CONTROLLER_AUTH_KUBERNETES_CACHE_TTL
  value: {{ .kubernetes.cacheTtl | quote }}
{{- end }}
{{- with $c.kubernetesBindings }}
- name: BOOTSEAL_KUBERNETES_BINDINGS
  value: {{ . | toJson | quote }}
{{- end }}
{{- end }}

{{/* Pod scheduling settings shared by the templates (dict with "v" = a values block). */}}
{{- define "bootseal.scheduling" -}}
{{- with .v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
