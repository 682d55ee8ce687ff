package binder

// Fuzz targets for the binder's pure parts: Index.Reserve against a
// brute-force reference, and DecideClaim and DecideVolume against their
// safety rules. Under `go test` each runs its seed corpus (fuzzSeeds and
// testdata/fuzz/<target>); `make fuzz` runs each with `go test -fuzz`. The
// fuzzer's bytes are read as a stream of choices (chooser, in
// fuzz_gen_test.go), so every input, however short, builds a scenario.

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

// checkParse checks ParseClaim against the rules it documents.
func checkParse(t *testing.T, claim *v1.PersistentVolumeClaim, n ClaimNeeds, err error) {
	t.Helper()
	req, hasReq := claim.Spec.Resources.Requests[v1.ResourceStorage]
	mode := ptr.Deref(claim.Spec.VolumeMode, v1.PersistentVolumeFilesystem)
	_, selErr := metav1.LabelSelectorAsSelector(claim.Spec.Selector)
	valid := hasReq && req.Sign() >= 0 && (mode == v1.PersistentVolumeFilesystem || mode == v1.PersistentVolumeBlock) &&
		len(claim.Spec.AccessModes) > 0 && selErr == nil
	if valid != (err == nil) {
		t.Fatalf("ParseClaim error %v for a claim that is valid=%v: %+v", err, valid, claim.Spec)
	}
	if n.Class != storagehelpers.GetPersistentVolumeClaimClass(claim) || n.Mode != mode || n.UID != string(claim.UID) ||
		n.Request.Cmp(req) != 0 || (n.Selector != nil) != (claim.Spec.Selector != nil && selErr == nil) {
		t.Fatalf("ParseClaim gave %+v for %+v", n, claim.Spec)
	}
}

// refFits is the reference for what every match must meet, pre-bound or
// not: not being deleted, size, volumeMode, attributes class, access modes
// and, when a node is selected, node affinity.
func refFits(pv *v1.PersistentVolume, n ClaimNeeds, node map[string]string) bool {
	capacity := pv.Spec.Capacity[v1.ResourceStorage]
	if pv.DeletionTimestamp != nil || capacity.Cmp(n.Request) < 0 ||
		ptr.Deref(pv.Spec.VolumeMode, v1.PersistentVolumeFilesystem) != n.Mode ||
		ptr.Deref(pv.Spec.VolumeAttributesClassName, "") != n.VAC {
		return false
	}
	for _, m := range n.AccessModes {
		if !slices.Contains(pv.Spec.AccessModes, m) {
			return false
		}
	}
	return node == nil || storagehelpers.CheckNodeAffinity(pv, node) == nil
}

func refPreBound(pv *v1.PersistentVolume, n ClaimNeeds) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.Namespace == n.Namespace && ref.Name == n.Name && (ref.UID == "" || string(ref.UID) == n.UID)
}

// refUnclaimed is the reference for an unclaimed volume that any claim of
// its class may take.
func refUnclaimed(pv *v1.PersistentVolume, n ClaimNeeds, node map[string]string) bool {
	return pv.Spec.ClaimRef == nil && slices.Contains([]v1.PersistentVolumePhase{"", v1.VolumePending, v1.VolumeAvailable}, pv.Status.Phase) &&
		storagehelpers.GetPersistentVolumeClass(pv) == n.Class &&
		(n.Selector == nil || n.Selector.Matches(labels.Set(pv.Labels))) && refFits(pv, n, node)
}

// accessGroup is a volume's access modes without duplicates, sorted and
// joined, and how many there are.
func accessGroup(pv *v1.PersistentVolume) (int, string) {
	var modes []string
	for _, m := range pv.Spec.AccessModes {
		modes = append(modes, string(m))
	}
	slices.Sort(modes)
	modes = slices.Compact(modes)
	return len(modes), strings.Join(modes, ",")
}

