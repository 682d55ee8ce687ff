package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/tether-csi/tether/test/cluster"
)

const (
	// libraryChartDir is the library chart driver charts include.
	libraryChartDir = "deploy/helm/tether-provisioner"
	// driverChartDir is a driver chart shaped as csi-driver-nfs's that
	// takes its provisioner sidecar from the library.
	driverChartDir = "test/testdata/helm/driver-chart"
)

// driverChart copies the library and the test driver chart into a fresh
// tree, at the same paths (the driver chart names the library by a
// relative file:// path), runs helm dependency build there as a driver
// chart's author does, and returns the driver chart's folder.
func driverChart(t *testing.T) string {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	for _, dir := range []string{libraryChartDir, driverChartDir} {
		if err := os.CopyFS(filepath.Join(tree, dir), os.DirFS(filepath.Join(root, dir))); err != nil {
			t.Fatal(err)
		}
	}
	chart := filepath.Join(tree, driverChartDir)
	helm(t, "", "dependency", "build", chart)
	return chart
}

// provisionerContainer returns the Deployment named name among objs and
// its container named csi-provisioner.
func provisionerContainer(t *testing.T, objs []*unstructured.Unstructured, name string) (corev1.PodSpec, corev1.Container) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != name {
			continue
		}
		var d struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		spec := d.Spec.Template.Spec
		for _, c := range spec.Containers {
			if c.Name == "csi-provisioner" {
				return spec, c
			}
		}
		t.Fatalf("Deployment %s has no csi-provisioner container", name)
	}
	t.Fatalf("the render has no Deployment %s", name)
	return corev1.PodSpec{}, corev1.Container{}
}

// chartAppVersion reads the appVersion of the chart in dir.
func chartAppVersion(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c.AppVersion
}

// rbacExtraRules are the rules of deploy/components/provisioner's
// rbac-extra.yaml ClusterRole, as JSON values.
func rbacExtraRules(t *testing.T, root string) any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "deploy/components/provisioner/rbac-extra.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range decodeBundle(t, data) {
		if o.GetKind() == "ClusterRole" {
			return jsonValue(t, o.Object["rules"])
		}
	}
	t.Fatal("rbac-extra.yaml has no ClusterRole")
	return nil
}

