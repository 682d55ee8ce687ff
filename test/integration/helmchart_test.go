package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/tether-csi/tether/test/cluster"
)

// chartDir is tether's chart, under the repository root.
const chartDir = "deploy/helm/tether"

// chartCase is one set of the chart's values and the kustomize tree whose
// render it must equal: a folder under deploy/ and the components over it.
type chartCase struct {
	name       string
	set        []string // helm --set values
	values     []string // helm --values files, under the repository root
	dir        string   // empty: components alone
	components []string
	// patches are the top kustomization's patches: entries of a YAML list.
	patches string
	// dropNamespace: the render without the Namespace object (the chart's
	// default leaves it to helm install --create-namespace).
	dropNamespace bool
}

var chartCases = []chartCase{
	{name: "default", dir: "deploy/production", dropNamespace: true},
	{name: "production bundle", set: []string{"namespace.create=true"}, dir: "deploy/production"},
	{name: "example driver", set: []string{"namespace.create=true", "exampleDriver.enabled=true"}, dir: "deploy/csi"},
	{name: "podmonitor", set: []string{"namespace.create=true", "exampleDriver.enabled=true", "monitoring.podMonitor.enabled=true"},
		dir: "deploy/csi", components: []string{"deploy/csi/components/podmonitor"}},
	{name: "provisioner secrets", set: []string{"namespace.create=true", "exampleDriver.enabled=true", "provisioner.secrets=true"},
		dir: "deploy/csi", components: []string{"deploy/csi/components/provisioner-secrets"}},
	{name: "secure metrics", set: []string{"namespace.create=true", "exampleDriver.enabled=true", "metrics.secure=true"},
		dir: "deploy/csi", components: []string{"deploy/csi/components/secure-metrics"}},
	{name: "secure metrics, binder alone", set: []string{"metrics.secure=true"},
		dir: "deploy/production", components: []string{"deploy/csi/components/secure-metrics"}, dropNamespace: true},
	{name: "prometheusrule", set: []string{"namespace.create=true", "monitoring.prometheusRule.enabled=true"},
		dir: "deploy/production", components: []string{"deploy/monitoring/prometheusrule"}},
	// A driver of one's own: docs/own-driver.md's recipe, the driver's
	// ServiceAccount also added to the FlowSchemas as it says.
	{name: "own driver", set: append([]string{"namespace.create=true", "provisioner.rbac=false"}, ownDriverSet...),
		components: []string{"deploy/components/binder", "deploy/components/provisioner"},
		patches:    ownDriverPatches("my-driver", "my-driver-controller-sa") + ownDriverFlowPatches("my-driver-controller-sa")},
	{name: "own driver, provisioner only", set: append([]string{"binder.enabled=false", "provisioner.rbac=false", "flowControl.enabled=false"}, ownDriverSet...),
		components: []string{"deploy/components/provisioner"}, patches: ownDriverPatches("my-driver", "my-driver-controller-sa")},
	// examples/helm's values for tether's chart beside aws-ebs-csi-driver.
	{name: "examples/helm/tether-values.yaml", set: []string{"namespace.create=true"}, values: []string{"examples/helm/tether-values.yaml"},
		components: []string{"deploy/components/binder", "deploy/components/provisioner"},
		patches:    ownDriverPatches("ebs", "ebs-csi-controller-sa") + ownDriverFlowPatches("ebs-csi-controller-sa")},
}

// ownDriverSet gives the chart the driver of docs/own-driver.md's recipe,
// whose patch 1 is ownDriverPatches.
var ownDriverSet = []string{
	"provisioner.serviceAccounts[0].driver=my-driver",
	"provisioner.serviceAccounts[0].name=my-driver-controller-sa",
	"provisioner.serviceAccounts[0].namespace=kube-system",
}

// ownDriverPatches is patch 1 of docs/own-driver.md's recipe for a driver
// whose controller runs as the ServiceAccount sa in kube-system.
func ownDriverPatches(driver, sa string) string {
	return fmt.Sprintf(`
  - target: {kind: ClusterRole, name: tether-provisioner-extra}
    patch: |
      - {op: replace, path: /metadata/name, value: tether-provisioner-extra-%[1]s}
  - target: {kind: ClusterRoleBinding, name: tether-provisioner-extra}
    patch: |
      - {op: replace, path: /metadata/name, value: tether-provisioner-extra-%[1]s}
      - op: replace
        path: /subjects/0
        value: {kind: ServiceAccount, name: %[2]s, namespace: kube-system}
`, driver, sa)
}

