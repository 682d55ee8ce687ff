package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/tether-csi/tether/test/cluster"
)

// The namespace deploy/csi installs into, and the Pod Security labels a
// platform team would set on a namespace holding only the binder.
var restrictedLabels = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
	"pod-security.kubernetes.io/warn":            "restricted",
	"pod-security.kubernetes.io/warn-version":    "latest",
}

// TestDeployBundle puts deploy/csi, rendered as a user renders it
// (`kubectl kustomize`), to a real API server whose tether-system
// namespace enforces Pod Security "restricted":
//   - the whole bundle, and with each optional component, passes a
//     server-side apply dry run (every object valid: the FlowSchemas and
//     PriorityLevelConfiguration, the PodDisruptionBudget, the Services);
//   - applied object by object, the binder's Deployment draws no warning,
//     while the local driver's privileged DaemonSet does (which is why
//     deploy/csi leaves the namespace unlabelled);
//   - a Pod of the binder's template is admitted where "restricted" is
//     enforced, with system-cluster-critical priority; one of the
//     DaemonSet's is refused (the enforcement is real);
//   - applied for real, the API server classifies the requests of tether's
//     ServiceAccounts as the FlowSchemas say: lease requests on the
//     leader-election level, everything else on tether's own, and another
//     ServiceAccount's requests on neither.
func TestDeployBundle(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cluster.DeployNamespace, Labels: restrictedLabels}}
	mustCreate(t, c.Client.CoreV1().Namespaces().Create, ns)

	bundle := kubectl(t, c, nil, "kustomize", filepath.Join(root, "deploy/csi"))
	out := kubectl(t, c, []byte(bundle), "apply", "--server-side", "--dry-run=server", "-f", "-")
	for _, want := range []string{"deployment.apps/tether-binder", "poddisruptionbudget.policy/tether-binder",
		"flowschema.flowcontrol.apiserver.k8s.io/tether", "flowschema.flowcontrol.apiserver.k8s.io/tether-leader-election",
		"prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/tether", "service/tether-binder-metrics",
		"service/tether-provisioner-metrics"} {
		if !strings.Contains(out, want+" serverside-applied (server dry run)") {
			t.Errorf("the dry run did not apply %s:\n%s", want, out)
		}
	}

	// The optional components, over the bundle, checked field by field
	// (--validate=strict) against the Prometheus Operator's own CRDs.
	installPrometheusOperatorCRDs(t, c)
	// kustomize takes relative paths only: a copy of deploy/, and a
	// kustomization beside it.
	tree := t.TempDir()
	if err := os.CopyFS(filepath.Join(tree, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		t.Fatal(err)
	}
	for _, component := range []string{"provisioner-secrets", "podmonitor"} {
		dir := filepath.Join(tree, "with-"+component)
		k := fmt.Sprintf("resources: [../deploy/csi]\ncomponents: [../deploy/csi/components/%s]\n", component)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		rendered := kubectl(t, c, nil, "kustomize", dir)
		kubectl(t, c, []byte(rendered), "apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", "-")
	}
	rules := kubectl(t, c, nil, "kustomize", filepath.Join(tree, "deploy/monitoring/prometheusrule"))
	kubectl(t, c, []byte(rules), "apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", "-")
	// The chart's PodMonitors and PrometheusRules, HTTPS scraping included.
	for _, secure := range []string{"false", "true"} {
		var monitoring []*unstructured.Unstructured
		for _, o := range renderChart(t, "tether", "metrics.secure="+secure, "monitoring.podMonitor.enabled=true",
			"monitoring.podMonitor.labels.release=kube-prometheus-stack", "monitoring.prometheusRule.enabled=true") {
			if o.GetAPIVersion() == "monitoring.coreos.com/v1" {
				monitoring = append(monitoring, o)
			}
		}
		if len(monitoring) != 4 {
			t.Errorf("the chart with metrics.secure=%s renders %d monitoring objects, want 2 PodMonitors and 2 PrometheusRules", secure, len(monitoring))
		}
		var stream bytes.Buffer
		for _, o := range monitoring {
			b, err := json.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			stream.WriteString("\n---\n")
			stream.Write(b)
		}
		kubectl(t, c, stream.Bytes(), "apply", "--server-side", "--dry-run=server", "--validate=strict", "-n", cluster.DeployNamespace, "-f", "-")
	}

	objs := decodeBundle(t, []byte(bundle))
	warnings := &warningLog{}
	cfg := rest.CopyConfig(c.Config)
	cfg.WarningHandler = warnings
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	var binder *appsv1.Deployment
	var plugin *appsv1.DaemonSet
	for _, obj := range objs {
		what := obj.GetKind() + " " + obj.GetName()
		got := warnings.during(func() {
			if err := serverSideApply(ctx, dyn, mapper, obj, true); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		})
		switch {
		case obj.GetKind() == "Deployment" && obj.GetName() == "tether-binder":
			binder = &appsv1.Deployment{}
			fromUnstructured(t, obj, binder)
			for _, w := range got {
				t.Errorf("the binder's Deployment drew a warning: %s", w)
			}
		case obj.GetKind() == "DaemonSet" && obj.GetName() == "tether-local":
			plugin = &appsv1.DaemonSet{}
			fromUnstructured(t, obj, plugin)
			if !anyContains(got, "would violate PodSecurity") {
				t.Errorf("the local driver's DaemonSet meets restricted now (warnings %q): label tether-system pod-security.kubernetes.io/enforce=restricted in deploy/csi/base/namespace.yaml, and drop this check", got)
			}
		}
	}
	if binder == nil || plugin == nil {
		t.Fatalf("the bundle lacks the binder's Deployment or the tether-local DaemonSet")
	}

	// enforce is checked on Pods, not on their controllers.
	pods := c.Client.CoreV1().Pods(cluster.DeployNamespace)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	binderPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tether-binder-x", Labels: binder.Spec.Template.Labels},
		Spec: binder.Spec.Template.Spec}
	got := warnings.during(func() {
		created, err := pods.Create(ctx, binderPod, dryRun)
		switch {
		case err != nil:
			t.Errorf("a pod of the binder's template is refused where restricted is enforced: %v", err)
		case created.Spec.Priority == nil || *created.Spec.Priority < 2000000000:
			t.Errorf("the binder's pod got priority %v, want system-cluster-critical's", created.Spec.Priority)
		}
	})
	for _, w := range got {
		t.Errorf("a pod of the binder's template drew a warning: %s", w)
	}
	pluginPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tether-local-x"}, Spec: plugin.Spec.Template.Spec}
	if _, err := pods.Create(ctx, pluginPod, dryRun); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("a privileged pod was not refused in the restricted namespace (so the binder's admission proves nothing): %v", err)
	}

	// For real now, and the API server's classification of requests.
	for _, obj := range objs {
		if err := serverSideApply(ctx, dyn, mapper, obj, false); err != nil {
			t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	checkFlowSchemas(t, c)
}

// checkFlowSchemas asks the API server, as each of tether's
// ServiceAccounts and as another one, and reads which FlowSchema and
// priority level it put each request on (the X-Kubernetes-PF-* response
// headers).
func checkFlowSchemas(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	uid := func(kind, name string) string {
		var u string
		cluster.Eventually(t, kind+" "+name, func(ctx context.Context) (bool, error) {
			var err error
			var obj metav1.Object
			if kind == "FlowSchema" {
				var fs *flowcontrolv1.FlowSchema
				fs, err = c.Client.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
				if err == nil {
					// Dangling: the level it names does not exist.
					for _, cond := range fs.Status.Conditions {
						if cond.Type == flowcontrolv1.FlowSchemaConditionDangling && cond.Status != flowcontrolv1.ConditionFalse {
							return false, nil
						}
					}
				}
				obj = fs
			} else {
				obj, err = c.Client.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{})
			}
			if err != nil {
				return false, nil
			}
			u = string(obj.GetUID())
			return true, nil
		})
		return u
	}
	tetherFS, leaseFS := uid("FlowSchema", "tether"), uid("FlowSchema", "tether-leader-election")
	tetherPL, leasePL := uid("PriorityLevelConfiguration", "tether"), uid("PriorityLevelConfiguration", "leader-election")

	// For the failure messages: names by UID.
	names := map[string]string{}
	if list, err := c.Client.FlowcontrolV1().FlowSchemas().List(t.Context(), metav1.ListOptions{}); err == nil {
		for _, fs := range list.Items {
			names[string(fs.UID)] = "FlowSchema " + fs.Name
		}
	}
	if list, err := c.Client.FlowcontrolV1().PriorityLevelConfigurations().List(t.Context(), metav1.ListOptions{}); err == nil {
		for _, pl := range list.Items {
			names[string(pl.UID)] = "level " + pl.Name
		}
	}

	mustCreate(t, c.Client.CoreV1().ServiceAccounts("default").Create, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})
	type want struct{ fs, pl string }
	for _, tt := range []struct {
		namespace, sa, path string
		want                want
		not                 bool
	}{
		{cluster.DeployNamespace, "tether-binder", "/apis/coordination.k8s.io/v1/namespaces/tether-system/leases/tether-binder", want{leaseFS, leasePL}, false},
		{cluster.DeployNamespace, "tether-binder", "/api/v1/persistentvolumeclaims", want{tetherFS, tetherPL}, false},
		{cluster.DeployNamespace, "tether-provisioner", "/apis/coordination.k8s.io/v1/namespaces/tether-system/leases/example-csi-driver", want{leaseFS, leasePL}, false},
		{cluster.DeployNamespace, "tether-provisioner", "/api/v1/persistentvolumes", want{tetherFS, tetherPL}, false},
		{"default", "tenant", "/api/v1/namespaces/default/persistentvolumeclaims", want{tetherFS, tetherPL}, true},
	} {
		_, cfg := c.ServiceAccountKubeconfig(t, tt.namespace, tt.sa)
		httpClient, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var fs, pl string
		var code int
		// The API server takes new FlowSchemas up within a second or so.
		err = pollFor(t, func(ctx context.Context) bool {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+tt.path, nil)
			resp, err := httpClient.Do(req)
			if err != nil {
				return false
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			code = resp.StatusCode
			fs, pl = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
			return (fs == tt.want.fs && pl == tt.want.pl) != tt.not
		})
		switch {
		case err != nil && tt.not:
			t.Errorf("%s/%s GET %s went to tether's FlowSchema, which should hold tether's ServiceAccounts only", tt.namespace, tt.sa, tt.path)
		case err != nil:
			t.Errorf("%s/%s GET %s (HTTP %d): FlowSchema %s, priority level %s; want %s and %s", tt.namespace, tt.sa, tt.path, code,
				names[fs], names[pl], names[tt.want.fs], names[tt.want.pl])
		case !tt.not && code == http.StatusForbidden:
			t.Errorf("%s/%s GET %s: forbidden", tt.namespace, tt.sa, tt.path)
		}
	}
}

