package provisioner

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// The save grace ends at saveGrace: a record whose PV was handed to the
// library exactly that long ago, with no PV saved, is cleaned up.
func TestSettleSaveGraceEndsAtSaveGrace(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	deleted := newClaim(func(c *v1.PersistentVolumeClaim) { ts := metav1.NewTime(now); c.DeletionTimestamp = &ts })
	for _, c := range []struct {
		name string
		ago  time.Duration
		want settleStep
	}{
		{"just within", saveGrace - time.Nanosecond, settleStep{Op: settleWaitFor, Wait: saveRecheck}},
		{"exactly over", saveGrace, settleStep{Op: settleCleanUp}},
	} {
		in := settleInput{Claim: deleted, Volume: testVolume, HandedOff: now.Add(-c.ago), Owner: ownedHere, Now: now}
		if got := decideSettle(in); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// recordedVolume takes the record's own name only when it is a volume of
// this very claim (ending in its whole UID) and a valid PV name; any other
// stands for the name derived under this provisioner's settings.
func TestRecordedVolumeTakesOnlyThisClaimsValidName(t *testing.T) {
	p := &Provisioner{o: Options{Request: request.Options{VolumeNamePrefix: "pvc"}}}
	derived := "pvc-" + testUID
	for _, c := range []struct {
		name, record, want string
	}{
		{"no record", "", derived},
		{"the derived name", derived, derived},
		{"made under another --volume-name-prefix", "old-" + testUID, "old-" + testUID},
		{"another claim's volume (forged)", "pvc-0a9d1c2e-6a1b-4c8d-9e0f-112233445566", derived},
		{"ending in the UID but no PV name", "Old_Prefix-" + testUID, derived},
	} {
		claim := newClaim()
		if c.record != "" {
			inflight.Record(claim, driverNm, c.record)
		}
		if got := p.recordedVolume(claim); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Before a PV's finalizer goes, settleBeforeRelease drops the record of
// the claim the PV names when the record is this driver's, and leaves a
// record of another driver (another provisioner's to settle) alone.
func TestSettleBeforeReleaseOnlyThisDriversRecord(t *testing.T) {
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
			if err := e.p.settleBeforeRelease(e.ctx, pv); err != nil {
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
func TestSettleBeforeReleaseFailsWhenTheRecordStays(t *testing.T) {
	e := newEnv(t)
	claim := e.createClaim(newClaim(func(cl *v1.PersistentVolumeClaim) { inflight.Record(cl, driverNm, testVolume) }))
	e.client.PrependReactor("update", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server is away")
	})
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: testVolume},
		Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{Namespace: testNS, Name: testClaim, UID: claim.UID}}}
	if err := e.p.settleBeforeRelease(e.ctx, pv); err == nil {
		t.Fatal("settleBeforeRelease = nil with the record still held: the library would drop the finalizer")
	}
	if !e.holdsRecord(testClaim) {
		t.Error("the claim lost its record")
	}
}

// A claim whose PV is being saved is looked at again after a wait, not at
// once in a loop until the save grace ends.
func TestSettleRechecksASaveAfterAWait(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	deleted := newClaim(func(c *v1.PersistentVolumeClaim) { ts := metav1.NewTime(now); c.DeletionTimestamp = &ts })
	got := decideSettle(settleInput{Claim: deleted, Volume: testVolume, HandedOff: now.Add(-time.Second), Owner: ownedHere, Now: now})
	if got.Op != settleWaitFor || got.Wait < time.Second {
		t.Errorf("%+v, want settleWaitFor with a wait of a second or more", got)
	}
}
