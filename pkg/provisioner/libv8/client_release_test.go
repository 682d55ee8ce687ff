package libv8

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
