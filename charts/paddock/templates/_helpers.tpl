{{/*
Labels every object of the release carries. app.kubernetes.io/name is also the selector, and
stays the same as in dist/paddock.yaml so that Services and the router's NetworkPolicy find the
same Pods whichever way Paddock was installed.
*/}}
{{- define "paddock.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: paddock
{{- end }}

{{- define "paddock.controller.labels" -}}
app.kubernetes.io/name: paddock-controller
{{ include "paddock.labels" . }}
{{- end }}

{{- define "paddock.egress.labels" -}}
app.kubernetes.io/name: paddock-egress
{{ include "paddock.labels" . }}
{{- end }}

{{- define "paddock.router.labels" -}}
app.kubernetes.io/name: paddock-router
{{ include "paddock.labels" . }}
{{- end }}

{{/* The controller's image reference; the tag defaults to the chart's appVersion. */}}
{{- define "paddock.controller.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "paddock.router.image" -}}
{{ .Values.router.image.repository }}:{{ .Values.router.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
The controller's command line: the flags the values set, then extraArgs. A flag whose value is
null or empty is left out, so the controller's own default applies.
*/}}
{{- define "paddock.controller.args" -}}
- --leader-elect={{ .Values.leaderElect }}
{{- with .Values.sandboxdImage.repository }}
- --sandboxd-image={{ . }}:{{ $.Values.sandboxdImage.tag | default $.Chart.AppVersion }}
{{- end }}
{{- if .Values.extensions }}
- --extensions
{{- end }}
{{- if ne (int .Values.metrics.port) 8080 }}
- --metrics-bind-address=:{{ .Values.metrics.port }}
{{- end }}
{{- if not (kindIs "invalid" .Values.kubeAPIQPS) }}
- --kube-api-qps={{ .Values.kubeAPIQPS }}
{{- end }}
{{- if not (kindIs "invalid" .Values.kubeAPIBurst) }}
- --kube-api-burst={{ .Values.kubeAPIBurst }}
{{- end }}
{{- with .Values.clusterDomain }}
- --cluster-domain={{ . }}
{{- end }}
{{- if .Values.tracing.enabled }}
- --enable-tracing
{{- end }}
{{- if .Values.claimObservabilityAnnotations }}
- --claim-observability-annotations
{{- end }}
{{- with .Values.imageConfig }}
{{- with .registryMirrors }}
- --image-config-registry-mirror={{ range $i, $m := . }}{{ if $i }},{{ end }}{{ $m.registry }}={{ $m.url }}{{ end }}
{{- end }}
{{- if .mirrorCredentialsSecret }}
{{- if not .registryMirrors }}
{{- fail "imageConfig.mirrorCredentialsSecret needs imageConfig.registryMirrors: the credentials go only to a mirror; set registryMirrors or leave the Secret out" }}
{{- end }}
- --image-config-registry-mirror-credentials={{ include "paddock.imageConfigMirrorDir" $ }}/.dockerconfigjson
{{- end }}
{{- end }}
{{- if .Values.egress.enabled }}
- --sandbox-egress-proxy-ports={{ .Values.egress.proxyPort }},{{ .Values.egress.dnsPort }}
{{- end }}
{{- /* The controller's default router namespace is paddock-system; elsewhere say where it is. */ -}}
{{- if ne .Release.Namespace "paddock-system" }}
- --router-namespace={{ .Release.Namespace }}
{{- end }}
{{- with .Values.snapshots }}
{{- if .enabled }}
- --snapshot-repository={{ required "snapshots.repository is required with snapshots.enabled: the registry repository snapshots are pushed to" .repository }}
- --snapshot-capture-image={{ .captureImage.repository }}:{{ .captureImage.tag | default $.Chart.AppVersion }}
- --snapshot-capture-namespace={{ .captureNamespace }}
{{- if .insecureRegistry }}
- --snapshot-insecure-registry
{{- end }}
{{- with .containerdSocket }}
- --snapshot-containerd-socket={{ . }}
{{- end }}
{{- with .nodePaths }}
- --snapshot-node-paths={{ join "," . }}
{{- end }}
{{- with .runsc }}
- --snapshot-runsc={{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* Where the controller finds imageConfig.mirrorCredentialsSecret. */}}
{{- define "paddock.imageConfigMirrorDir" -}}
/etc/paddock/image-config-mirror
{{- end }}
