package provisioner

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/scope"
)

// Before a PV's finalizer goes, dropBeforeRelease drops the record of
// the claim the PV names when the record is this driver's, and leaves a
// record of another driver (another provisioner's to settle) alone.
func TestDropBeforeReleaseOnlyThisDriversRecord(t *testing.T) {
	for _, c := range []struct {
		name, driver string
		wantHeld     bool
	}{
		{"this driver's record: dropped", "", false},
		{"another driver's record: left", "other.csi.example.com", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			driver := c.driver
			if driver == "" {
				driver = e.driver.DriverName()
			}
			claim := e.createClaim(newClaim(func(cl *v1.PersistentVolumeClaim) { inflight.Record(cl, driver, testVolume) }))
			pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: testVolume},
				Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{Namespace: testNS, Name: testClaim, UID: claim.UID}}}
			if err := e.p.dropBeforeRelease(e.ctx, pv); err != nil {
				t.Fatal(err)
			}
			if got := e.holdsRecord(testClaim); got != c.wantHeld {
				t.Errorf("the claim holds its record: %v, want %v", got, c.wantHeld)
			}
		})
	}
}

// A record that cannot be dropped keeps the PV's finalizer: the error goes
// back to the library, which retries.
func TestDropBeforeReleaseFailsWhenTheRecordStays(t *testing.T) {
	e := newEnv(t)
	claim := e.createClaim(newClaim(func(cl *v1.PersistentVolumeClaim) { inflight.Record(cl, driverNm, testVolume) }))
	e.client.PrependReactor("update", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server is away")
	})
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: testVolume},
		Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{Namespace: testNS, Name: testClaim, UID: claim.UID}}}
	if err := e.p.dropBeforeRelease(e.ctx, pv); err == nil {
		t.Fatal("dropBeforeRelease = nil with the record still held: the library would drop the finalizer")
	}
	if !e.holdsRecord(testClaim) {
		t.Error("the claim lost its record")
	}
}

// A claim whose deletion the claim watch delivered is not read again
// before its PV's finalizer goes; one whose deletion was not seen is.
func TestDropBeforeReleaseTrustsTheDeletionEvent(t *testing.T) {
	for _, c := range []struct {
		name     string
		seenGone bool
		wantGets int
	}{
		{"deletion seen: no read", true, 0},
		{"deletion not seen: read", false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			gone := scope.NewGone(8)
			e.p.o.GoneClaims = gone
			if c.seenGone {
				gone.Add("uid-gone")
			}
			gets := 0
			e.client.PrependReactor("get", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				return false, nil, nil
			})
			pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: testVolume},
				Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{Namespace: testNS, Name: testClaim, UID: "uid-gone"}}}
			if err := e.p.dropBeforeRelease(e.ctx, pv); err != nil {
				t.Fatal(err)
			}
			if gets != c.wantGets {
				t.Errorf("%d claim reads, want %d", gets, c.wantGets)
			}
		})
	}
}
