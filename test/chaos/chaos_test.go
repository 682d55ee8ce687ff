// Package chaos runs tether under load and faults and checks that it loses
// nothing: `make chaos` (1000 claims) and a short run in `make test`.
package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// config: CHAOS_CLAIMS (default 40), CHAOS_SEED (default 1), CHAOS_DURATION
// (the fault phase, default 20s), CHAOS_CONVERGE (the deadline to settle
// after it, default 5m), CHAOS_FAULTS (the fraction of the components' API
// writes that the fault proxy fails, default 0.05; 0 takes the proxy away).
type config struct {
	claims             int
	seed               uint64
	duration, converge time.Duration
	faults             float64
}

func load(t *testing.T) config {
	get := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	claims, err1 := strconv.Atoi(get("CHAOS_CLAIMS", "40"))
	seed, err2 := strconv.ParseUint(get("CHAOS_SEED", "1"), 10, 64)
	duration, err3 := time.ParseDuration(get("CHAOS_DURATION", "20s"))
	converge, err4 := time.ParseDuration(get("CHAOS_CONVERGE", "5m"))
	faults, err5 := strconv.ParseFloat(get("CHAOS_FAULTS", "0.05"), 64)
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if err != nil {
			t.Fatalf("chaos settings: %v", err)
		}
	}
	if faults < 0 || faults > 1 {
		t.Fatalf("chaos settings: CHAOS_FAULTS %v is not a fraction", faults)
	}
	return config{claims: claims, seed: seed, duration: duration, converge: converge, faults: faults}
}

// Counters of what the run did.
type counters struct {
	created, deleted, kills atomic.Int64
	mu                      sync.Mutex
	byKind, deletedByKind   map[string]int
}

func (n *counters) made(kind string) {
	n.created.Add(1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byKind == nil {
		n.byKind = map[string]int{}
	}
	n.byKind[kind]++
}

func (n *counters) gone(kind string) {
	n.deleted.Add(1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.deletedByKind == nil {
		n.deletedByKind = map[string]int{}
	}
	n.deletedByKind[kind]++
}

// kinds is "kind made/deleted, …".
func (n *counters) kinds() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d/%d", k, n.byKind[k], n.deletedByKind[k]))
	}
	return strings.Join(parts, ", ")
}

// TestChaos creates claims of every kind while it deletes some of them at
// random moments, SIGKILLs the binder leader, a provisioner leader and a
// driver at random intervals, and (with CHAOS_FAULTS) fails a fraction of
// the components' API writes; then it lets the system settle and checks
// that nothing was lost, leaked or left stuck.
func TestChaos(t *testing.T) {
	cfg := load(t)
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x5eed))
	c := cluster.Start(t, cluster.Options{Scheduler: true, Controllers: []string{
		"persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller"},
		APIServerArgs: map[string][]string{"max-requests-inflight": {"1000"}, "max-mutating-requests-inflight": {"500"}}})
	// Our components reach the API server through the fault proxy, with a
	// cluster-admin token; the test, KCM and kube-scheduler go direct.
	kubeconfig, adminToken := c.AdminTokenKubeconfig(t)
	var proxy *cluster.FaultProxy
	if cfg.faults > 0 {
		proxy = cluster.StartFaultProxy(t, c, cluster.FaultOptions{Fraction: cfg.faults, Seed: cfg.seed})
		kubeconfig = proxy.Kubeconfig(t, c, "tether-admin", adminToken)
	}
	stack := cluster.StartLocalStack(t, c, cluster.StackOptions{NodeCapacity: "100Ti", BinderReplicas: 2, ProvisionerReplicas: 2,
		BinderKubeconfig: kubeconfig, ProvisionerKubeconfig: kubeconfig, DriverArgs: []string{"--slow-create=300ms"}})
	w := &world{t: t, c: c, stack: stack, rng: rng, mu: &sync.Mutex{}, uids: map[string]bool{}, kindOf: map[int]string{},
		pvs: map[string]seenPV{}}
	w.mock = startMock(t, c, kubeconfig)
	w.classes()
	w.watchPVs()

	start := time.Now()
	ctx, stop := context.WithTimeout(t.Context(), cfg.duration)
	var wg sync.WaitGroup
	var n counters
	wg.Go(func() { w.killer(ctx, &n) })
	interval := cfg.duration * 7 / 10 / time.Duration(max(cfg.claims, 1))
	for i := range cfg.claims {
		kind := w.create(i, &n)
		if p := deleteChance[kind]; p > 0 && w.chance(p) {
			delay := time.Duration(w.intn(3000)) * time.Millisecond
			wg.Go(func() {
				select {
				case <-time.After(delay):
				case <-t.Context().Done():
					return
				}
				w.delete(i, &n)
			})
		}
		select {
		case <-time.After(interval):
		case <-ctx.Done():
		}
	}
	<-ctx.Done()
	stop()
	wg.Wait()
	w.restartAll()
	faults := time.Since(start)

	// The proxy stays on: the system must settle on a flaky API too.
	settled := time.Now()
	stuck := w.converge(cfg.converge)
	took := time.Since(settled).Round(100 * time.Millisecond)
	report := w.check(stuck)
	faultLine := "fault proxy off"
	if proxy != nil {
		faultLine = "API " + proxy.Counts().String()
	}
	t.Logf("chaos: seed %d, %d claims created, %d deleted (by kind, made/deleted: %s), %d kills in %s; %s; settled in %s; %s",
		cfg.seed, n.created.Load(), n.deleted.Load(), n.kinds(), n.kills.Load(), faults.Round(time.Second),
		faultLine, took, report)
	fmt.Printf("chaos: seed=%d claims=%d deletes=%d (made/deleted: %s) kills=%d converge=%s\nchaos: %s\nchaos: %s\n", cfg.seed,
		n.created.Load(), n.deleted.Load(), n.kinds(), n.kills.Load(), took, faultLine, report)
}

// The class of each kind of claim.
var classOf = map[string]string{"immediate": "immediate", "wffc": "wffc", "static": "manual", "prebound": "manual",
	"retain": "retain", "source": "clone", "clone": "clone"}

// deleteChance is the chance that a claim of a kind is deleted at a random
// moment. Clone sources are kept, so that a clone never waits for ever on
// a source that is gone (a user's error, not ours); Retain claims are
// deleted more often, to have many volumes to keep.
var deleteChance = map[string]float64{"immediate": 0.2, "wffc": 0.2, "static": 0.2, "prebound": 0.2,
	"retain": 0.5, "source": 0, "clone": 0.2}

func (w *world) classes() {
	t := w.t
	create := func(name, provisioner string, mode storagev1.VolumeBindingMode, policy corev1.PersistentVolumeReclaimPolicy) {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner,
			VolumeBindingMode: &mode, ReclaimPolicy: &policy}
		if _, err := w.c.Client.StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("wffc", cluster.LocalDriver, storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete)
	create("immediate", cluster.LocalDriver, storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete)
	create("retain", cluster.LocalDriver, storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimRetain)
	create("clone", mockDriver, storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete)
	create("manual", "kubernetes.io/no-provisioner", storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimRetain)
}