// refReserve is the brute-force reference for Index.Reserve, in the
// documented order: a volume pre-bound to the claim first (by name); then
// the access-mode group with the fewest modes (ties by the modes' names)
// that has a fit; in it the smallest fit, then the first by name. taken
// maps the volumes reserved by other claims to their UIDs.
func refReserve(vols map[string]*v1.PersistentVolume, q MatchQuery, taken map[string]string) *v1.PersistentVolume {
	n := q.Needs
	free := func(pv *v1.PersistentVolume) bool { uid, ok := taken[pv.Name]; return !ok || uid == n.UID }
	var pre, rest []*v1.PersistentVolume
	for _, pv := range vols {
		switch {
		case !free(pv):
		case refPreBound(pv, n) && refFits(pv, n, q.NodeLabels):
			pre = append(pre, pv)
		case refUnclaimed(pv, n, q.NodeLabels):
			rest = append(rest, pv)
		}
	}
	if len(pre) > 0 {
		return slices.MinFunc(pre, func(a, b *v1.PersistentVolume) int { return cmp.Compare(a.Name, b.Name) })
	}
	if len(rest) == 0 || (q.DelayBinding && q.NodeLabels == nil) {
		return nil
	}
	return slices.MinFunc(rest, func(a, b *v1.PersistentVolume) int {
		na, ga := accessGroup(a)
		nb, gb := accessGroup(b)
		if c := cmp.Compare(na, nb); c != 0 {
			return c
		}
		if c := cmp.Compare(ga, gb); c != 0 {
			return c
		}
		ca, cb := a.Spec.Capacity[v1.ResourceStorage], b.Spec.Capacity[v1.ResourceStorage]
		if c := ca.Cmp(cb); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

// checkReserved checks the safety rules for any volume Reserve offers,
// even for a claim that does not parse.
func checkReserved(t *testing.T, m *indexModel, q MatchQuery, taken map[string]string, got *v1.PersistentVolume) {
	t.Helper()
	if got == nil {
		return
	}
	n := q.Needs
	if m.vols[got.Name] != got {
		t.Fatalf("Reserve offered %s at %s, not the index's current version", got.Name, got.ResourceVersion)
	}
	if uid, ok := taken[got.Name]; ok && uid != n.UID {
		t.Fatalf("Reserve offered %s, reserved for claim %s", got.Name, uid)
	}
	if !refFits(got, n, q.NodeLabels) {
		t.Fatalf("Reserve offered %s, which does not fit the claim %+v: %+v", got.Name, n, got)
	}
	if refPreBound(got, n) {
		return
	}
	if c := storagehelpers.GetPersistentVolumeClass(got); c != n.Class {
		t.Fatalf("Reserve offered %s of class %q to a claim of class %q", got.Name, c, n.Class)
	}
	if got.Spec.ClaimRef != nil {
		t.Fatalf("Reserve offered %s, claimed by %+v", got.Name, got.Spec.ClaimRef)
	}
	if !refUnclaimed(got, n, q.NodeLabels) {
		t.Fatalf("Reserve offered %s (phase %q, labels %v), not a candidate for %+v", got.Name, got.Status.Phase, got.Labels, n)
	}
	if q.DelayBinding && q.NodeLabels == nil {
		t.Fatalf("Reserve offered the unclaimed %s to a WaitForFirstConsumer claim with no node", got.Name)
	}
}

func checkReserve(t *testing.T, what string, ix *Index, m *indexModel, q MatchQuery, valid bool, taken map[string]string) *v1.PersistentVolume {
	t.Helper()
	got := ix.Reserve(q)
	checkReserved(t, m, q, taken, got)
	// The binder reserves only for claims that parse; for those the
	// choice must be the reference's.
	if want := refReserve(m.vols, q, taken); valid && nameOf(got) != nameOf(want) {
		t.Fatalf("%s: Reserve offered %q, want %q", what, nameOf(got), nameOf(want))
	}
	return got
}

func FuzzMatch(f *testing.F) {
	fuzzSeeds(f, 200)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &chooser{b: data}
		claim := genClaim(c, fzClaim, fzClaimUID)
		ix, m := buildIndex(t, c, claim)
		needs, err := ParseClaim(claim)
		checkParse(t, claim, needs, err)
		q := MatchQuery{Needs: needs, DelayBinding: c.oneIn(3), NodeLabels: choose(c, fzNodes...)}

		// Another claim may hold a reservation first: another claim, or an
		// earlier claim of the same name (a pre-binding without UID names
		// both), maybe with the same spec.
		taken := map[string]string{}
		if c.oneIn(2) {
			other := genClaim(c, choose(c, fzRival, fzClaim), fzRivalUID)
			if c.oneIn(2) {
				other = claim.DeepCopy()
				other.UID = fzRivalUID
			}
			rival, rerr := ParseClaim(other)
			if rerr == nil {
				rq := MatchQuery{Needs: rival}
				if pv := checkReserve(t, "rival", ix, m, rq, true, taken); pv != nil {
					taken[pv.Name] = rival.UID
				}
			}
		}
		got := checkReserve(t, "claim", ix, m, q, err == nil, taken)
		if again := ix.Reserve(q); again != got {
			t.Fatalf("a second Reserve offered %q, the first %q", nameOf(again), nameOf(got))
		}
		for name, uid := range taken {
			ix.Release(name, uid)
		}
		// Our own reservation does not stand in our way; the rival's is gone.
		checkReserve(t, "after release", ix, m, q, err == nil, nil)
		if got != nil {
			ix.Release(got.Name, needs.UID)
		}
	})
}

func FuzzDecideClaim(f *testing.F) {
	fuzzSeeds(f, 200)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &chooser{b: data}
		claim := genClaim(c, fzClaim, fzClaimUID)
		ix, m := buildIndex(t, c, claim)
		classes := map[string]*storagev1.StorageClass{}
		for _, name := range []string{"gold", "silver"} {
			if sc := genClass(c, name); sc != nil {
				classes[name] = sc
			}
		}
		switch c.intn(5) {
		case 1, 2, 3:
			if names := slices.Sorted(maps.Keys(m.vols)); len(names) > 0 {
				claim.Spec.VolumeName = choose(c, names...)
			}
		case 4:
			claim.Spec.VolumeName = "missing"
		}
		if c.oneIn(3) {
			metav1.SetMetaDataAnnotation(&claim.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
		}
		var node map[string]string
		if c.oneIn(3) {
			metav1.SetMetaDataAnnotation(&claim.ObjectMeta, storagehelpers.AnnSelectedNode, "node-1")
			node = choose(c, fzNodes[1:]...) // a missing node has no labels
		}

		// As syncClaimOnce builds it.
		needs, err := ParseClaim(claim)
		in := ClaimInput{Claim: claim, Needs: needs, NeedsErr: err, DefaultClass: choose(c, "", "", "gold", "silver", "ghost")}
		if needs.Class != "" {
			in.Class = classes[needs.Class]
		}
		if claim.Spec.VolumeName != "" {
			in.Volume, _ = ix.Get(claim.Spec.VolumeName)
		}
		if !BindCompleted(claim) && claim.Spec.VolumeName == "" && err == nil {
			q := MatchQuery{Needs: needs, DelayBinding: DelayBinding(in.Class)}
			if q.DelayBinding {
				q.NodeLabels = node
			}
			in.Match = ix.Reserve(q)
		}
		checkClaimDecisionSafe(t, in, DecideClaim(in))
	})
}

