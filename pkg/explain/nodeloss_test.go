package explain

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// TestExplainNodeLoss: a claim waiting for its release for node loss, one
// released (Terminating, held by the pod on the lost node), and the claim
// a StatefulSet made again under the name.
func TestExplainNodeLoss(t *testing.T) {
	release := class("local", driver, true, false)
	release.Annotations = map[string]string{nodeloss.AnnPolicy: "true"}
	since, after, at := now.Add(-2*time.Minute), now.Add(3*time.Minute), now.Add(-10*time.Second)
	marks := func(released bool, reclaim v1.PersistentVolumeReclaimPolicy) pvOpt {
		return func(pv *v1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = reclaim
			pv.Annotations = map[string]string{nodeloss.AnnLostNode: "node-2", nodeloss.AnnLostSince: since.Format(time.RFC3339),
				nodeloss.AnnReleaseAfter: after.Format(time.RFC3339)}
			if released {
				pv.Annotations[nodeloss.AnnReleased] = at.Format(time.RFC3339)
			}
		}
	}
	classes := []*storagev1.StorageClass{release}
	tests := []struct {
		name  string
		in    Input
		want  string
		words []string
		exit  int
	}{
		{name: "bound, its node lost: released at the end of the grace", want: CauseNodeLost, exit: ExitNotBound,
			in: Input{Claim: newClaim("data", "local", "1Gi", bound("pv-1")), Classes: classes,
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "local", "1Gi", pvClaimRef("default", "data"), pvNode("node-2"),
					marks(false, v1.PersistentVolumeReclaimDelete))}},
			words: []string{"node node-2 of volume pv-1 is lost", "releases claims on node loss", "(in 3m0s)",
				"deleted without DeleteVolume", "bring node node-2 back"}},
		{name: "bound, released, not deleted yet (Retain)", want: CauseReleasedForNodeLoss, exit: ExitNotBound,
			in: Input{Claim: newClaim("data", "local", "1Gi", bound("pv-1")), Classes: classes,
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "local", "1Gi", pvClaimRef("default", "data"), pvNode("node-2"),
					marks(true, v1.PersistentVolumeReclaimRetain))}},
			words: []string{"the binder released the claim", "kept Released (reclaim policy Retain)", "StatefulSet makes the claim again"}},
		{name: "released, Terminating: the pod on the lost node holds it", want: CauseReleasedForNodeLoss, exit: ExitNotBound,
			in: Input{Claim: newClaim("data", "local", "1Gi", bound("pv-1"), deleting("kubernetes.io/pvc-protection")), Classes: classes,
				Pods: []*v1.Pod{pod("web-0", "data", "node-2", "")},
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "local", "1Gi", pvClaimRef("default", "data"), pvNode("node-2"),
					marks(true, v1.PersistentVolumeReclaimDelete))}},
			words: []string{"pods use the claim: web-0", "pod GC force-deletes it"}},
		{name: "bound again by the admin, marks of the earlier claim: nothing to say yet", want: "", exit: ExitBound,
			in: Input{Claim: newClaim("data", "local", "1Gi", bound("pv-1")), Classes: classes,
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "local", "1Gi", pvClaimRef("default", "data"), pvNode("node-2"),
					marks(true, v1.PersistentVolumeReclaimRetain), func(pv *v1.PersistentVolume) { pv.Annotations[nodeloss.AnnLostClaim] = "uid-earlier" })}}},
		{name: "bound, no marks: nothing to say", want: "", exit: ExitBound,
			in: Input{Claim: newClaim("data", "local", "1Gi", bound("pv-1")), Classes: classes,
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "local", "1Gi", pvClaimRef("default", "data"), pvNode("node-2"))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			e := Explain(tt.in)
			got, text := "", e.State
			if e.Cause != nil {
				got, text = e.Cause.Reason, text+" | "+e.Cause.Message+" | "+e.Cause.Action
			}
			if got != tt.want {
				t.Fatalf("cause %q, want %q\n%s", got, tt.want, text)
			}
			for _, w := range tt.words {
				if !strings.Contains(text, w) {
					t.Errorf("%q is not in:\n%s", w, text)
				}
			}
			if code := ExitCode(e); code != tt.exit {
				t.Errorf("exit status %d, want %d", code, tt.exit)
			}
			if (tt.want == "") != (e.NodeLoss == nil) {
				t.Errorf("NodeLoss %+v", e.NodeLoss)
			}
		})
	}

	// The claim made again under the name: Pending as any new claim, with
	// its predecessor's release named.
	old := newPV("pv-1", "local", "1Gi", pvClaimRef("default", "data"), pvNode("node-2"), marks(true, v1.PersistentVolumeReclaimDelete))
	old.Status.Phase = v1.VolumeReleased
	again := newClaim("data", "local", "1Gi", func(c *v1.PersistentVolumeClaim) { c.UID = types.UID("uid-data-2") })
	e := Explain(Input{Claim: again, Classes: classes, Volumes: []*v1.PersistentVolume{old}, Now: now})
	if e.NodeLoss == nil || e.NodeLoss.EarlierClaim != "uid-data" || e.NodeLoss.Node != "node-2" || e.NodeLoss.ReleasedAt == nil {
		t.Errorf("the claim made again: NodeLoss %+v", e.NodeLoss)
	}
	if e.Cause != nil && (e.Cause.Reason == CauseNodeLost || e.Cause.Reason == CauseReleasedForNodeLoss) {
		t.Errorf("the claim made again has cause %s", e.Cause.Reason)
	}
}
