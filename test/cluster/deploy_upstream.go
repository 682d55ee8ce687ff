package cluster

import (
	"debug/elf"
	"fmt"
)

// UpstreamProvisionerImage is the image of the upstream external-provisioner
// (EP, the pinned csi-provisioner tool) for comparison runs on real nodes.
const UpstreamProvisionerImage = "localhost/csi-provisioner:e2e"

// UpstreamPatches are DeployCSI patches that put the upstream components
// where tether's run: EP in the provisioner's container of the node
// plugin, with the same arguments (tether's flags are EP's), and no tether
// binder (its Deployment scaled to zero; run kube-controller-manager with
// its PV binder). EP serves no /healthz on that endpoint, so the container
// has no liveness probe. EP also watches the capacity objects, which
// tether's Role (tether lists them) does not grant: the Role gets EP's own
// rules for them.
var UpstreamPatches = []string{`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: tether-provisioner, namespace: tether-system}
rules:
  - {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, watch, list, delete, update, create]}
  - {apiGroups: [storage.k8s.io], resources: [csistoragecapacities], verbs: [get, list, watch, create, update, patch, delete]}
  - {apiGroups: [""], resources: [pods], verbs: [get]}
  - {apiGroups: [apps], resources: [replicasets], verbs: [get]}`,
	`apiVersion: apps/v1
kind: Deployment
metadata: {name: tether-binder, namespace: tether-system}
spec: {replicas: 0}`,
	`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tether-local, namespace: tether-system}
spec: {template: {spec: {containers: [{name: provisioner, image: "` + UpstreamProvisionerImage + `", livenessProbe: null}]}}}`,
}

// UpstreamImages are the images UpstreamPatches name: EP's, from the
// pinned csi-provisioner, which must be static (make tools builds it so).
func UpstreamImages(t T) []Image {
	t.Helper()
	ep, err := Tool("csi-provisioner")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkStatic(ep); err != nil {
		t.Fatal(err)
	}
	return []Image{{Ref: UpstreamProvisionerImage, Files: map[string]string{"app": ep}, Entrypoint: []string{"/app"}, User: nonroot}}
}

// checkStatic fails for a dynamically linked binary, which an image with
// nothing but the binary cannot run.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; an image needs it static: delete it and run `make tools`", path)
		}
	}
	return nil
}
