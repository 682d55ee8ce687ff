package binder

// Generators for the fuzz targets in fuzz_test.go: the fuzzer's bytes read
// as a stream of choices, turned into volumes, claims and classes, plus a
// model of what the index should hold.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

// chooser reads choices from the fuzzer's bytes; past their end every
// choice is the first option.
type chooser struct{ b []byte }

func (c *chooser) next() byte {
	if len(c.b) == 0 {
		return 0
	}
	x := c.b[0]
	c.b = c.b[1:]
	return x
}

func (c *chooser) intn(n int) int { return int(c.next()) % n }

// oneIn is true one time in n.
func (c *chooser) oneIn(n int) bool { return c.intn(n) == n-1 }

func choose[T any](c *chooser, options ...T) T { return options[c.intn(len(options))] }

const (
	fzClaim, fzClaimUID = "claim", "uid-claim"
	fzRival, fzRivalUID = "rival", "uid-rival"
	fzGarbageMode       = v1.PersistentVolumeMode("Sideways")
)

var (
	fzClasses = []string{"", "gold", "silver"}
	// Sizes: zero, fractional, equal values in other units (1Gi, 1024Mi,
	// 1073741824), 8Ei (2^63, past int64), negative.
	fzSizes = []string{"0", "100m", "1", "999Mi", "1Gi", "1024Mi", "1073741824", "2Gi", "10G", "8Ei", "-1Gi"}
	fzModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadOnlyMany, v1.ReadWriteMany, v1.ReadWriteOncePod}
	// Volume modes: unset (Filesystem) twice as often as the others.
	fzVolumeModes = []*v1.PersistentVolumeMode{nil, nil, ptr.To(v1.PersistentVolumeFilesystem),
		ptr.To(v1.PersistentVolumeBlock), ptr.To(fzGarbageMode)}
	fzVACs     = []*string{nil, nil, nil, ptr.To(""), ptr.To("fast")}
	fzNodes    = []map[string]string{nil, {}, {"zone": "a"}, {"zone": "b", "tier": "db"}}
	fzLabelKey = []string{"zone", "tier", "bad key!"}
	fzLabelVal = []string{"a", "b", "", "db", "bad value!"}
	fzSelOps   = []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn,
		metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist, "Bogus", ""}
)

func genAccessModes(c *chooser) []v1.PersistentVolumeAccessMode {
	var out []v1.PersistentVolumeAccessMode // duplicates allowed
	for range choose(c, 1, 1, 2, 3, 0, 4) {
		out = append(out, choose(c, fzModes...))
	}
	return out
}

func genLabels(c *chooser) map[string]string {
	var m map[string]string
	for _, k := range []string{"zone", "tier"} {
		if c.oneIn(2) {
			if m == nil {
				m = map[string]string{}
			}
			m[k] = choose(c, "a", "b", "db")
		}
	}
	return m
}

// genClaimRef: none, a pre-binding to the claim (no UID, its UID, an old
// UID), a reference to another claim, to another namespace, without a name.
func genClaimRef(c *chooser) *v1.ObjectReference {
	ref := func(namespace, name, uid string) *v1.ObjectReference {
		return &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: namespace, Name: name, UID: types.UID(uid)}
	}
	switch c.intn(18) {
	case 12:
		return ref(ns, fzClaim, "")
	case 13:
		return ref(ns, fzClaim, fzClaimUID)
	case 14:
		return ref(ns, fzClaim, "uid-old")
	case 15:
		return ref(ns, fzRival, choose(c, "", fzRivalUID))
	case 16:
		return ref("elsewhere", fzClaim, "")
	case 17:
		return ref(ns, "", choose(c, "", "uid-nameless"))
	}
	return nil
}

func genAffinity(c *chooser) *v1.VolumeNodeAffinity {
	req := func(op v1.NodeSelectorOperator, values ...string) *v1.VolumeNodeAffinity {
		return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
			{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: op, Values: values}}}}}}
	}
	switch c.intn(8) {
	case 4:
		return req(v1.NodeSelectorOpIn, choose(c, "a", "b"))
	case 5:
		return req(v1.NodeSelectorOpNotIn, "a")
	case 6:
		return req("Bogus", "a")
	case 7:
		return &v1.VolumeNodeAffinity{Required: choose(c, nil, &v1.NodeSelector{})}
	}
	return nil
}