func checkEventShape(t *testing.T, what string, e *Event) {
	t.Helper()
	if e != nil && (e.Reason == "" || e.Message == "" || (e.Type != v1.EventTypeNormal && e.Type != v1.EventTypeWarning)) {
		t.Fatalf("%s: malformed event %+v", what, *e)
	}
}

// checkClaimDecisionSafe checks the rules every claim decision keeps.
func checkClaimDecisionSafe(t *testing.T, in ClaimInput, d ClaimDecision) {
	t.Helper()
	claim, n := in.Claim, in.Needs
	checkEventShape(t, "claim", d.Event)
	_ = d.Op.String()
	bound := BindCompleted(claim)
	if in.NeedsErr != nil && !bound {
		if d.Op == ClaimBind || d.Event == nil || d.Event.Reason != ReasonFailedBinding {
			t.Fatalf("claim with bad input (%v): decision %s, event %+v", in.NeedsErr, d.Op, d.Event)
		}
	}
	switch d.Op {
	case ClaimBind:
		pv := d.Volume
		if pv == nil {
			t.Fatal("ClaimBind without a volume")
		}
		if name := claim.Spec.VolumeName; name != "" && pv.Name != name {
			t.Fatalf("claim names volume %q, bound to %q", name, pv.Name)
		}
		if bound {
			// Finishing or repairing an existing binding.
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID != claim.UID {
				t.Fatalf("bound claim bound to %s, which is claimed by %+v", pv.Name, pv.Spec.ClaimRef)
			}
			return
		}
		if refPreBound(pv, n) {
			return
		}
		if pv.Spec.ClaimRef != nil {
			t.Fatalf("claim bound to %s, which is claimed by %+v", pv.Name, pv.Spec.ClaimRef)
		}
		if c := storagehelpers.GetPersistentVolumeClass(pv); c != n.Class {
			t.Fatalf("claim of class %q bound to %s of class %q", n.Class, pv.Name, c)
		}
		if !refFits(pv, n, nil) {
			t.Fatalf("claim %+v bound to %s, which does not fit: %+v", n, pv.Name, pv)
		}
		if claim.Spec.VolumeName == "" && n.Selector != nil && !n.Selector.Matches(labels.Set(pv.Labels)) {
			t.Fatalf("claim with selector %s bound to %s with labels %v", n.Selector, pv.Name, pv.Labels)
		}
	case ClaimProvision:
		if in.Class == nil || d.Provisioner != in.Class.Provisioner || d.Provisioner == storagehelpers.NotSupportedProvisioner {
			t.Fatalf("provision by %q for class %+v", d.Provisioner, in.Class)
		}
	case ClaimSetClass:
		if storagehelpers.PersistentVolumeClaimHasClass(claim) || d.Class == "" || d.Class != in.DefaultClass {
			t.Fatalf("set class %q on a claim with class %q (default %q)", d.Class, n.Class, in.DefaultClass)
		}
	case ClaimLost:
		if !bound {
			t.Fatalf("an unbound claim marked Lost: %+v", d)
		}
	}
}

