package libv8

import (
	"context"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

func TestReleaseAfterDelete(t *testing.T) {
	fin := storagehelpers.PVDeletionProtectionFinalizer
	withUID := func(pv *v1.PersistentVolume, uid types.UID) *v1.PersistentVolume {
		pv.UID = uid
		return pv
	}
	tests := []struct {
		name             string
		current, updated *v1.PersistentVolume
		deleted          bool
		want             bool
	}{
		{name: "the finalizer's removal after this process's DeleteVolume, from a stale copy",
			current: withUID(patchPV("6", fin, pvProtection), "u"), updated: withUID(patchPV("5", pvProtection), "u"), deleted: true, want: true},
		{name: "the same from a current copy",
			current: withUID(patchPV("6", fin), "u"), updated: withUID(patchPV("6"), "u"), deleted: true, want: true},
		{name: "the volume was not deleted here: a stale copy stays a conflict",
			current: withUID(patchPV("6", fin), "u"), updated: withUID(patchPV("5"), "u")},
		{name: "another PV of the same name",
			current: withUID(patchPV("6", fin), "other"), updated: withUID(patchPV("5"), "u"), deleted: true},
		{name: "the library's copy without a UID",
			current: withUID(patchPV("6", fin), "u"), updated: patchPV(""), deleted: true},
		{name: "the finalizer is off already",
			current: withUID(patchPV("6", pvProtection), "u"), updated: withUID(patchPV("5"), "u"), deleted: true},
		{name: "the update keeps the finalizer (adds one)",
			current: withUID(patchPV("6", fin), "u"), updated: withUID(patchPV("6", fin, "x"), "u"), deleted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := releaseAfterDelete(tt.current, tt.updated, tt.deleted); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

const pvProtection = "kubernetes.io/pv-protection"

// After this process deleted a PV's volume, the deletion finalizer goes
// without a read of the PV: one JSON patch from the cached copy, whose
// tests the API server checks. When they fail (the PV replaced, or its
// finalizers moved), the removal goes on from a fresh read, and never
// touches another PV.
func TestReleaseFromTheCachedCopy(t *testing.T) {
	fin := storagehelpers.PVDeletionProtectionFinalizer
	pv := func(uid types.UID, rv string, finalizers ...string) *v1.PersistentVolume {
		p := patchPV(rv, finalizers...)
		p.UID = uid
		return p
	}
	tests := []struct {
		name           string
		server, cached *v1.PersistentVolume
		wantVerbs      []string
		wantFinalizers []string
		wantReleased   bool
	}{
		{name: "as cached: one patch", server: pv("u", "6", pvProtection, fin), cached: pv("u", "5", pvProtection, fin),
			wantVerbs: []string{"patch"}, wantFinalizers: []string{pvProtection}, wantReleased: true},
		{name: "a finalizer added after ours since: kept", server: pv("u", "7", fin, "x"), cached: pv("u", "5", fin),
			wantVerbs: []string{"patch"}, wantFinalizers: []string{"x"}, wantReleased: true},
		{name: "finalizers moved since: from a fresh read", server: pv("u", "7", "x", fin), cached: pv("u", "5", fin),
			wantVerbs: []string{"patch", "get", "patch"}, wantFinalizers: []string{"x"}, wantReleased: true},
		{name: "the PV replaced under its name: left alone", server: pv("other", "7", fin), cached: pv("u", "5", fin),
			wantVerbs: []string{"patch", "get"}, wantFinalizers: []string{fin}},
		{name: "no cached copy: from a fresh read", server: pv("u", "6", fin),
			wantVerbs: []string{"get", "patch"}, wantReleased: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(tt.server)
			var verbs []string
			cs.PrependReactor("*", "persistentvolumes", func(a clienttesting.Action) (bool, runtime.Object, error) {
				verbs = append(verbs, a.GetVerb())
				return false, nil, nil
			})
			released, before := false, 0
			c := Client(cs, Hooks{
				VolumeDeleted: func(uid types.UID) bool { return uid == "u" },
				Released:      func(types.UID) { released = true },
				BeforeRelease: func(context.Context, *v1.PersistentVolume) error { before++; return nil },
				Cached:        func(string) *v1.PersistentVolume { return tt.cached },
			})
			// The library removes the finalizer from its own (stale) copy.
			upd := pv("u", "5")
			if _, err := c.CoreV1().PersistentVolumes().Update(t.Context(), upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(verbs, tt.wantVerbs) {
				t.Errorf("verbs %v, want %v", verbs, tt.wantVerbs)
			}
			got, err := cs.CoreV1().PersistentVolumes().Get(t.Context(), "pv", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Finalizers, tt.wantFinalizers) {
				t.Errorf("finalizers %v, want %v", got.Finalizers, tt.wantFinalizers)
			}
			if released != tt.wantReleased || (tt.wantReleased && before == 0) {
				t.Errorf("released %v (want %v), the record's drop ran %d times", released, tt.wantReleased, before)
			}
		})
	}
}

func TestFinalizerRemoval(t *testing.T) {
	p := patchPV("5", "a", "b")
	p.UID = "u"
	patch, ok := FinalizerRemoval(p, "b")
	want := `[{"op":"test","path":"/metadata/uid","value":"u"},{"op":"test","path":"/metadata/finalizers/1","value":"b"},{"op":"remove","path":"/metadata/finalizers/1"}]`
	if !ok || string(patch) != want {
		t.Errorf("FinalizerRemoval = %s, %v; want %s", patch, ok, want)
	}
	if _, ok := FinalizerRemoval(p, "c"); ok {
		t.Error("a patch for a finalizer the PV lacks")
	}
	p.UID = ""
	if _, ok := FinalizerRemoval(p, "a"); ok {
		t.Error("a patch without a UID to test")
	}
}
