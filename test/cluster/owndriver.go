package cluster

import (
	"os"
	"path/filepath"
)

// The recipe of docs/own-driver.md, as a platform team would write it for
// a driver of its own. The driver is the csi-test mock driver, deployed as
// driver charts deploy a controller: a Deployment with the driver container
// and external-provisioner (EP) v6.4.0's csi-provisioner sidecar beside it
// on a unix socket in an emptyDir, EP's ServiceAccount and RBAC exactly as
// EP ships them (test/testdata/ep-v6.4.0/rbac.yaml) in the driver's own
// namespace, a CSIDriver and an Immediate StorageClass.
const (
	OwnDriverName      = "mock.csi.tether.example"
	OwnDriverNamespace = "csi-mock"
	OwnDriverClass     = "csi-mock"
	OwnDriverDeploy    = "csi-mock-controller"
	// OwnDriverEPImage is where charts take EP from; the component swaps it.
	OwnDriverEPImage = "registry.k8s.io/sig-storage/csi-provisioner:v6.4.0"
	// OwnExtraRBAC is the recipe's name for the ClusterRole and the
	// ClusterRoleBinding of the component's rbac-extra.yaml.
	OwnExtraRBAC = "tether-provisioner-extra-" + OwnDriverNamespace
)

// ownDriverFiles are the driver's manifests, as its chart would render
// them (rbac.yaml is added from EP's release).
var ownDriverFiles = map[string]string{
	"kustomization.yaml": `# The driver as it is, in its own namespace.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: ` + OwnDriverNamespace + `
resources:
  - namespace.yaml
  - rbac.yaml
  - controller.yaml
  - csidriver.yaml
  - storageclass.yaml
`,
	"namespace.yaml": `apiVersion: v1
kind: Namespace
metadata:
  name: ` + OwnDriverNamespace + `
`,
	"controller.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + OwnDriverDeploy + `
  labels:
    app: ` + OwnDriverDeploy + `
spec:
  replicas: 1
  selector:
    matchLabels:
      app: ` + OwnDriverDeploy + `
  template:
    metadata:
      labels:
        app: ` + OwnDriverDeploy + `
    spec:
      serviceAccountName: csi-provisioner
      containers:
        - name: mock-driver
          image: ` + MockDriverImage + `
          args:
            - --name=` + OwnDriverName + `
            - -v=5
          env:
            - name: CSI_ENDPOINT
              value: unix:///var/lib/csi/sockets/pluginproxy/csi.sock
          volumeMounts:
            - name: socket-dir
              mountPath: /var/lib/csi/sockets/pluginproxy/
        - name: csi-provisioner
          image: ` + OwnDriverEPImage + `
          imagePullPolicy: IfNotPresent
          args:
            - --csi-address=$(ADDRESS)
            - --v=5
            - --feature-gates=Topology=true
            - --extra-create-metadata
            - --leader-election
            - --http-endpoint=:8080
          env:
            - name: ADDRESS
              value: /var/lib/csi/sockets/pluginproxy/csi.sock
          volumeMounts:
            - name: socket-dir
              mountPath: /var/lib/csi/sockets/pluginproxy/
          ports:
            - containerPort: 8080
              name: http-endpoint
              protocol: TCP
          livenessProbe:
            failureThreshold: 1
            httpGet:
              path: /healthz/leader-election
              port: http-endpoint
            initialDelaySeconds: 10
            timeoutSeconds: 10
            periodSeconds: 20
      volumes:
        - name: socket-dir
          emptyDir: {}
`,
	"csidriver.yaml": `apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: ` + OwnDriverName + `
spec:
  attachRequired: false
  podInfoOnMount: false
`,
	"storageclass.yaml": `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: ` + OwnDriverClass + `
provisioner: ` + OwnDriverName + `
reclaimPolicy: Delete
volumeBindingMode: Immediate
`,
}

// OwnRecipe is the platform team's kustomization: their driver, the two
// components, and the two patches docs/own-driver.md asks for (the extra
// RBAC's subject; the user, since this pod sets none and its driver runs
// as root). It must stay what the docs show.
const OwnRecipe = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - driver
components:
  - ../deploy/components/provisioner
  - ../deploy/components/binder
patches:
  - target: {kind: ClusterRole, name: tether-provisioner-extra}
    patch: |
      - {op: replace, path: /metadata/name, value: ` + OwnExtraRBAC + `}
  - target: {kind: ClusterRoleBinding, name: tether-provisioner-extra}
    patch: |
      - {op: replace, path: /metadata/name, value: ` + OwnExtraRBAC + `}
      - op: replace
        path: /subjects/0
        value: {kind: ServiceAccount, name: csi-provisioner, namespace: ` + OwnDriverNamespace + `}
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: ` + OwnDriverDeploy + `, namespace: ` + OwnDriverNamespace + `}
      spec: {template: {spec: {containers: [{name: csi-provisioner, securityContext: {runAsUser: 0}}]}}}
`

// WriteOwnDriverTree writes into dir: deploy/ (a copy of the repository's),
// own/ (OwnRecipe over the driver in own/driver, with EP v6.4.0's RBAC
// from test/testdata) and, if harness is set, harness/kustomization.yaml:
// what a test adds over the recipe (images as its nodes have them, say).
func WriteOwnDriverTree(t T, dir, harness string) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"own/kustomization.yaml": OwnRecipe}
	for name, text := range ownDriverFiles {
		files["own/driver/"+name] = text
	}
	rbac, err := readRepoFile("test/testdata/ep-v6.4.0/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files["own/driver/rbac.yaml"] = rbac
	if harness != "" {
		files["harness/kustomization.yaml"] = harness
	}
	writeFiles(t, dir, files)
}

// readRepoFile is the repository's file at path (slash-separated).
func readRepoFile(path string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	return string(data), err
}

// writeFiles writes each file of files (by its slash-separated path under
// dir), making its folders.
func writeFiles(t T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