// jsonValue is v after a JSON round trip (numbers and slices as
// encoding/json makes them), for reflect.DeepEqual.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// envRef matches a $(VAR) reference of a container's args.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// runSidecarArgs runs tether's provisioner with the container's args as the
// kubelet would give them ($(VAR) expanded from its env; an env entry from
// the downward API gets a stand-in value) and --version, which exits 0
// only once every flag parsed and every setting passed its checks at start
// (cmd/provisioner's begin). It returns the output and the exit error.
func runSidecarArgs(t *testing.T, c corev1.Container, extra ...string) (string, error) {
	t.Helper()
	env := map[string]string{}
	var environ []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			v = "stand-in-" + strings.ToLower(e.Name)
		}
		env[e.Name] = v
		environ = append(environ, e.Name+"="+v)
	}
	var args []string
	for _, a := range append(slices.Clone(c.Args), extra...) {
		args = append(args, envRef.ReplaceAllStringFunc(a, func(ref string) string {
			if v, ok := env[envRef.FindStringSubmatch(ref)[1]]; ok {
				return v
			}
			return ref
		}))
	}
	path := cluster.BuildBinary(t, "./cmd/provisioner")
	cmd := exec.CommandContext(t.Context(), path, append(args, "--version")...)
	cmd.Env = environ
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHelmLibraryChart renders the test driver chart, which takes its
// provisioner sidecar and tether's extra RBAC from the library chart
// (helm lint --strict of both, then helm template with each set of values),
// and checks the sidecar: tether's image of the library's release, the
// driver's socket volume mounted where --csi-address points, the liveness
// probe on the --http-endpoint port, the user the values give, and args
// that tether's provisioner accepts (it runs them with --version, which
// checks every setting; an unknown flag added makes it fail, so the check
// can fail). The extra RBAC's rules are rbac-extra.yaml's, named after the
// driver and bound to the ServiceAccount the Deployment runs as.
func TestHelmLibraryChart(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := driverChart(t)
	if lint := helm(t, "", "lint", "--strict", filepath.Join(root, libraryChartDir)); !strings.Contains(lint, "0 chart(s) failed") || strings.Contains(lint, "[WARNING]") {
		t.Errorf("helm lint of the library:\n%s", lint)
	}
	wantImage := "ghcr.io/tether-csi/provisioner:" + chartAppVersion(t, filepath.Join(root, libraryChartDir))
	wantRules := rbacExtraRules(t, root)
	for _, tt := range []struct {
		name string
		set  []string
		// secure: the probe asks over HTTPS.
		secure bool
	}{
		{name: "controller"},
		{name: "node mode, secure metrics", set: []string{"tetherProvisioner.nodeDeployment=true", "tetherProvisioner.metricsSecure=true"}, secure: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lint := helm(t, "", append([]string{"lint", "--strict", chart}, setFlags(tt.set)...)...)
			if !strings.Contains(lint, "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(lint, "[WARNING]") || strings.Contains(lint, "[ERROR]") {
				t.Errorf("helm lint:\n%s", lint)
			}
			objs := decodeBundle(t, []byte(helm(t, "", append([]string{"template", "nfs", chart, "--namespace", "kube-system"}, setFlags(tt.set)...)...)))
			pod, c := provisionerContainer(t, objs, "csi-nfs-controller")

			if c.Image != wantImage {
				t.Errorf("image %q, want %q", c.Image, wantImage)
			}
			if c.SecurityContext == nil || c.SecurityContext.RunAsUser == nil || *c.SecurityContext.RunAsUser != 0 {
				t.Errorf("securityContext %+v, want runAsUser 0 (the driver's socket is root's)", c.SecurityContext)
			}
			checkSocketMount(t, pod, c)
			checkProbe(t, c, tt.secure)
			if out, err := runSidecarArgs(t, c); err != nil {
				t.Errorf("tether's provisioner refuses the sidecar's args %q: %v\n%s", c.Args, err, out)
			}
			if _, err := runSidecarArgs(t, c, "--no-such-flag"); err == nil {
				t.Error("tether's provisioner accepted --no-such-flag: the args check cannot fail")
			}

			var role, binding *unstructured.Unstructured
			for _, o := range objs {
				if o.GetName() != "tether-provisioner-extra-nfs" {
					continue
				}
				switch o.GetKind() {
				case "ClusterRole":
					role = o
				case "ClusterRoleBinding":
					binding = o
				}
			}
			if role == nil || binding == nil {
				t.Fatal("no ClusterRole and ClusterRoleBinding tether-provisioner-extra-nfs in the render")
			}
			if got := jsonValue(t, role.Object["rules"]); !reflect.DeepEqual(got, wantRules) {
				t.Errorf("the extra ClusterRole's rules are %v, rbac-extra.yaml's %v", got, wantRules)
			}
			wantSubjects := jsonValue(t, []any{map[string]any{"kind": "ServiceAccount", "name": pod.ServiceAccountName, "namespace": "kube-system"}})
			if got := jsonValue(t, binding.Object["subjects"]); !reflect.DeepEqual(got, wantSubjects) {
				t.Errorf("the extra binding's subjects are %v, want the Deployment's ServiceAccount %v", got, wantSubjects)
			}
		})
	}
}

// checkSocketMount wants c to mount a volume of the pod that is an emptyDir
// (the driver's socket folder, shared with the driver's container) at the
// folder of the address --csi-address gives.
func checkSocketMount(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	var address string
	for _, e := range c.Env {
		if e.Name == "ADDRESS" {
			address = e.Value
		}
	}
	if !slices.Contains(c.Args, "--csi-address=$(ADDRESS)") || address == "" {
		t.Fatalf("args %q with env %v: want --csi-address=$(ADDRESS) and ADDRESS set", c.Args, c.Env)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath != filepath.Dir(address) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return
			}
		}
	}
	t.Errorf("no emptyDir volume of the pod is mounted at %s: mounts %v, volumes %v", filepath.Dir(address), c.VolumeMounts, pod.Volumes)
}

