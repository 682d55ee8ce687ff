// Package chaos runs tether under load and faults and checks that it loses
// nothing: `make chaos` (1000 claims) and a short run in `make test`.
package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
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
// after it, default 5m).
type config struct {
	claims             int
	seed               uint64
	duration, converge time.Duration
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
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			t.Fatalf("chaos settings: %v", err)
		}
	}
	return config{claims: claims, seed: seed, duration: duration, converge: converge}
}

// Counters of what the run did.
type counters struct {
	created, deleted, kills atomic.Int64
}

// TestChaos creates claims of every kind while it deletes a fifth of them
// at random moments and SIGKILLs the binder leader, a provisioner leader
// and a driver at random intervals; then it lets the system settle and
// checks that nothing was lost or leaked.
func TestChaos(t *testing.T) {
	cfg := load(t)
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x5eed))
	c := cluster.Start(t, cluster.Options{Scheduler: true, Controllers: []string{
		"persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller"},
		APIServerArgs: map[string][]string{"max-requests-inflight": {"1000"}, "max-mutating-requests-inflight": {"500"}}})
	stack := cluster.StartLocalStack(t, c, cluster.StackOptions{NodeCapacity: "100Ti", BinderReplicas: 2, ProvisionerReplicas: 2,
		DriverArgs: []string{"--slow-create=300ms"}})
	w := &world{t: t, c: c, stack: stack, rng: rng, mu: &sync.Mutex{}, uids: map[string]bool{}}
	w.classes()

	start := time.Now()
	ctx, stop := context.WithTimeout(t.Context(), cfg.duration)
	var wg sync.WaitGroup
	var n counters
	wg.Go(func() { w.killer(ctx, &n) })
	interval := cfg.duration * 7 / 10 / time.Duration(max(cfg.claims, 1))
	for i := range cfg.claims {
		w.create(i, &n)
		if w.chance(0.2) {
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

	settled := time.Now()
	w.converge(cfg.converge)
	report := w.check()
	t.Logf("chaos: seed %d, %d claims created, %d deleted, %d kills in %s; converged in %s; %s",
		cfg.seed, n.created.Load(), n.deleted.Load(), n.kills.Load(), faults.Round(time.Second),
		time.Since(settled).Round(100*time.Millisecond), report)
	fmt.Printf("chaos: seed=%d claims=%d deletes=%d kills=%d converge=%s %s\n", cfg.seed, n.created.Load(),
		n.deleted.Load(), n.kills.Load(), time.Since(settled).Round(100*time.Millisecond), report)
}

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
	create("manual", "kubernetes.io/no-provisioner", storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimRetain)
}
