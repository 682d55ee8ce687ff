package binder

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// pollUntil polls cond every few milliseconds until it holds or timeout
// passes, and reports whether it held.
func pollUntil(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// bumpVersion gives each updated object a new resourceVersion, as the API
// server does.
func bumpVersion() k8stesting.ReactionFunc {
	var mu sync.Mutex
	next := 100
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			if m, err := meta.Accessor(u.GetObject()); err == nil {
				mu.Lock()
				next++
				m.SetResourceVersion(strconv.Itoa(next))
				mu.Unlock()
			}
		}
		return false, nil, nil
	}
}

// claimWrites records every claim update the binder sends.
type claimWrites struct {
	mu     sync.Mutex
	writes []*v1.PersistentVolumeClaim
}

func (w *claimWrites) reactor(a k8stesting.Action) (bool, runtime.Object, error) {
	if u, ok := a.(k8stesting.UpdateAction); ok {
		if claim, ok := u.GetObject().(*v1.PersistentVolumeClaim); ok {
			w.mu.Lock()
			w.writes = append(w.writes, claim.DeepCopy())
			w.mu.Unlock()
		}
	}
	return false, nil, nil
}

func (w *claimWrites) all() []*v1.PersistentVolumeClaim {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*v1.PersistentVolumeClaim(nil), w.writes...)
}

// Defect 8 of issue 24: the workers started on the informers' HasSynced,
// while the Store and the Index are filled by the handlers, which may not
// have been handed the first list yet. With the volume handler slow, the
// volume informer is synced while the Index is empty: a worker then found
// no match for a claim that has one and handed it to the provisioner (a
// new backend volume, and the matching one left unused). The workers must
// wait for the handlers; the claim's first write is then its bind.
func TestWorkersWaitForOwnCaches(t *testing.T) {
	class := newClass("fast", "csi.example.com")
	claim := newPVC("c", "1Gi", claimClass("fast"))
	pv := newPV("pv", "1Gi", pvClass("fast"))
	client := fake.NewClientset(class, claim, pv)
	var writes claimWrites
	client.PrependReactor("update", "persistentvolumeclaims", writes.reactor)
	// The fake tracker keeps resourceVersions as written; an API server
	// moves them on, and the Store keeps the newest copy by them.
	client.PrependReactor("update", "*", bumpVersion())
	c, err := New(Options{Client: client, Workers: 2, Recorder: record.NewFakeRecorder(100)})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	c.beforeVolumeEvent = func() { <-release } // the handler is slow
	runController(t, c)

	volumeInf := c.factory.Core().V1().PersistentVolumes().Informer()
	if !pollUntil(10*time.Second, volumeInf.HasSynced) {
		close(release)
		t.Fatal("the volume informer did not sync")
	}
	// The informer is synced and the handler still holds the volume. A
	// worker that started now would decide on the claim within
	// milliseconds; give it half a second before the handler goes on.
	pollUntil(500*time.Millisecond, func() bool { return len(writes.all()) > 0 })
	close(release)

	bound := pollUntil(10*time.Second, func() bool {
		got, ok := c.claims.Get(ns, "c")
		return ok && got.Spec.VolumeName == "pv" && got.Status.Phase == v1.ClaimBound
	})
	all := writes.all()
	for i, w := range all {
		if p := w.Annotations[storagehelpers.AnnStorageProvisioner]; p != "" {
			t.Errorf("claim write %d handed the claim to provisioner %q while volume pv matched it (the index was not filled yet); writes: %s", i, p, describeWrites(all))
		}
	}
	if len(all) == 0 {
		t.Error("the claim was never written")
	} else if all[0].Spec.VolumeName != "pv" {
		t.Errorf("the claim's first write was not its bind to pv: volumeName %q, annotations %v",
			all[0].Spec.VolumeName, all[0].Annotations)
	}
	if !bound {
		t.Error("the claim was not bound to pv")
	}
}

func describeWrites(all []*v1.PersistentVolumeClaim) string {
	var out []string
	for _, w := range all {
		out = append(out, fmt.Sprintf("{rv %s volume %q phase %s ann %v}", w.ResourceVersion, w.Spec.VolumeName, w.Status.Phase, w.Annotations))
	}
	return strings.Join(out, ", ")
}

// runController runs c until the test ends, then stops it and checks that
// Run returned no error; it returns Run's context.
func runController(t *testing.T, c *Controller) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	return ctx
}