func FuzzDecideVolume(f *testing.F) {
	fuzzSeeds(f, 200)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &chooser{b: data}
		pv := genPV(c, "pv-1", 1, nil)
		if c.oneIn(2) {
			metav1.SetMetaDataAnnotation(&pv.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
		}
		if c.oneIn(2) {
			metav1.SetMetaDataAnnotation(&pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned, "csi.example.com")
		}
		// The claim that claimRef names, with the same UID, as claimOf finds it.
		var claim *v1.PersistentVolumeClaim
		if ref := pv.Spec.ClaimRef; ref != nil && ref.UID != "" && !c.oneIn(3) {
			claim = genClaim(c, ref.Name, string(ref.UID))
			claim.Namespace = ref.Namespace
			claim.Spec.VolumeName = choose(c, "", pv.Name, "pv-other")
			if claim.Spec.VolumeName != "" && c.oneIn(2) {
				metav1.SetMetaDataAnnotation(&claim.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
			}
		}
		d := DecideVolume(VolumeInput{Volume: pv, Claim: claim})
		checkVolumeDecisionSafe(t, pv, claim, d)
	})
}

// checkVolumeDecisionSafe checks the rules every volume decision keeps.
func checkVolumeDecisionSafe(t *testing.T, pv *v1.PersistentVolume, claim *v1.PersistentVolumeClaim, d VolumeDecision) {
	t.Helper()
	checkEventShape(t, "volume", d.Event)
	checkEventShape(t, "claim", d.ClaimEvent)
	ref := pv.Spec.ClaimRef
	boundHere := claim != nil && claim.Spec.VolumeName == pv.Name
	boundElsewhere := claim != nil && claim.Spec.VolumeName != "" && !boundHere
	if boundHere && (d.Unbind != KeepClaimRef || d.Phase != v1.VolumeBound) {
		t.Fatalf("volume whose claim is bound to it: unbind %d, phase %q", d.Unbind, d.Phase)
	}
	if d.Unbind != KeepClaimRef && !boundElsewhere {
		t.Fatalf("claimRef %+v cleared (%d) though its claim %v is not bound elsewhere", ref, d.Unbind, claim)
	}
	if d.Unbind == ClearClaimRef && !metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnBoundByController) {
		t.Fatalf("a user's claimRef %+v cleared", ref)
	}
	if (ref == nil || ref.UID == "") && (d.Phase != v1.VolumeAvailable || d.SyncClaim || d.Unbind != KeepClaimRef) {
		t.Fatalf("free or user pre-bound volume (claimRef %+v): %+v", ref, d)
	}
	if d.Phase == v1.VolumeReleased || d.Phase == v1.VolumeFailed {
		spare := boundElsewhere && metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) &&
			pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete
		if claim != nil && !spare {
			t.Fatalf("volume released (%s) though its claim exists: %+v", d.Phase, claim.Spec)
		}
		if pv.Status.Phase == v1.VolumeFailed {
			t.Fatalf("a Failed volume moved to %s", d.Phase)
		}
	}
}
