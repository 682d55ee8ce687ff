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
