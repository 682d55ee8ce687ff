package integration

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tether-csi/tether/test/cluster"
)

// renderChart renders tether's chart as the release rel in tether-system
// with the --set values set.
func renderChart(t *testing.T, rel string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, chartDir)
	lint := helm(t, "", append([]string{"lint", "--strict", chart}, setFlags(set)...)...)
	if !strings.Contains(lint, "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(lint, "[WARNING]") {
		t.Errorf("helm lint:\n%s", lint)
	}
	return decodeBundle(t, []byte(helm(t, "", append([]string{"template", rel, chart, "--namespace", cluster.DeployNamespace}, setFlags(set)...)...)))
}

// find returns the object of kind and name among objs, or fails t.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("the render has no %s %s", kind, name)
	return nil
}

// field reads a nested field of o, or fails t.
func field(t *testing.T, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s %s has no %s (%v)", o.GetKind(), o.GetName(), strings.Join(path, "."), err)
	}
	return v
}

// TestHelmChartValues checks the chart's values that no kustomize tree
// stands for (TestHelmChart compares the others): the conventional keys
// (fullnameOverride, imagePullSecrets, images.*.pullPolicy, the binder's
// serviceAccount, podAnnotations, podLabels, securityContext), Helm's
// release labels on every object, binder.enabled=false, and the
// PodMonitors' labels and HTTPS scraping under metrics.secure.
func TestHelmChartValues(t *testing.T) {
	t.Run("conventional keys", func(t *testing.T) {
		objs := renderChart(t, "acme-release", "fullnameOverride=acme", "imagePullSecrets[0].name=reg",
			"images.binder.pullPolicy=Always", "binder.podAnnotations.a=b", "binder.podLabels.team=x",
			"binder.serviceAccount.create=false", "binder.serviceAccount.name=mine", "binder.securityContext.runAsUser=1234",
			"metrics.secure=true", "monitoring.podMonitor.enabled=true", "monitoring.prometheusRule.enabled=true")
		want := map[string]string{"helm.sh/chart": "tether-0.1.0", "app.kubernetes.io/instance": "acme-release", "app.kubernetes.io/managed-by": "Helm"}
		for _, o := range objs {
			if !strings.HasPrefix(o.GetName(), "acme") {
				t.Errorf("%s %s: not named after fullnameOverride", o.GetKind(), o.GetName())
			}
			for k, v := range want {
				if got := o.GetLabels()[k]; got != v {
					t.Errorf("%s %s: label %s is %q, want %q", o.GetKind(), o.GetName(), k, got, v)
				}
			}
			if o.GetKind() == "ServiceAccount" && o.GetName() == "mine" {
				t.Error("serviceAccount.create=false still makes the ServiceAccount")
			}
		}
		d := find(t, objs, "Deployment", "acme-binder")
		for _, c := range []struct {
			path []string
			want any
		}{
			{[]string{"spec", "template", "spec", "imagePullSecrets"}, []any{map[string]any{"name": "reg"}}},
			{[]string{"spec", "template", "spec", "serviceAccountName"}, "mine"},
			{[]string{"spec", "template", "metadata", "annotations"}, map[string]any{"a": "b"}},
			{[]string{"spec", "template", "metadata", "labels"}, map[string]any{"app.kubernetes.io/name": "tether-binder", "app.kubernetes.io/part-of": "tether", "team": "x"}},
			{[]string{"spec", "selector", "matchLabels"}, map[string]any{"app.kubernetes.io/name": "tether-binder"}},
		} {
			if got := field(t, d, c.path...); !reflect.DeepEqual(jsonValue(t, got), jsonValue(t, c.want)) {
				t.Errorf("the binder's %s is %v, want %v", strings.Join(c.path, "."), got, c.want)
			}
		}
		container := field(t, d, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
		if container["imagePullPolicy"] != "Always" {
			t.Errorf("the binder's imagePullPolicy is %v", container["imagePullPolicy"])
		}
		if sc := container["securityContext"].(map[string]any); jsonValue(t, sc["runAsUser"]) != 1234.0 {
			t.Errorf("the binder's securityContext is %v, want runAsUser 1234", sc)
		}
		for _, name := range []string{"acme-binder", "acme-binder-metrics-auth"} {
			subjects := field(t, find(t, objs, "ClusterRoleBinding", name), "subjects").([]any)
			if subjects[0].(map[string]any)["name"] != "mine" {
				t.Errorf("ClusterRoleBinding %s binds %v, want the ServiceAccount mine", name, subjects)
			}
		}
	})

	t.Run("binder off", func(t *testing.T) {
		objs := renderChart(t, "tether", "binder.enabled=false", "metrics.secure=true",
			"monitoring.podMonitor.enabled=true", "monitoring.prometheusRule.enabled=true")
		for _, o := range objs {
			if strings.Contains(o.GetName(), "binder") {
				t.Errorf("binder.enabled=false renders %s %s", o.GetKind(), o.GetName())
			}
			if o.GetKind() == "FlowSchema" && strings.Contains(jsonString(t, o.Object["spec"]), "tether-binder") {
				t.Errorf("binder.enabled=false: FlowSchema %s names the binder's ServiceAccount", o.GetName())
			}
		}
		find(t, objs, "PodMonitor", "tether-provisioner")
		find(t, objs, "PrometheusRule", "tether-provisioner")
	})

	t.Run("podmonitor labels, secure", func(t *testing.T) {
		objs := renderChart(t, "tether", "metrics.secure=true", "monitoring.podMonitor.enabled=true",
			"monitoring.podMonitor.labels.release=kube-prometheus-stack")
		wantEndpoint := map[string]any{
			"path": "/metrics", "scheme": "https", "tlsConfig": map[string]any{"insecureSkipVerify": true},
			"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "tether-metrics-scraper", "key": "token"}},
		}
		for _, name := range []string{"tether-binder", "tether-provisioner"} {
			pm := find(t, objs, "PodMonitor", name)
			if pm.GetLabels()["release"] != "kube-prometheus-stack" {
				t.Errorf("PodMonitor %s's labels %v lack release=kube-prometheus-stack", name, pm.GetLabels())
			}
			ep := jsonValue(t, field(t, pm, "spec", "podMetricsEndpoints").([]any)[0]).(map[string]any)
			delete(ep, "port")
			if !reflect.DeepEqual(ep, jsonValue(t, wantEndpoint)) {
				t.Errorf("PodMonitor %s's endpoint is %v, want %v", name, ep, wantEndpoint)
			}
		}
		secret := find(t, objs, "Secret", "tether-metrics-scraper")
		if secret.Object["type"] != "kubernetes.io/service-account-token" || secret.GetAnnotations()["kubernetes.io/service-account.name"] != "tether-metrics-scraper" {
			t.Errorf("Secret tether-metrics-scraper is not the scraper's token: %v", secret.Object)
		}
		find(t, objs, "ServiceAccount", "tether-metrics-scraper")
		crb := find(t, objs, "ClusterRoleBinding", "tether-metrics-scraper")
		if field(t, crb, "roleRef", "name") != "tether-metrics-reader" {
			t.Errorf("the scraper is bound to %v, want tether-metrics-reader", field(t, crb, "roleRef"))
		}
	})
}

// jsonString is v as JSON.
func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
