package cluster

import (
	"strings"
)

// The second driver of the two-drivers recipe (docs/own-driver.md, "Two
// drivers"): the first driver's manifests and recipe with its names
// changed, installed beside it. Its recipe has the provisioner component
// only (the first's binder serves both), and its driver renames the
// cluster-wide RBAC it takes from EP's rbac.yaml, as a driver's chart
// names its own after the driver.
const (
	SecondDriverName      = "mock2.csi.tether.example"
	SecondDriverNamespace = OwnDriverNamespace + "-2"
	SecondDriverClass     = OwnDriverClass + "-2"
	SecondDriverDeploy    = SecondDriverNamespace + "-controller"
	SecondExtraRBAC       = "tether-provisioner-extra-" + SecondDriverNamespace
)

// secondDriver turns a file of the first driver's tree into the second's.
// Its namespace and class are both "csi-mock", and the Deployment
// "csi-mock-controller": one replacement renames all three, and not the
// mock driver's image, which both run.
func secondDriver(text string) string {
	const image = "\x00image\x00"
	text = strings.ReplaceAll(text, MockDriverImage, image)
	text = strings.ReplaceAll(text, OwnDriverName, SecondDriverName)
	text = strings.ReplaceAll(text, OwnDriverNamespace, SecondDriverNamespace)
	return strings.ReplaceAll(text, image, MockDriverImage)
}

// secondDriverRBAC renames the cluster-wide objects of EP's rbac.yaml in
// the second driver's kustomization.
const secondDriverRBAC = `patches:
  - target: {kind: ClusterRole, name: external-provisioner-runner}
    patch: |
      - {op: replace, path: /metadata/name, value: ` + SecondDriverNamespace + `-provisioner-runner}
  - target: {kind: ClusterRoleBinding, name: csi-provisioner-role}
    patch: |
      - {op: replace, path: /metadata/name, value: ` + SecondDriverNamespace + `-provisioner-role}
`

// SecondRecipe is the second driver's kustomization: OwnRecipe without the
// binder component, with its own names.
func SecondRecipe() string {
	return strings.Replace(secondDriver(OwnRecipe), "  - ../deploy/components/binder\n", "", 1)
}

// WriteSecondDriverTree writes into dir, beside WriteOwnDriverTree's tree
// (whose deploy/ it uses): own2/ (SecondRecipe over the second driver in
// own2/driver) and, if harness is set, harness2/kustomization.yaml.
func WriteSecondDriverTree(t T, dir, harness string) {
	t.Helper()
	files := map[string]string{"own2/kustomization.yaml": SecondRecipe()}
	for name, text := range ownDriverFiles {
		files["own2/driver/"+name] = secondDriver(text)
	}
	files["own2/driver/kustomization.yaml"] += secondDriverRBAC
	rbac, err := readRepoFile("test/testdata/ep-v6.4.0/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files["own2/driver/rbac.yaml"] = rbac
	if harness != "" {
		files["harness2/kustomization.yaml"] = harness
	}
	writeFiles(t, dir, files)
}
