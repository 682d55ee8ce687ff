{{/*
tether-provisioner.container: tether's provisioner as one entry of a
pod's containers list, in place of external-provisioner's. Include it
under containers: with the settings as a dict:

  containers:
    {{- include "tether-provisioner.container" .Values.tetherProvisioner | nindent 4 }}

Every setting may be left out:
  name            the container's name (csi-provisioner)
  image           {repository, tag, digest, pullPolicy}: tether's, of this
                  library's release
  socket          {volume, dir, file}: the pod's volume holding the driver's
                  socket, mounted at dir (socket-dir, /csi, csi.sock); the
                  address is given as --csi-address=$(ADDRESS)
  httpPort        --http-endpoint's port (8080; 0: none, and no probe),
                  served as the container port portName (provisioner), with
                  a liveness probe on /healthz (every check of tether's)
  metricsSecure   --metrics-secure, and the probe over HTTPS
  nodeDeployment  --node-deployment=true, with NODE_NAME from the pod's node
  flags           further flags of external-provisioner v6.4.0 (tether's
                  provisioner takes them all), as a map of name (without
                  dashes) to value, given as --name=value in name order;
                  quote durations and large numbers ("1200s")
  extraArgs       arguments appended as they are
  env             further env entries
  runAsUser       the container's user: 0 where the driver's socket is
                  root's and the pod sets no user (docs/own-driver.md,
                  "Which user"); unset, the image's (uid 65532)
  securityContext replaces the container's default securityContext (no
                  privilege escalation, read-only root, no capabilities);
                  runAsUser is added to it
  resources       the container's resources
The NAMESPACE and POD_NAME env entries are always set (capacity owner
references and the Lease's holder need them).
*/}}
{{- define "tether-provisioner.container" -}}
{{- $v := . | default dict -}}
{{- $img := $v.image | default dict -}}
{{- $sock := $v.socket | default dict -}}
{{- $dir := $sock.dir | default "/csi" -}}
{{- $port := $v.httpPort | default 8080 | int -}}
{{- if and (hasKey $v "httpPort") (kindIs "invalid" $v.httpPort | not) -}}
{{- $port = $v.httpPort | int -}}
{{- end -}}
{{- $portName := $v.portName | default "provisioner" -}}
{{- range $k := list "csi-address" "http-endpoint" "metrics-address" "node-deployment" "metrics-secure" -}}
{{- if hasKey ($v.flags | default dict) $k -}}
{{- fail (printf "tether-provisioner.container: give --%s through its own setting, not flags" $k) -}}
{{- end -}}
{{- end -}}
- name: {{ $v.name | default "csi-provisioner" }}
  image: {{ include "tether-provisioner.image" $img }}
  {{- with $img.pullPolicy }}
  imagePullPolicy: {{ . }}
  {{- end }}
  args:
    - --csi-address=$(ADDRESS)
    {{- if $port }}
    - --http-endpoint=:{{ $port }}
    {{- end }}
    {{- if $v.nodeDeployment }}
    - --node-deployment=true
    {{- end }}
    {{- if $v.metricsSecure }}
    - --metrics-secure
    {{- end }}
    {{- range $k, $val := $v.flags }}
    {{- if not (kindIs "invalid" $val) }}
    - {{ printf "--%s=%v" $k $val | quote }}
    {{- end }}
    {{- end }}
    {{- range $v.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  env:
    - name: ADDRESS
      value: {{ printf "%s/%s" (trimSuffix "/" $dir) ($sock.file | default "csi.sock") | quote }}
    - name: NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    {{- if $v.nodeDeployment }}
    - name: NODE_NAME
      valueFrom:
        fieldRef:
          fieldPath: spec.nodeName
    {{- end }}
    {{- with $v.env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if $port }}
  ports:
    - name: {{ $portName }}
      containerPort: {{ $port }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: {{ $portName }}
      {{- if $v.metricsSecure }}
      scheme: HTTPS
      {{- end }}
    periodSeconds: 10
    timeoutSeconds: 3
    failureThreshold: 3
  {{- end }}
  volumeMounts:
    - name: {{ $sock.volume | default "socket-dir" }}
      mountPath: {{ $dir }}
  {{- $sc := $v.securityContext | default (dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL"))) | deepCopy -}}
  {{- if and (hasKey $v "runAsUser") (not (kindIs "invalid" $v.runAsUser)) -}}
  {{- $_ := set $sc "runAsUser" ($v.runAsUser | int64) -}}
  {{- end }}
  securityContext:
    {{- toYaml $sc | nindent 4 }}
  {{- with $v.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