// checkProbe wants c's liveness probe to ask /healthz on the container port
// whose number --http-endpoint gives, over HTTPS when secure.
func checkProbe(t *testing.T, c corev1.Container, secure bool) {
	t.Helper()
	var endpoint string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--http-endpoint="); ok {
			endpoint = v
		}
	}
	p := c.LivenessProbe
	if endpoint == "" || p == nil || p.HTTPGet == nil {
		t.Fatalf("args %q, liveness probe %+v: want --http-endpoint and an httpGet probe", c.Args, p)
	}
	var port *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == p.HTTPGet.Port.String() {
			port = &c.Ports[i]
		}
	}
	if port == nil || endpoint != fmt.Sprintf(":%d", port.ContainerPort) {
		t.Errorf("the probe asks port %s, ports %v, --http-endpoint=%s: want the port it serves", p.HTTPGet.Port.String(), c.Ports, endpoint)
	}
	wantScheme := corev1.URIScheme("")
	if secure {
		wantScheme = corev1.URISchemeHTTPS
	}
	if p.HTTPGet.Path != "/healthz" || p.HTTPGet.Scheme != wantScheme {
		t.Errorf("the probe asks %s %q, want /healthz %q", p.HTTPGet.Path, p.HTTPGet.Scheme, wantScheme)
	}
}

// libraryDriverRules are what the test driver's ServiceAccount must be
// allowed once installed: tether's extra rules (the library's) and one of
// external-provisioner's (the driver chart's own ClusterRole).
var libraryDriverRules = []authorizationv1.ResourceAttributes{
	{Verb: "list", Group: "storage.k8s.io", Resource: "volumeattributesclasses"},
	{Verb: "watch", Group: "storage.k8s.io", Resource: "volumeattributesclasses"},
	{Verb: "get", Group: "storage.k8s.io", Resource: "csidrivers"},
	{Verb: "get", Resource: "namespaces"},
	{Verb: "create", Resource: "persistentvolumes"},
}

// allowedAll says whether the API server's authorizer lets user do every
// one of rules (a SubjectAccessReview each).
func allowedAll(ctx context.Context, c *cluster.Cluster, user string, rules []authorizationv1.ResourceAttributes) (bool, error) {
	for _, attrs := range rules {
		review, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		if !review.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}

// TestHelmLibraryInstall installs the test driver chart (its sidecar and
// extra RBAC from the library) on a real API server twice, as two drivers
// in namespaces of their own (helm install refuses an object another
// release holds, so a name the two shared would fail the second install):
// each Deployment runs tether's provisioner as its csi-provisioner
// container, and each driver's ServiceAccount may do tether's extra rules
// and EP's. Uninstalling the first leaves the second's rights whole and
// takes the first's away. No kubelet runs here: the pods are not started
// (a kind install of a real driver chart is not part of this test).
func TestHelmLibraryInstall(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	chart := driverChart(t)
	type driver struct{ release, namespace, short string }
	drivers := []driver{{"nfs", "driver-nfs", "nfs"}, {"nfs-two", "driver-nfs-two", "nfs-two"}}
	user := func(d driver) string {
		return "system:serviceaccount:" + d.namespace + ":csi-nfs-controller-sa"
	}
	for _, d := range drivers {
		helm(t, c.Kubeconfig, "install", d.release, chart, "--namespace", d.namespace, "--create-namespace",
			"--set", "driver.short="+d.short, "--set", "driver.name="+d.short+".csi.example.com")
	}
	for _, d := range drivers {
		dep, err := c.Client.AppsV1().Deployments(d.namespace).Get(t.Context(), "csi-nfs-controller", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var images []string
		for _, ct := range dep.Spec.Template.Spec.Containers {
			if ct.Name == "csi-provisioner" {
				images = append(images, ct.Image)
			}
		}
		if len(images) != 1 || !strings.HasPrefix(images[0], "ghcr.io/tether-csi/provisioner:") {
			t.Errorf("%s's csi-provisioner images: %q, want tether's", d.release, images)
		}
		cluster.Eventually(t, user(d)+" may do tether's and EP's rules", func(ctx context.Context) (bool, error) {
			return allowedAll(ctx, c, user(d), libraryDriverRules)
		})
	}

	helm(t, c.Kubeconfig, "uninstall", drivers[0].release, "--namespace", drivers[0].namespace, "--wait")
	cluster.Eventually(t, user(drivers[0])+" loses tether's extra rules", func(ctx context.Context) (bool, error) {
		ok, err := allowedAll(ctx, c, user(drivers[0]), libraryDriverRules[2:3])
		return !ok, err
	})
	if ok, err := allowedAll(t.Context(), c, user(drivers[1]), libraryDriverRules); err != nil || !ok {
		t.Errorf("after the first driver's uninstall, %s may do every rule: %v (%v)", user(drivers[1]), ok, err)
	}
}
