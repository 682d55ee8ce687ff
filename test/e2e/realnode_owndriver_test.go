package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/tether-csi/tether/test/cluster"
)

// ownHarness is what only this harness adds over the recipe, as
// cluster.DeployCSI does for deploy/csi: the images as the nodes have them,
// and the API server's address for the pods that talk to it (no
// kube-proxy serves the kubernetes Service here).
const ownHarness = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../own]
images:
  - {name: ghcr.io/tether-csi/provisioner, newName: %[1]s, newTag: e2e}
  - {name: ghcr.io/tether-csi/binder, newName: %[2]s, newTag: e2e}
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: ` + cluster.OwnDriverDeploy + `, namespace: ` + cluster.OwnDriverNamespace + `}
      spec: {template: {spec: {containers: [{name: csi-provisioner, env: [%[3]s]}]}}}
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: tether-binder, namespace: tether-system}
      spec: {template: {spec: {containers: [{name: binder, env: [%[3]s]}]}}}
`

// ownDriverTree writes the recipe's tree (cluster.WriteOwnDriverTree) with
// ownHarness for a cluster whose API server is apiHost, and returns its
// folder.
func ownDriverTree(t *testing.T, apiHost string) string {
	t.Helper()
	dir := t.TempDir()
	harness := ""
	if apiHost != "" {
		harness = fmt.Sprintf(ownHarness, untagged(cluster.ProvisionerImage), untagged(cluster.BinderImage), apiServerEnv(t, apiHost))
	}
	cluster.WriteOwnDriverTree(t, dir, harness)
	return dir
}

// untagged is an image reference of the nodes without its e2e tag.
func untagged(ref string) string { return strings.TrimSuffix(ref, ":e2e") }

// apiServerEnv is the env entries (YAML flow style) that point a pod at the
// API server apiHost: no kube-proxy serves the kubernetes Service here.
func apiServerEnv(t *testing.T, apiHost string) string {
	t.Helper()
	api, err := url.Parse(apiHost)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("{name: KUBERNETES_SERVICE_HOST, value: %q}, {name: KUBERNETES_SERVICE_PORT, value: %q}", api.Hostname(), api.Port())
}

func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	kubectl, err := cluster.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), kubectl, "kustomize", dir).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, exit.Stderr)
		}
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return out
}

// decodeAll decodes a YAML stream into typed objects.
func decodeAll(t *testing.T, data []byte) []runtime.Object {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode %s: %v", doc, err)
		}
		out = append(out, obj)
	}
}

func findDeployment(objs []runtime.Object, namespace, name string) *appsv1.Deployment {
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && d.Namespace == namespace && d.Name == name {
			return d
		}
	}
	return nil
}

func findContainer(d *appsv1.Deployment, name string) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

// TestOwnDriverComponent renders the recipe (no cluster) and checks what
// the components do to a driver: only the csi-provisioner container's image
// changes, to tether's of the release deploy/csi names (its arguments, env,
// mounts, ports and probe stay EP's), no other
// workload gains a container, the binder comes without deploy/csi's own
// provisioner, and the extra RBAC plus EP v6.4.0's ClusterRole grant every
// rule deploy/csi gives tether's provisioner but the opt-in secrets.
func TestOwnDriverComponent(t *testing.T) {
	dir := ownDriverTree(t, "")
	before := decodeAll(t, kustomize(t, filepath.Join(dir, "own", "driver")))
	after := decodeAll(t, kustomize(t, filepath.Join(dir, "own")))

	// The components name the release deploy/csi names.
	release := ""
	for _, o := range decodeAll(t, kustomize(t, filepath.Join(dir, "deploy", "csi"))) {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			for _, c := range ds.Spec.Template.Spec.Containers {
				if name, tag, ok := strings.Cut(c.Image, ":"); ok && name == "ghcr.io/tether-csi/provisioner" {
					release = tag
				}
			}
		}
	}
	if release == "" || release == "latest" {
		t.Fatalf("deploy/csi's provisioner image has tag %q", release)
	}

	// So do the Helm values examples.
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	values, _ := filepath.Glob(filepath.Join(root, "examples", "helm", "values-*.yaml"))
	if len(values) == 0 {
		t.Error("no examples/helm/values-*.yaml")
	}
	for _, file := range values {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		tags := regexp.MustCompile(`(?m)^\s+tag:\s*(\S+)`).FindAllSubmatch(data, -1)
		if len(tags) == 0 {
			t.Errorf("%s sets no image tag", file)
		}
		for _, m := range tags {
			if string(m[1]) != release {
				t.Errorf("%s: tag %s, deploy/csi's release is %s", file, m[1], release)
			}
		}
	}

	was := findDeployment(before, cluster.OwnDriverNamespace, cluster.OwnDriverDeploy)
	now := findDeployment(after, cluster.OwnDriverNamespace, cluster.OwnDriverDeploy)
	if was == nil || now == nil {
		t.Fatalf("the driver's Deployment is missing (before %v, after %v)", was != nil, now != nil)
	}
	if len(now.Spec.Template.Spec.Containers) != len(was.Spec.Template.Spec.Containers) {
		t.Errorf("containers %d, were %d", len(now.Spec.Template.Spec.Containers), len(was.Spec.Template.Spec.Containers))
	}
	for _, c := range was.Spec.Template.Spec.Containers {
		got := findContainer(now, c.Name)
		if got == nil {
			t.Errorf("container %s is gone", c.Name)
			continue
		}
		want := c.DeepCopy()
		if c.Name == "csi-provisioner" {
			want.Image = "ghcr.io/tether-csi/provisioner:" + release
			// The recipe's patch for a pod without runAsUser.
			want.SecurityContext = &corev1.SecurityContext{RunAsUser: new(int64)}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("container %s:\n got %+v\nwant %+v", c.Name, got, want)
		}
	}
	for _, o := range after {
		if d, ok := o.(*appsv1.Deployment); ok && d.Name != cluster.OwnDriverDeploy {
			if names := containerNames(d); !slices.Equal(names, []string{"binder"}) || d.Name != "tether-binder" {
				t.Errorf("the recipe adds Deployment %s/%s with containers %v", d.Namespace, d.Name, names)
			}
		}
		if m, err := metaOf(o); err == nil && strings.HasPrefix(m.GetName(), "tether-provisioner") && m.GetName() != cluster.OwnExtraRBAC {
			t.Errorf("deploy/csi's own provisioner object %T %s came with the binder", o, m.GetName())
		}
	}
	if d := findDeployment(after, "tether-system", "tether-binder"); d == nil {
		t.Error("no binder Deployment")
	} else if c := findContainer(d, "binder"); c == nil || c.Image != "ghcr.io/tether-csi/binder:"+release {
		t.Errorf("the binder's container %+v: not ghcr.io/tether-csi/binder:%s", c, release)
	}

	// The extra RBAC: bound to the driver's ServiceAccount, and with EP's
	// ClusterRole it covers deploy/csi's provisioner ClusterRole.
	var extra *rbacv1.ClusterRole
	for _, o := range after {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			if o.Name == cluster.OwnExtraRBAC {
				extra = o
			}
		case *rbacv1.ClusterRoleBinding:
			if o.Name == cluster.OwnExtraRBAC {
				want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "csi-provisioner", Namespace: cluster.OwnDriverNamespace}}
				if !reflect.DeepEqual(o.Subjects, want) || o.RoleRef.Name != cluster.OwnExtraRBAC {
					t.Errorf("the extra binding: subjects %+v, role %s", o.Subjects, o.RoleRef.Name)
				}
			}
		}
	}
	if extra == nil {
		t.Fatalf("no %s ClusterRole", cluster.OwnExtraRBAC)
	}
	read := func(path string) []runtime.Object {
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		return decodeAll(t, data)
	}
	tetherCR, tetherRole := roles(read("deploy/csi/base/rbac-provisioner.yaml"), "tether-provisioner", "tether-provisioner")
	epCR, epRole := roles(read("test/testdata/ep-v6.4.0/rbac.yaml"), "external-provisioner-runner", "external-provisioner-cfg")
	if tetherCR == nil || tetherRole == nil || epCR == nil || epRole == nil {
		t.Fatal("deploy/csi's or EP's provisioner roles not found")
	}
	optIn := map[string]bool{"/secrets/get": true} // EP ships it commented out
	granted := grants(append(slices.Clone(epCR.Rules), extra.Rules...))
	for g := range grants(tetherCR.Rules) {
		if !granted[g] && !optIn[g] {
			t.Errorf("deploy/csi grants tether's provisioner %s; neither EP's ClusterRole nor rbac-extra.yaml does", g)
		}
	}
	needed := grants(tetherCR.Rules)
	epGrants := grants(epCR.Rules)
	for g := range grants(extra.Rules) {
		if !needed[g] {
			t.Errorf("rbac-extra.yaml grants %s, which deploy/csi does not give tether's provisioner", g)
		} else if epGrants[g] {
			t.Errorf("rbac-extra.yaml grants %s, which EP's ClusterRole has already", g)
		}
	}
	// docs/own-driver.md's check lists exactly what the provisioner asks
	// for cluster-wide.
	listed := map[string]bool{}
	for _, a := range docCanIList(t) {
		listed[a.Group+"/"+a.Resource+"/"+a.Verb] = true
	}
	for g := range needed {
		if !listed[g] && !optIn[g] {
			t.Errorf("docs/own-driver.md's RBAC check lacks %s", g)
		}
	}
	for g := range listed {
		if !needed[g] {
			t.Errorf("docs/own-driver.md's RBAC check lists %s, which deploy/csi does not give tether's provisioner", g)
		}
	}
	epRoleGrants := grants(epRole.Rules)
	for g := range grants(tetherRole.Rules) {
		if !epRoleGrants[g] {
			t.Errorf("deploy/csi's provisioner Role grants %s in its namespace; EP's Role does not", g)
		}
	}
}

func containerNames(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

func metaOf(o runtime.Object) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", o)
	}
	return m, nil
}

// roles picks a ClusterRole and a Role by name.
func roles(objs []runtime.Object, clusterRole, role string) (*rbacv1.ClusterRole, *rbacv1.Role) {
	var cr *rbacv1.ClusterRole
	var r *rbacv1.Role
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			if o.Name == clusterRole {
				cr = o
			}
		case *rbacv1.Role:
			if o.Name == role {
				r = o
			}
		}
	}
	return cr, r
}

// grants expands rules into "group/resource/verb" (no wildcards: none of
// these roles has one).
func grants(rules []rbacv1.PolicyRule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[g+"/"+res+"/"+v] = true
				}
			}
		}
	}
	return out
}

// docCanIList is the list of docs/own-driver.md's RBAC check ("verb
// resource.group" lines of its here-document).
func docCanIList(t *testing.T) []authv1.ResourceAttributes {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "docs", "own-driver.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<<'EOF'\n")
	block, _, ok2 := strings.Cut(rest, "\nEOF\n")
	if !ok || !ok2 {
		t.Fatal("docs/own-driver.md has no RBAC check (a here-document <<'EOF')")
	}
	var out []authv1.ResourceAttributes
	for _, line := range strings.Split(block, "\n") {
		verb, res, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			t.Fatalf("docs/own-driver.md's RBAC check: line %q", line)
		}
		resource, group, _ := strings.Cut(res, ".")
		out = append(out, authv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource})
	}
	return out
}

// TestOwnDriverRecipe runs docs/own-driver.md's recipe on a real kubelet
// node: the driver's Deployment (mock driver and EP's sidecar layout) and
// EP's RBAC, patched by deploy/components/provisioner and binder through
// kubectl kustomize, are applied; a claim of the driver's Immediate class is
// provisioned by tether's provisioner in the driver's pod and bound by
// tether's binder (kube-controller-manager runs without its PV binder), then
// deleted: its PV goes, and the mock driver logged the DeleteVolume of its
// volume.
func TestOwnDriverRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a kubelet node")
	}
	start := time.Now()
	e := startReal(t)
	c := e.c
	images := append(cluster.NodeImages(t), cluster.MockDriverNodeImage(t))
	images = append(images, cluster.UpstreamImages(t)...) // EP's, for the switch back
	e.nodes["node-1"] = c.StartRealNode(t, "node-1", images)
	t.Logf("control plane and a real node Ready in %s", time.Since(start).Round(100*time.Millisecond))

	dir := twoDriversTree(t, c.Config.Host)
	manifests := c.Kubectl(t, nil, "kustomize", filepath.Join(dir, "harness"))
	applied := time.Now()
	c.Kubectl(t, manifests, "apply", "-f", "-")
	apps := c.Client.AppsV1()
	cluster.Eventually(t, "the driver's controller and the binder ready", func(ctx context.Context) (bool, error) {
		for _, d := range []struct{ ns, name string }{{cluster.OwnDriverNamespace, cluster.OwnDriverDeploy}, {"tether-system", "tether-binder"}} {
			got, err := apps.Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
			if err != nil || got.Spec.Replicas == nil || got.Status.ReadyReplicas != *got.Spec.Replicas {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("driver controller 1/1 and binder 2/2 ready %s after apply", time.Since(applied).Round(100*time.Millisecond))
	kcm, err := os.ReadFile(filepath.Join(c.Dir, "kube-controller-manager.log"))
	if err != nil || !strings.Contains(string(kcm), `"Warning: controller is disabled" controller="persistentvolume-binder-controller"`) {
		t.Errorf("kube-controller-manager did not log its PV binder as disabled (%v)", err)
	}
	// docs/own-driver.md's RBAC check passes for the driver's
	// ServiceAccount: EP's role and the extra one.
	rbacCheck(t, c, "system:serviceaccount:"+cluster.OwnDriverNamespace+":csi-provisioner")
	pod := ownDriverPod(t, c)
	if img := findPodContainer(pod, "csi-provisioner").Image; img != cluster.ProvisionerImage {
		t.Fatalf("the csi-provisioner container runs %s, not tether's provisioner", img)
	}

	pvcs := c.Client.CoreV1().PersistentVolumeClaims("default")
	class := cluster.OwnDriverClass
	claimed := time.Now()
	if _, err := pvcs.Create(t.Context(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := c.WaitClaimBound(t, "default", "own")
	t.Logf("claim provisioned and bound in %s", time.Since(claimed).Round(100*time.Millisecond))
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(t.Context(), pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != cluster.OwnDriverName || pv.Annotations["pv.kubernetes.io/provisioned-by"] != cluster.OwnDriverName {
		t.Errorf("PV %s: csi %+v, provisioned-by %q", pv.Name, pv.Spec.CSI, pv.Annotations["pv.kubernetes.io/provisioned-by"])
	}
	if pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" || pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != cluster.OwnDriverName {
		t.Errorf("claim annotations %v: not bound and marked for the driver by a binder", pvc.Annotations)
	}
	if pv.Spec.CSI == nil {
		t.FailNow()
	}
	handle := pv.Spec.CSI.VolumeHandle
	// The sidecar's arguments were kept: --extra-create-metadata reached
	// the driver.
	create := mockCalls(t, c, pod.Name, "/csi.v1.Controller/CreateVolume")
	if len(create) == 0 || !strings.Contains(string(create[0].Request), `"csi.storage.k8s.io/pvc/name":"own"`) {
		t.Errorf("CreateVolume calls %s: none with the claim's name (--extra-create-metadata)", create)
	}

	deleted := time.Now()
	if err := pvcs.Delete(t.Context(), "own", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster.WaitGone(t, "PV "+pv.Name, func(ctx context.Context) error {
		_, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err
	})
	t.Logf("claim deleted, PV gone in %s", time.Since(deleted).Round(100*time.Millisecond))
	var ok []mockCall
	for _, call := range mockCalls(t, c, pod.Name, "/csi.v1.Controller/DeleteVolume") {
		var req struct {
			VolumeID string `json:"volume_id"`
		}
		if json.Unmarshal(call.Request, &req) == nil && req.VolumeID == handle && call.Error == "" {
			ok = append(ok, call)
		}
	}
	if len(ok) == 0 {
		t.Errorf("the mock driver logged no successful DeleteVolume of %s", handle)
	} else {
		t.Logf("the mock driver deleted %s (%d DeleteVolume call(s))", handle, len(ok))
	}

	log := podLogOf(t, c, cluster.OwnDriverNamespace, pod.Name, "csi-provisioner")
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("tether's provisioner was refused by RBAC: %s", line)
		}
	}
	if !strings.Contains(log, "--feature-gates") {
		t.Errorf("tether's provisioner did not log EP's --feature-gates as accepted and ignored")
	}
	pod = ownDriverPod(t, c)
	for _, st := range pod.Status.ContainerStatuses {
		if st.RestartCount > 0 {
			t.Errorf("container %s restarted %d times (last state %+v)", st.Name, st.RestartCount, st.LastTerminationState.Terminated)
		}
	}
	// A second driver beside the first (docs/own-driver.md, "Two drivers").
	secondDriverOnNode(t, c, dir)
	// The switch back to EP, with the in-cluster hand-back.
	handBackControllerMode(t, c)
	c.LogRestarts(t)
	t.Logf("own-driver recipe: %s in all", time.Since(start).Round(time.Second))
}

// ownDriverPod is the driver controller's running pod.
func ownDriverPod(t *testing.T, c *cluster.Cluster) *corev1.Pod {
	t.Helper()
	var out *corev1.Pod
	cluster.Eventually(t, "the driver's controller pod", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(cluster.OwnDriverNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + cluster.OwnDriverDeploy})
		if err != nil {
			return false, nil
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				out = p
				return true, nil
			}
		}
		return false, nil
	})
	return out
}

func findPodContainer(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return &p.Spec.Containers[i]
		}
	}
	return &corev1.Container{}
}

func podLogOf(t *testing.T, c *cluster.Cluster, namespace, pod, container string) string {
	t.Helper()
	data, err := c.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("log of %s/%s: %v", pod, container, err)
	}
	return string(data)
}

// mockCall is one gRPC call the csi-test mock driver logged (at -v=3 or
// more it logs each as "gRPCCall: {json}").
type mockCall struct {
	Method  string
	Request json.RawMessage
	Error   string
}

func (m mockCall) String() string { return m.Method + " " + string(m.Request) + " " + m.Error }

// mockCalls lists the calls of one method in the mock driver's log.
func mockCalls(t *testing.T, c *cluster.Cluster, pod, method string) []mockCall {
	t.Helper()
	var out []mockCall
	for _, line := range strings.Split(podLogOf(t, c, cluster.OwnDriverNamespace, pod, "mock-driver"), "\n") {
		_, msg, ok := strings.Cut(line, "gRPCCall: ")
		if !ok {
			continue
		}
		var call mockCall
		if err := json.Unmarshal([]byte(strings.TrimSpace(msg)), &call); err == nil && call.Method == method {
			out = append(out, call)
		}
	}
	return out
}
