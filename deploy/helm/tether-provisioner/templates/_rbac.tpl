{{/*
tether-provisioner.extraRules: the rules tether's provisioner uses beyond
external-provisioner v6.4.0's ClusterRole, as the entries of a rules list
(deploy/components/provisioner/rbac-extra.yaml, whose comments say what
each is for): for a chart that appends them to its own provisioner
ClusterRole.
*/}}
{{- define "tether-provisioner.extraRules" -}}
- apiGroups: ["storage.k8s.io"]
  resources: ["volumeattributesclasses"]
  verbs: ["list", "watch"]
- apiGroups: ["storage.k8s.io"]
  resources: ["csidrivers"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get"]
{{- end -}}

{{/*
tether-provisioner.rbac: those rules as a ClusterRole and a
ClusterRoleBinding of their own, both named tether-provisioner-extra-<driver>
(as docs/own-driver.md's recipe names them, so two drivers never share
them), bound to the ServiceAccount the driver's controller pod runs as.
Call with a dict:
  driver          a short name of the driver's, unique among the cluster's
                  drivers (required)
  serviceAccount  the ServiceAccount's name (required)
  namespace       its namespace (required)
  labels          labels for both objects
*/}}
{{- define "tether-provisioner.rbac" -}}
{{- if not (and .driver .serviceAccount .namespace) -}}
{{- fail "tether-provisioner.rbac needs driver, serviceAccount and namespace" -}}
{{- end -}}
{{- $name := printf "tether-provisioner-extra-%s" .driver -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  {{- with .labels }}
  labels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
rules:
  {{- include "tether-provisioner.extraRules" . | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  {{- with .labels }}
  labels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ .serviceAccount }}
    namespace: {{ .namespace }}
{{- end -}}
