package provisioner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/records"
)

// unreadRecord gives a claim this driver's record for its own volume, in a
// format this provisioner does not read (a release two ahead, or a value
// the claim's user wrote).
func unreadRecord(driver, format string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		inflight.Record(c, driver, testVolume)
		c.Annotations[inflight.AnnFormat] = format
	}
}

// A record of a format this provisioner does not read is left as it is by
// each of its readers (docs/upgrade.md): Provision makes no call and does
// not write over it, the in-flight reconciler neither drops it nor cleans
// up on its word and says so in an event, and the PV's release keeps the
// PV's finalizer.
func TestUnreadRecordIsLeftAsItIs(t *testing.T) {
	t.Run("provision", func(t *testing.T) {
		e := newEnv(t)
		claim := e.createClaim(newClaim(unreadRecord(e.driver.DriverName(), "2")))
		e.refresh()
		_, _, err := e.provision(claim)
		var unread records.UnreadError
		if !errors.As(err, &unread) || unread.Format != "2" {
			t.Fatalf("Provision: %v, want an UnreadError of format 2", err)
		}
		if n := e.driver.createCount(); n != 0 {
			t.Errorf("%d CreateVolume calls", n)
		}
		if got := e.apiClaim(testClaim).Annotations[inflight.AnnFormat]; got != "2" {
			t.Errorf("the record's format is now %q", got)
		}
	})
	t.Run("clean-up of a deleted claim", func(t *testing.T) {
		e := newEnv(t)
		e.createClaim(newClaim(unreadRecord(e.driver.DriverName(), "2")))
		e.deleteClaim(testClaim)
		e.refresh()
		e.settle(testClaim)
		if n, d := e.driver.createCount(), len(e.driver.deletes); n != 0 || d != 0 {
			t.Errorf("driver calls on its word: %d CreateVolume, %d DeleteVolume", n, d)
		}
		if !e.holdsRecord(testClaim) {
			t.Error("the record was dropped")
		}
		events := e.events()
		if !slices.ContainsFunc(events, func(ev string) bool {
			return strings.Contains(ev, "InFlightRecordUnread") && strings.Contains(ev, `format "2"`)
		}) {
			t.Errorf("no InFlightRecordUnread event: %v", events)
		}
	})
	t.Run("another node's unread record: no event here", func(t *testing.T) {
		e := newEnv(t, nodeMode("node-1"))
		e.createClaim(newClaim(unreadRecord(e.driver.DriverName(), "x"), claimAnn(inflight.AnnNode, "node-2")))
		e.deleteClaim(testClaim)
		e.refresh()
		e.settle(testClaim)
		if events := e.events(); len(events) != 0 {
			t.Errorf("events: %v", events)
		}
		if !e.holdsRecord(testClaim) {
			t.Error("the record was dropped")
		}
	})
	t.Run("release of the PV", func(t *testing.T) {
		e := newEnv(t)
		claim := e.createClaim(newClaim(unreadRecord(e.driver.DriverName(), "2")))
		pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: testVolume},
			Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{Namespace: testNS, Name: testClaim, UID: claim.UID}}}
		err := e.p.dropBeforeRelease(e.ctx, pv)
		if err == nil || !strings.Contains(err.Error(), "keeps its finalizer") {
			t.Errorf("dropBeforeRelease: %v, want the finalizer kept", err)
		}
		if !e.holdsRecord(testClaim) {
			t.Error("the record was dropped")
		}
	})
}