// pollFor polls cond for at most ten seconds.
func pollFor(t *testing.T, cond func(ctx context.Context) bool) error {
	ctx, cancel := context.WithTimeout(t.Context(), pollTimeout/6)
	defer cancel()
	for {
		if cond(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// decodeBundle splits a rendered YAML stream into objects.
func decodeBundle(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

func fromUnstructured(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		t.Fatal(err)
	}
}

// serverSideApply applies one object as kubectl apply --server-side does
// (strict field validation), as a dry run or for real.
func serverSideApply(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "tether-test", Force: &force, FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	_, err = r.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	return err
}

// warningLog collects the API server's warnings (the Warning header).
type warningLog struct {
	mu   sync.Mutex
	list []string
}

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// during returns the warnings received while f ran.
func (w *warningLog) during(f func()) []string {
	w.mu.Lock()
	start := len(w.list)
	w.mu.Unlock()
	f()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list[start:]...)
}

func anyContains(list []string, s string) bool {
	for _, x := range list {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

// installPrometheusOperatorCRDs installs the Prometheus Operator's own
// PodMonitor and PrometheusRule CRDs and waits for their API.
func installPrometheusOperatorCRDs(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	crds, err := cluster.PrometheusOperatorCRDs()
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, crds, "apply", "--server-side", "-f", "-")
	cluster.Eventually(t, "the PodMonitor and PrometheusRule APIs served", func(ctx context.Context) (bool, error) {
		l, err := c.Client.Discovery().ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
		return err == nil && len(l.APIResources) >= 2, nil
	})
}