// genPV builds a volume named name at resourceVersion rv. With like set,
// most of its fields are taken from that claim, so that many volumes nearly
// fit it and the order among fits matters.
func genPV(c *chooser, name string, rv int, like *v1.PersistentVolumeClaim) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("pv-uid-" + name),
		ResourceVersion: strconv.Itoa(rv), Labels: genLabels(c)}}
	copyOf := func() bool { return like != nil && c.intn(5) != 0 }
	if copyOf() {
		pv.Spec.StorageClassName = storagehelpers.GetPersistentVolumeClaimClass(like)
	} else {
		pv.Spec.StorageClassName = choose(c, fzClasses...)
		if c.oneIn(8) {
			metav1.SetMetaDataAnnotation(&pv.ObjectMeta, v1.BetaStorageClassAnnotation, choose(c, fzClasses...))
		}
	}
	if !c.oneIn(10) {
		pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse(choose(c, fzSizes...))}
	}
	pv.Spec.AccessModes = genAccessModes(c)
	if copyOf() {
		pv.Spec.AccessModes = append(slices.Clone(like.Spec.AccessModes), pv.Spec.AccessModes[:c.intn(len(pv.Spec.AccessModes)+1)]...)
	}
	pv.Spec.VolumeMode = choose(c, fzVolumeModes...)
	if copyOf() {
		pv.Spec.VolumeMode = like.Spec.VolumeMode
	}
	pv.Spec.VolumeAttributesClassName = choose(c, fzVACs...)
	if copyOf() {
		pv.Spec.VolumeAttributesClassName = like.Spec.VolumeAttributesClassName
	}
	pv.Spec.ClaimRef = genClaimRef(c)
	pv.Spec.NodeAffinity = genAffinity(c)
	pv.Spec.PersistentVolumeReclaimPolicy = choose(c, v1.PersistentVolumeReclaimRetain, v1.PersistentVolumeReclaimDelete,
		v1.PersistentVolumeReclaimRecycle, "", "Bogus")
	pv.Status.Phase = choose(c, v1.VolumeAvailable, v1.VolumeAvailable, "", v1.VolumePending, v1.VolumeBound,
		v1.VolumeReleased, v1.VolumeFailed)
	if c.oneIn(8) {
		pv.DeletionTimestamp = &metav1.Time{}
	}
	return pv
}

func genSelector(c *chooser) *metav1.LabelSelector {
	switch c.intn(4) {
	case 0, 1:
		return nil
	case 2:
		return &metav1.LabelSelector{} // matches everything
	}
	sel := &metav1.LabelSelector{}
	for range c.intn(3) {
		if sel.MatchLabels == nil {
			sel.MatchLabels = map[string]string{}
		}
		sel.MatchLabels[choose(c, fzLabelKey...)] = choose(c, fzLabelVal...)
	}
	for range c.intn(3) {
		// In or NotIn with no values, Exists with values, unknown operators: invalid.
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: choose(c, fzLabelKey...), Operator: choose(c, fzSelOps...), Values: []string{"a", "b", "db"}[:c.intn(4)]})
	}
	return sel
}

func genClaim(c *chooser, name, uid string) *v1.PersistentVolumeClaim {
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: "1"}}
	switch c.intn(6) {
	case 1:
		claim.Spec.StorageClassName = ptr.To("")
	case 2, 3:
		claim.Spec.StorageClassName = ptr.To(choose(c, fzClasses...))
	case 4, 5: // the beta annotation wins over the field
		claim.Spec.StorageClassName = ptr.To(choose(c, fzClasses...))
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, v1.BetaStorageClassAnnotation, choose(c, fzClasses...))
	}
	if !c.oneIn(10) {
		claim.Spec.Resources.Requests = v1.ResourceList{v1.ResourceStorage: resource.MustParse(choose(c, fzSizes...))}
	}
	claim.Spec.AccessModes = genAccessModes(c)
	claim.Spec.VolumeMode = choose(c, fzVolumeModes...)
	claim.Spec.VolumeAttributesClassName = choose(c, fzVACs...)
	claim.Spec.Selector = genSelector(c)
	claim.Status.Phase = v1.ClaimPending
	return claim
}

