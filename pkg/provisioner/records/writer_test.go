package records

import (
	"context"
	"errors"
	"testing"

	"github.com/tether-csi/tether/pkg/inflight"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// Record writes the record in this version's format, and never writes over
// a record of a format it does not read (docs/upgrade.md).
func TestWriterRecordFormats(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		format     string // the claim's record's format annotation; "" for no record
		wantErr    bool
		wantFormat string // on the stored claim after Record
	}{
		{name: "no record: written in format 1", wantFormat: "1"},
		{name: "a format-1 record of another volume: written again", format: "1", wantFormat: "1"},
		{name: "a newer release's format: left, UnreadError", format: "2", wantErr: true, wantFormat: "2"},
		{name: "garbage: left, UnreadError", format: "v2", wantErr: true, wantFormat: "v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := newClaim()
			if tt.format != "" {
				claim = newClaim(recordOf(tt.format), claimAnn(inflight.AnnVolume, "pvc-other"), claimAnn(inflight.AnnDriver, driverNm))
			}
			client := fake.NewClientset(claim)
			w := &Writer{Client: client, Driver: driverNm}
			_, err := w.Record(ctx, claim, testVolume)
			var unread UnreadError
			if got := errors.As(err, &unread); got != tt.wantErr {
				t.Fatalf("Record error %v; want an UnreadError: %v", err, tt.wantErr)
			}
			stored, gerr := client.CoreV1().PersistentVolumeClaims(testNS).Get(ctx, testClaim, metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			if got := stored.Annotations[inflight.AnnFormat]; got != tt.wantFormat {
				t.Errorf("stored format %q, want %q", got, tt.wantFormat)
			}
			if tt.wantErr && (stored.Annotations[inflight.AnnVolume] != "pvc-other" || len(client.Actions()) != 1) {
				t.Errorf("an unread record was written over: %v, %d actions", stored.Annotations, len(client.Actions()))
			}
		})
	}
}

// A CreateVolume tried again finds the record already on the claim as the
// provisioner's cache has it, so there is no write whose resourceVersion
// would fail on a stale claim: Record reads the claim and refuses
// (StaleError) unless the API still has it, unbound, with this record.
// Found by the simulator (seeds 4426 and 9076): a claim deleted after its
// PV was saved, its deletion not yet in the cache, got a second volume.
func TestWriterRecordAgainReadsTheClaim(t *testing.T) {
	ctx := context.Background()
	recorded := func(opts ...claimOpt) *v1.PersistentVolumeClaim {
		base := []claimOpt{recordOf("1"), claimAnn(inflight.AnnVolume, testVolume), claimAnn(inflight.AnnDriver, driverNm)}
		return newClaim(append(base, opts...)...)
	}
	tests := []struct {
		name      string
		node      string                    // the Writer's node
		cached    *v1.PersistentVolumeClaim // the claim Provision decided on
		api       *v1.PersistentVolumeClaim // the API's, nil: gone
		wantStale bool
	}{
		{name: "the API has it as cached: the claim is returned", cached: recorded(), api: recorded()},
		{name: "changed elsewhere, the record kept: the API's claim is returned", cached: recorded(),
			api: recorded(claimAnn("team", "blue"))},
		{name: "gone", cached: recorded(), wantStale: true},
		{name: "made again under its name", cached: recorded(),
			api: recorded(func(c *v1.PersistentVolumeClaim) { c.UID = "other" }), wantStale: true},
		{name: "bound (the binder dropped the record as it bound)", cached: recorded(),
			api: newClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = testVolume }), wantStale: true},
		{name: "bound, the record kept (an older binder, KCM's)", cached: recorded(),
			api: recorded(func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-static" }), wantStale: true},
		{name: "the record dropped", cached: recorded(), api: newClaim(), wantStale: true},
		{name: "the record names another volume", cached: recorded(),
			api: recorded(claimAnn(inflight.AnnVolume, "pvc-other")), wantStale: true},
		{name: "the record is of a format not read now", cached: recorded(), api: recorded(claimAnn(inflight.AnnFormat, "2")), wantStale: true},
		{name: "node mode: the record is this node's", node: "n1", cached: recorded(claimAnn(inflight.AnnNode, "n1")),
			api: recorded(claimAnn(inflight.AnnNode, "n1"))},
		{name: "node mode: the record is another node's now", node: "n1", cached: recorded(claimAnn(inflight.AnnNode, "n1")),
			api: recorded(claimAnn(inflight.AnnNode, "n2")), wantStale: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tt.api != nil {
				client = fake.NewClientset(tt.api)
			}
			w := &Writer{Client: client, Driver: driverNm, Node: tt.node}
			got, err := w.Record(ctx, tt.cached, testVolume)
			var stale StaleError
			if errors.As(err, &stale) != tt.wantStale || (err != nil && !tt.wantStale) {
				t.Fatalf("Record error %v; want a StaleError: %v", err, tt.wantStale)
			}
			if !tt.wantStale && got.Annotations["team"] != tt.api.Annotations["team"] {
				t.Errorf("Record returned %v, want the API's claim", got.Annotations)
			}
			for _, a := range client.Actions() {
				if a.GetVerb() != "get" {
					t.Errorf("Record wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

// TestWriterRecordAgainRefusesAMovedOrDeletedClaim: a CreateVolume tried
// again under the record goes on only for the claim as the request was
// built for it: one the scheduler has since given another node, or that is
// being deleted, is stale (issue 49, defect 4).
func TestWriterRecordAgainRefusesAMovedOrDeletedClaim(t *testing.T) {
	ctx := context.Background()
	now := metav1.Now()
	recorded := func(opts ...claimOpt) *v1.PersistentVolumeClaim {
		base := []claimOpt{recordOf("1"), claimAnn(inflight.AnnVolume, testVolume), claimAnn(inflight.AnnDriver, driverNm)}
		return newClaim(append(base, opts...)...)
	}
	deleting := func(c *v1.PersistentVolumeClaim) { c.DeletionTimestamp = &now }
	for _, tt := range []struct {
		name        string
		cached, api *v1.PersistentVolumeClaim
		wantStale   bool
	}{
		{"the same node", recorded(claimAnn(storagehelpers.AnnSelectedNode, "n1")), recorded(claimAnn(storagehelpers.AnnSelectedNode, "n1")), false},
		{"another node selected since", recorded(claimAnn(storagehelpers.AnnSelectedNode, "n1")), recorded(claimAnn(storagehelpers.AnnSelectedNode, "n2")), true},
		{"the node removed since (rescheduled)", recorded(claimAnn(storagehelpers.AnnSelectedNode, "n1")), recorded(), true},
		{"a node selected since (built for none)", recorded(), recorded(claimAnn(storagehelpers.AnnSelectedNode, "n1")), true},
		{"being deleted since", recorded(), recorded(deleting), true},
	} {
		w := &Writer{Client: fake.NewClientset(tt.api), Driver: driverNm}
		_, err := w.Record(ctx, tt.cached, testVolume)
		var stale StaleError
		if errors.As(err, &stale) != tt.wantStale || (err != nil && !tt.wantStale) {
			t.Errorf("%s: Record error %v; want a StaleError: %v", tt.name, err, tt.wantStale)
		}
	}
}
