package binder

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// settledPair is a claim and a volume bound to each other, every step done.
func settledPair() (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	claim := newPVC("c", "1Gi", claimBound("pv"), func(c *v1.PersistentVolumeClaim) {
		c.Status.AccessModes = []v1.PersistentVolumeAccessMode{rwo}
		c.Status.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
	})
	pv := newPV("pv", "1Gi", pvClaimRef("c", "uid-c"), pvBoundByController(), pvPhase(v1.VolumeBound))
	return claim, pv
}

// TestSettled: which pairs a resync may skip. Every row is also put to the
// writer: a sync of a settled pair must write nothing, and a sync of an
// unsettled one must write something, so that Settled never hides work.
func TestSettled(t *testing.T) {
	tests := []struct {
		name   string
		claim  func(*v1.PersistentVolumeClaim)
		volume func(*v1.PersistentVolume)
		want   bool
	}{
		{name: "bound to each other, every step done", want: true},
		{name: "claim not yet Bound", claim: func(c *v1.PersistentVolumeClaim) { c.Status.Phase = v1.ClaimPending }},
		{name: "claim without bind-completed", claim: func(c *v1.PersistentVolumeClaim) {
			delete(c.Annotations, storagehelpers.AnnBindCompleted)
		}},
		{name: "claim's capacity not set", claim: func(c *v1.PersistentVolumeClaim) { c.Status.Capacity = nil }},
		{name: "claim's access modes differ from the volume's", claim: func(c *v1.PersistentVolumeClaim) {
			c.Status.AccessModes = []v1.PersistentVolumeAccessMode{rwx}
		}},
		{name: "volume not yet Bound", volume: func(pv *v1.PersistentVolume) { pv.Status.Phase = v1.VolumeAvailable }},
		{name: "volume Bound with a message", volume: func(pv *v1.PersistentVolume) { pv.Status.Message = "stale" }},
		{name: "volume's claimRef without the claim's UID", volume: func(pv *v1.PersistentVolume) { pv.Spec.ClaimRef.UID = "" }},
		{name: "volume migrated and not annealed", volume: func(pv *v1.PersistentVolume) {
			pvDynamic("kubernetes.io/aws-ebs")(pv)
			pv.Spec.AWSElasticBlockStore = &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim, pv := settledPair()
			if tt.claim != nil {
				tt.claim(claim)
			}
			if tt.volume != nil {
				tt.volume(pv)
			}
			if got := Settled(claim, pv); got != tt.want {
				t.Fatalf("Settled = %v, want %v", got, tt.want)
			}
			client := fake.NewClientset(claim, pv)
			claims, volumes := NewStore[*v1.PersistentVolumeClaim](), NewIndex()
			w := &Writer{Client: client, Recorder: record.NewFakeRecorder(10), Volumes: volumes, Claims: claims,
				Metrics: NewMetrics(prometheus.NewRegistry(), volumes, claims)}
			if err := w.ApplyClaim(t.Context(), claim, DecideClaim(ClaimInput{Claim: claim, Volume: pv})); err != nil {
				t.Fatal(err)
			}
			if err := w.ApplyVolume(t.Context(), pv, claim, DecideVolume(VolumeInput{Volume: pv, Claim: claim})); err != nil {
				t.Fatal(err)
			}
			if wrote := len(client.Actions()) > 0; wrote == tt.want {
				t.Errorf("Settled = %v, but a sync of the pair made %d writes: %v", tt.want, len(client.Actions()), client.Actions())
			}
		})
	}
	if Settled(nil, newPV("pv", "1Gi")) || Settled(newPVC("c", "1Gi"), nil) {
		t.Error("Settled without a claim or a volume")
	}
}

// A resync of a settled pair enqueues neither object; a resync of an
// unsettled one, or a real update of a settled one, enqueues it.
func TestResyncSkipsSettled(t *testing.T) {
	claim, pv := settledPair()
	pending := newPVC("p", "1Gi", func(c *v1.PersistentVolumeClaim) { c.ResourceVersion = "3" })
	c, err := New(Options{Client: fake.NewClientset(), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	c.claims.Upsert(claim)
	c.claims.Upsert(pending)
	c.volumes.Upsert(pv)
	newer := claim.DeepCopy()
	newer.ResourceVersion = "2"
	newer.Labels = map[string]string{"a": "b"}

	c.claimHandler().OnUpdate(claim, claim)
	c.volumeHandler().OnUpdate(pv, pv)
	if n := c.claimQueue.Len() + c.volumeQueue.Len(); n != 0 {
		t.Fatalf("a resync of a settled pair queued %d keys", n)
	}
	c.claimHandler().OnUpdate(pending, pending)
	if n := c.claimQueue.Len(); n != 1 {
		t.Fatalf("a resync of a Pending claim queued %d keys, want 1", n)
	}
	c.claimHandler().OnUpdate(claim, newer)
	if n := c.claimQueue.Len(); n != 2 {
		t.Fatalf("an update of a settled claim queued %d keys in all, want 2", n)
	}
}
