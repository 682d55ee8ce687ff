{{/*
tether-provisioner.image: the provisioner's image reference from an
image dict {repository, tag, digest}: repository:tag, or
repository:tag@digest; an empty repository is tether's, an empty tag the
release this library comes with (its appVersion: a library's templates
see the including chart's .Chart, not their own).
*/}}
{{- define "tether-provisioner.image" -}}
{{- $repo := .repository | default "ghcr.io/tether-csi/provisioner" -}}
{{- $tag := .tag | default "v0.1.0" -}}
{{- if .digest -}}
{{ $repo }}:{{ $tag }}@{{ .digest }}
{{- else -}}
{{ $repo }}:{{ $tag }}
{{- end -}}
{{- end -}}