// ownDriverFlowPatches adds the ServiceAccount sa of kube-system to both
// FlowSchemas, as docs/own-driver.md ("RBAC") says.
func ownDriverFlowPatches(sa string) string {
	return fmt.Sprintf(`
  - target: {kind: FlowSchema}
    patch: |
      - op: add
        path: /spec/rules/0/subjects/-
        value: {kind: ServiceAccount, serviceAccount: {name: %s, namespace: kube-system}}
`, sa)
}

// TestHelmChart lints tether's chart (helm lint --strict, with each set of
// values) and checks that each render (helm template, in tether-system)
// holds the objects of the kustomize tree it stands for, object for object
// and field for field: with its default values deploy/production (the
// release's tether-production.yaml) less the Namespace, with the example
// driver deploy/csi (tether.yaml), and each optional part as the
// component of the same name. The chart's objects carry the three labels
// Helm's conventions give a release's objects (releaseLabels), which no
// kustomize tree has: those three, and only those, are left out of the
// comparison.
func TestHelmChart(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, chartDir)
	for _, tt := range chartCases {
		t.Run(tt.name, func(t *testing.T) {
			flags := setFlags(tt.set)
			for _, f := range tt.values {
				flags = append(flags, "--values", filepath.Join(root, f))
			}
			lint := helm(t, "", append([]string{"lint", "--strict", chart}, flags...)...)
			if !strings.Contains(lint, "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(lint, "[WARNING]") || strings.Contains(lint, "[ERROR]") {
				t.Errorf("helm lint:\n%s", lint)
			}
			got := decodeBundle(t, []byte(helm(t, "", append([]string{"template", "tether", chart, "--namespace", cluster.DeployNamespace}, flags...)...)))
			dropReleaseLabels(got)
			want := decodeBundle(t, []byte(kustomizeTree(t, root, tt.dir, tt.components, tt.patches)))
			if tt.dropNamespace {
				want = slices.DeleteFunc(want, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Namespace" })
			}
			compareObjects(t, got, want)
		})
	}
}

