package provisioner

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/provisioner/records"
)

// refusePVs has the fake API server refuse every PV create while refusing
// holds, as a validating webhook or an outage would, and counts the
// creates that reached it.
func (e *env) refusePVs(refusing *atomic.Bool, reached *atomic.Int32) {
	e.client.PrependReactor("create", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		reached.Add(1)
		if refusing.Load() {
			return true, nil, apierrors.NewForbidden(v1.Resource("persistentvolumes"), "", errWebhook)
		}
		return false, nil, nil
	})
}

// refusedSave provisions the test claim while the API server refuses PVs
// and hands its PV to the library's own store of unsaved PVs (v8's queue
// store, which CreateProvisionedPVLimiter selects), not yet running: its
// first save is refused, and it is queued to be tried again.
func (e *env) refusedSave(refusing *atomic.Bool, reached *atomic.Int32) (controller.VolumeStore, *v1.PersistentVolume) {
	e.t.Helper()
	refusing.Store(true)
	e.refusePVs(refusing, reached)
	claim := e.createClaim(newClaim())
	pv := e.mustProvision()
	store := controller.NewVolumeStoreQueue(e.p.LibraryClient(e.client),
		workqueue.NewTypedItemExponentialFailureRateLimiter[any](time.Millisecond, 5*time.Millisecond),
		e.claims.GetIndexer(), record.NewFakeRecorder(10))
	if err := store.StoreVolume(claim, pv); err != nil {
		e.t.Fatalf("StoreVolume: %v (the queue store takes every PV, saved or not)", err)
	}
	return store, pv
}

var errWebhook = errors.New(`admission webhook "pv-policy.example.com" denied the request`)

// TestRefusedSaveNeverLandsAfterCleanUp drives the library's own store of
// unsaved PVs (v8's queue store, which CreateProvisionedPVLimiter selects
// and which retries a refused save for ever): the PV's save is refused
// past records.SaveGrace, the claim is deleted, the in-flight clean-up
// deletes the volume; when the API server takes PVs again, the library's
// next try must not save a PV that names the deleted volume (issue 49,
// defect 3: it did, and the binder would bind it).
func TestRefusedSaveNeverLandsAfterCleanUp(t *testing.T) {
	e := newEnv(t)
	var refusing atomic.Bool
	var reached atomic.Int32
	store, pv := e.refusedSave(&refusing, &reached)
	go store.Run(e.ctx, 1)
	waitFor(t, "the library to try the save again", func() bool { return reached.Load() >= 3 })

	e.deleteClaim(testClaim)
	e.refresh()
	e.clock = e.clock.Add(records.SaveGrace + time.Second)
	e.settle(testClaim)
	e.check(want{gone: true})

	refusing.Store(false)
	waitFor(t, "the library's store to give the PV up or save it", func() bool {
		_, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
		return err == nil || !e.p.saves.Followed(pv.Name)
	})
	if _, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{}); err == nil {
		t.Fatalf("the library saved PV %s after the clean-up deleted its volume", pv.Name)
	}
}

// TestRefusedSaveThatLandsKeepsVolume: a save refused past the grace that
// goes through before the clean-up fences it keeps the volume, whose PV
// now governs it (the clean-up reads the PVs after the fence).
func TestRefusedSaveThatLandsKeepsVolume(t *testing.T) {
	e := newEnv(t)
	var refusing atomic.Bool
	var reached atomic.Int32
	store, pv := e.refusedSave(&refusing, &reached)
	refusing.Store(false)
	go store.Run(e.ctx, 1)
	waitFor(t, "the library's retry to save the PV", func() bool { return !e.p.saves.Followed(pv.Name) })

	e.deleteClaim(testClaim)
	e.refresh()
	e.clock = e.clock.Add(records.SaveGrace + time.Second)
	e.settle(testClaim)
	e.check(want{volumes: []string{testVolume}, gone: true})
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