// indexModel is what the index should hold after a sequence of Upserts and
// Deletes: the newest version of each volume, and tombstones.
type indexModel struct {
	vols  map[string]*v1.PersistentVolume
	tombs map[string]int
}

func rvOf(o metav1.Object) int {
	n, err := strconv.Atoi(o.GetResourceVersion())
	if err != nil {
		panic(err)
	}
	return n
}

func (m *indexModel) upsert(t *testing.T, ix *Index, pv *v1.PersistentVolume) {
	t.Helper()
	got := ix.Upsert(pv)
	want := pv
	if cur, ok := m.vols[pv.Name]; ok {
		if rvOf(pv) < rvOf(cur) { // the informer's copy of the same version replaces
			want = cur
		}
	} else if tomb, ok := m.tombs[pv.Name]; ok && rvOf(pv) <= tomb {
		if _, stored := ix.Get(pv.Name); stored {
			t.Fatalf("Upsert stored %s at %s, older than its deletion at %d", pv.Name, pv.ResourceVersion, tomb)
		}
		return
	}
	delete(m.tombs, pv.Name)
	m.vols[pv.Name] = want
	if got != want {
		t.Fatalf("Upsert(%s at %s) returned version %s, want %s", pv.Name, pv.ResourceVersion, got.ResourceVersion, want.ResourceVersion)
	}
}

func (m *indexModel) delete(ix *Index, pv *v1.PersistentVolume) {
	ix.Delete(pv)
	rv := rvOf(pv)
	if cur, ok := m.vols[pv.Name]; ok {
		rv = max(rv, rvOf(cur))
		delete(m.vols, pv.Name)
	}
	m.tombs[pv.Name] = rv
}

func (m *indexModel) check(t *testing.T, ix *Index) {
	t.Helper()
	if ix.Len() != len(m.vols) {
		t.Fatalf("index holds %d volumes, want %d", ix.Len(), len(m.vols))
	}
	for name, want := range m.vols {
		if got, ok := ix.Get(name); !ok || got != want {
			t.Fatalf("index holds %s at %v, want %s", name, got, want.ResourceVersion)
		}
	}
}

// buildIndex fills an index from the chooser: new volumes, then new
// versions, stale versions and deletions of them. like is genPV's.
func buildIndex(t *testing.T, c *chooser, like *v1.PersistentVolumeClaim) (*Index, *indexModel) {
	ix, m := NewIndex(), &indexModel{vols: map[string]*v1.PersistentVolume{}, tombs: map[string]int{}}
	rv := 1
	var names []string
	for i := range c.intn(13) {
		rv++
		name := fmt.Sprintf("pv-%c%d", 'a'+c.intn(3), i) // names not in creation order
		names = append(names, name)
		m.upsert(t, ix, genPV(c, name, rv, like))
	}
	for range c.intn(6) {
		if len(names) == 0 {
			break
		}
		name := choose(c, names...)
		switch c.intn(4) {
		case 0, 1:
			rv++
			m.upsert(t, ix, genPV(c, name, rv, like))
		case 2:
			m.upsert(t, ix, genPV(c, name, 1+c.intn(rv), like)) // stale, or as old as the current one
		case 3:
			m.delete(ix, genPV(c, name, 1+c.intn(rv), nil)) // a last-known state, maybe older than ours
		}
	}
	m.check(t, ix)
	return ix, m
}

func genClass(c *chooser, name string) *storagev1.StorageClass {
	if c.oneIn(4) {
		return nil
	}
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Provisioner:       choose(c, "csi.example.com", storagehelpers.NotSupportedProvisioner),
		VolumeBindingMode: choose(c, nil, ptr.To(storagev1.VolumeBindingImmediate), ptr.To(storagev1.VolumeBindingWaitForFirstConsumer))}
}

// fuzzSeeds adds the empty input and n fixed pseudo-random ones.
func fuzzSeeds(f *testing.F, n int) {
	f.Add([]byte{})
	r := rand.New(rand.NewPCG(7, 11))
	for i := range n {
		b := make([]byte, 48+4*i)
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		f.Add(b)
	}
}