// TestHelmInstall installs tether's chart on a real API server with the
// commands docs/deploy.md shows (read from its block), checks that every
// object of the render is there and the release's, upgrades it with a
// value changed, then with binder.enabled=false (the binder's Deployment
// goes), and uninstalls it: no object of the chart is left.
func TestHelmInstall(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range docHelmCommands(t, filepath.Join(root, "docs/deploy.md")) {
		helm(t, c.Kubeconfig, args...)
	}
	ctx := t.Context()
	objs := decodeBundle(t, []byte(helm(t, "", "template", "tether", filepath.Join(root, chartDir), "--namespace", cluster.DeployNamespace)))
	dyn := dynamic.NewForConfigOrDie(c.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	for _, obj := range objs {
		got, err := getObject(ctx, dyn, mapper, obj)
		if err != nil {
			t.Errorf("%s %s after helm install: %v", obj.GetKind(), obj.GetName(), err)
			continue
		}
		if got.GetAnnotations()["meta.helm.sh/release-name"] != "tether" {
			t.Errorf("%s %s is not the release's: annotations %v", obj.GetKind(), obj.GetName(), got.GetAnnotations())
		}
	}

	helm(t, c.Kubeconfig, "upgrade", "tether", filepath.Join(root, chartDir), "--namespace", cluster.DeployNamespace,
		"--set", "binder.replicas=3")
	d, err := c.Client.AppsV1().Deployments(cluster.DeployNamespace).Get(ctx, "tether-binder", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("after helm upgrade --set binder.replicas=3 the binder has %v replicas", d.Spec.Replicas)
	}

	// The provisioner-only setup: the binder's objects go.
	helm(t, c.Kubeconfig, "upgrade", "tether", filepath.Join(root, chartDir), "--namespace", cluster.DeployNamespace,
		"--set", "binder.enabled=false")
	cluster.WaitGone(t, "the binder's Deployment after binder.enabled=false", func(ctx context.Context) error {
		_, err := c.Client.AppsV1().Deployments(cluster.DeployNamespace).Get(ctx, "tether-binder", metav1.GetOptions{})
		return err
	})

	helm(t, c.Kubeconfig, "uninstall", "tether", "--namespace", cluster.DeployNamespace, "--wait")
	for _, obj := range objs {
		if _, err := getObject(ctx, dyn, mapper, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s after helm uninstall: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// helm runs the pinned helm in the repository's root with its own empty
// configuration, cache and data folders, against kubeconfig if one is
// given, and returns its output.
func helm(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	path, err := cluster.Tool("helm")
	if err != nil {
		t.Fatal(err)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), path, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	if kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out) + stderr.String()
}

func setFlags(set []string) []string {
	var args []string
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

// releaseLabels are the labels the chart gives each of its objects that no
// kustomize tree gives (templates/_helpers.tpl, tether.labels).
var releaseLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by"}

// dropReleaseLabels takes releaseLabels out of each object's own labels
// (not its pod template's), and the labels map if nothing else is left.
func dropReleaseLabels(objs []*unstructured.Unstructured) {
	for _, o := range objs {
		labels := o.GetLabels()
		if labels == nil {
			continue
		}
		for _, l := range releaseLabels {
			delete(labels, l)
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		} else {
			o.SetLabels(labels)
		}
	}
}

// kustomizeTree renders dir (under root's deploy/; none if empty) with the
// components over it and patches (entries of a YAML list), by `kubectl
// kustomize` of a kustomization beside a copy of deploy/ (kustomize takes
// relative paths only).
func kustomizeTree(t *testing.T, root, dir string, components []string, patches string) string {
	t.Helper()
	kubectl, err := cluster.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	if err := os.CopyFS(filepath.Join(tree, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		t.Fatal(err)
	}
	k := ""
	if dir != "" {
		k = fmt.Sprintf("resources: [../%s]\n", dir)
	}
	if len(components) > 0 {
		k += "components:\n"
	}
	for _, comp := range components {
		k += fmt.Sprintf("  - ../%s\n", comp)
	}
	if patches != "" {
		k += "patches:" + patches
	}
	if err := os.MkdirAll(filepath.Join(tree, "top"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "top", "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), kubectl, "kustomize", filepath.Join(tree, "top")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return string(out)
}

// objectKey names an object: apiVersion, kind, namespace and name.
func objectKey(o *unstructured.Unstructured) string {
	return o.GetAPIVersion() + " " + o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// compareObjects wants the same objects in got and want, each equal field
// for field (in any order of the objects).
func compareObjects(t *testing.T, got, want []*unstructured.Unstructured) {
	t.Helper()
	index := func(list []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range list {
			if _, dup := m[objectKey(o)]; dup {
				t.Errorf("%s twice", objectKey(o))
			}
			m[objectKey(o)] = o
		}
		return m
	}
	g, w := index(got), index(want)
	for k, wo := range w {
		gotObj, ok := g[k]
		switch {
		case !ok:
			t.Errorf("the chart lacks %s", k)
		case !reflect.DeepEqual(gotObj.Object, wo.Object):
			gy, _ := yaml.Marshal(gotObj.Object)
			wy, _ := yaml.Marshal(wo.Object)
			t.Errorf("%s differs; the chart's:\n%s\nkustomize's:\n%s", k, gy, wy)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("the chart has %s, which kustomize does not", k)
		}
	}
}

// docHelmCommands reads the helm commands of the block that docs/deploy.md
// marks "TestHelmInstall runs this block": one command a line, a comment
// after "#" dropped, each word an argument.
func docHelmCommands(t *testing.T, file string) [][]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- TestHelmInstall runs this block -->"
	_, after, ok := bytes.Cut(data, []byte(marker))
	if !ok {
		t.Fatalf("%s has no %q", file, marker)
	}
	var cmds [][]string
	sc := bufio.NewScanner(bytes.NewReader(after))
	fences := 0
	for sc.Scan() && fences < 2 {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "```") {
			fences++
			continue
		}
		if fences != 1 {
			continue
		}
		line, _, _ = strings.Cut(line, "#")
		words := strings.Fields(line)
		if len(words) == 0 {
			continue
		}
		if words[0] != "helm" {
			t.Fatalf("%s: the helm block runs %q, not helm", file, line)
		}
		cmds = append(cmds, words[1:])
	}
	if len(cmds) == 0 {
		t.Fatalf("%s: the helm block holds no command", file)
	}
	return cmds
}

// getObject reads obj's namesake from the API server.
func getObject(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if obj.GetNamespace() != "" {
		return dyn.Resource(m.Resource).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
	}
	return dyn.Resource(m.Resource).Get(ctx, obj.GetName(), metav1.GetOptions{})
}
