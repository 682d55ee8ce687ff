{{/*
tether.image: an image reference from one entry of .Values.images, as
repository:tag or repository:tag@digest; an empty tag is the chart's
appVersion. Call with (dict "image" .Values.images.X "chart" .Chart).
*/}}
{{- define "tether.image" -}}
{{- $tag := .image.tag | default .chart.AppVersion -}}
{{- if .image.digest -}}
{{ .image.repository }}:{{ $tag }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/*
tether.pullPolicy: the imagePullPolicy line of one entry of .Values.images,
nothing when its pullPolicy is empty (the kubelet's default then).
*/}}
{{- define "tether.pullPolicy" -}}
{{- with .pullPolicy }}
imagePullPolicy: {{ . }}
{{- end -}}
{{- end -}}

{{/*
tether.fullname: the prefix of every object name the chart gives,
fullnameOverride or "tether" (the kustomize trees' names).
*/}}
{{- define "tether.fullname" -}}
{{- .Values.fullnameOverride | default "tether" | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/*
tether.labels: the labels Helm's conventions give each object of a release;
TestHelmChart ignores exactly these three when it compares the renders with
the kustomize trees, which have no release.
*/}}
{{- define "tether.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
tether.binderServiceAccount: the ServiceAccount the binder runs as and its
RBAC binds: binder.serviceAccount.name, or <fullname>-binder.
*/}}
{{- define "tether.binderServiceAccount" -}}
{{- .Values.binder.serviceAccount.name | default (printf "%s-binder" (include "tether.fullname" .)) -}}
{{- end -}}

{{/*
tether.provisionerServiceAccount: the ServiceAccount of provisioner.rbac
(the example driver runs as it): <fullname>-provisioner.
*/}}
{{- define "tether.provisionerServiceAccount" -}}
{{- printf "%s-provisioner" (include "tether.fullname" .) -}}
{{- end -}}

{{/*
tether.flowSubjects: the subjects of the chart's FlowSchemas: the binder's
ServiceAccount (with binder.enabled), tether-provisioner's, and each of
provisioner.serviceAccounts.
*/}}
{{- define "tether.flowSubjects" -}}
{{- if .Values.binder.enabled }}
- kind: ServiceAccount
  serviceAccount: {name: {{ include "tether.binderServiceAccount" . }}, namespace: {{ .Release.Namespace }}}
{{- end }}
- kind: ServiceAccount
  serviceAccount: {name: {{ include "tether.provisionerServiceAccount" . }}, namespace: {{ .Release.Namespace }}}
{{- range .Values.provisioner.serviceAccounts }}
- kind: ServiceAccount
  serviceAccount: {name: {{ .name }}, namespace: {{ .namespace }}}
{{- end }}
{{- end -}}

{{/*
tether.secureEndpoint: with metrics.secure, what a PodMonitor's endpoint
adds to scrape tether's --metrics-secure: HTTPS without checking the
self-signed certificate, and the bearer token of the chart's
<fullname>-metrics-scraper ServiceAccount (metrics-auth.yaml).
*/}}
{{- define "tether.secureEndpoint" -}}
{{- if .Values.metrics.secure -}}
scheme: https
tlsConfig:
  insecureSkipVerify: true
authorization:
  type: Bearer
  credentials:
    name: {{ include "tether.fullname" . }}-metrics-scraper
    key: token
{{- end -}}
{{- end -}}
