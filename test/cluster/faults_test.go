package cluster

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestResourceOf(t *testing.T) {
	for path, want := range map[string][3]string{
		"/api/v1/namespaces/default/persistentvolumeclaims/c-1/status":  {"", "persistentvolumeclaims/status", "c-1"},
		"/api/v1/namespaces/default/persistentvolumeclaims":             {"", "persistentvolumeclaims", ""},
		"/api/v1/persistentvolumes/pvc-1":                               {"", "persistentvolumes", "pvc-1"},
		"/apis/coordination.k8s.io/v1/namespaces/default/leases/binder": {"coordination.k8s.io", "leases", "binder"},
		"/apis/storage.k8s.io/v1/csistoragecapacities":                  {"storage.k8s.io", "csistoragecapacities", ""},
	} {
		gr, name, ok := resourceOf(path)
		if !ok || gr.Group != want[0] || gr.Resource != want[1] || name != want[2] {
			t.Errorf("%s: got %v %q %v, want %v", path, gr, name, ok, want)
		}
	}
	if _, _, ok := resourceOf("/healthz"); ok {
		t.Error("/healthz parsed as a resource")
	}
}

// TestFaultProxy fails every write: client-go must see a Conflict or an
// InternalError for each, the API server must have seen exactly the writes
// failed after the write, and reads and spared resources pass.
func TestFaultProxy(t *testing.T) {
	var puts, gets, leases atomic.Int64
	auth := atomic.Value{}
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/default/leases/l":
			leases.Add(1)
			_ = json.NewEncoder(w).Encode(&coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
				ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default"}})
			return
		case r.Method == http.MethodPut:
			puts.Add(1)
		case r.Method == http.MethodGet:
			gets.Add(1)
		}
		_ = json.NewEncoder(w).Encode(&corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}})
	}))
	defer upstream.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw})
	c := &Cluster{Config: &rest.Config{Host: upstream.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, Dir: t.TempDir()}
	p := StartFaultProxy(t, c, FaultOptions{Fraction: 1, Seed: 7})
	// Through a kubeconfig, as the components do.
	path := p.Kubeconfig(t, c, "someone", &rest.Config{BearerToken: "secret"})
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	cs := kubernetes.NewForConfigOrDie(cfg)

	ctx := t.Context()
	if _, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "c", metav1.GetOptions{}); err != nil {
		t.Fatalf("a read failed: %v", err)
	}
	if got := auth.Load(); got != "Bearer secret" {
		t.Errorf("the API server saw Authorization %q", got)
	}
	const n = 60
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}}
	for range n {
		_, err := cs.CoreV1().PersistentVolumeClaims("default").Update(ctx, claim, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) && !apierrors.IsInternalError(err) {
			t.Fatalf("update: got %v, want a conflict or an internal error", err)
		}
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default"}}
	if _, err := cs.CoordinationV1().Leases("default").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Errorf("a lease update was failed: %v", err)
	}
	f := p.Counts()
	if f.Writes != n || f.Total("") != n {
		t.Errorf("counts %s, want %d writes all failed", f, n)
	}
	if f.Total(FaultErrorAfter) != puts.Load() {
		t.Errorf("%d writes reached the API server, %d failed after the write", puts.Load(), f.Total(FaultErrorAfter))
	}
	for _, kind := range []string{FaultError, FaultConflict, FaultErrorAfter} {
		if f.Total(kind) == 0 {
			t.Errorf("no fault of kind %s in %d", kind, n)
		}
	}
	if leases.Load() != 1 || gets.Load() != 1 {
		t.Errorf("the API server saw %d lease updates and %d reads, want 1 and 1", leases.Load(), gets.Load())
	}
	t.Log(f)
}
