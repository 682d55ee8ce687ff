package request

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
)

func TestPublishReadOnly(t *testing.T) {
	const (
		rwo  = v1.ReadWriteOnce
		rox  = v1.ReadOnlyMany
		rwx  = v1.ReadWriteMany
		rwop = v1.ReadWriteOncePod
	)
	for _, tc := range []struct {
		name  string
		modes []v1.PersistentVolumeAccessMode
		flag  bool
		want  bool
	}{
		{"ReadOnlyMany alone, with the flag", accessModes(rox), true, true},
		{"ReadOnlyMany alone, without the flag", accessModes(rox), false, false},
		{"ReadOnlyMany and ReadWriteOnce", accessModes(rox, rwo), true, false},
		{"ReadWriteOnce and ReadOnlyMany", accessModes(rwo, rox), true, false},
		{"ReadOnlyMany and ReadWriteMany", accessModes(rox, rwx), true, false},
		{"ReadOnlyMany twice: two capabilities", accessModes(rox, rox), true, false},
		{"ReadWriteOnce", accessModes(rwo), true, false},
		{"ReadWriteOncePod", accessModes(rwop), true, false},
		{"ReadWriteMany", accessModes(rwx), true, false},
		{"no access mode", nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PublishReadOnly(tc.modes, tc.flag); got != tc.want {
				t.Errorf("PublishReadOnly(%v, %v) = %v, want %v", tc.modes, tc.flag, got, tc.want)
			}
			if len(tc.modes) == 0 {
				return
			}
			// external-provisioner decides on the request's capabilities:
			// exactly one, MULTI_NODE_READER_ONLY. The claim's modes give
			// the same answer, with and without SINGLE_NODE_MULTI_WRITER.
			for _, snmw := range []bool{false, true} {
				caps, err := VolumeCapabilities(newClaim(modes(tc.modes...)), CapabilityOptions{SingleNodeMultiWriter: snmw})
				if err != nil {
					t.Fatal(err)
				}
				onCaps := tc.flag && len(caps) == 1 && caps[0].GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
				if onCaps != tc.want {
					t.Errorf("on the request's capabilities (single-node multi-writer %v): %v, want %v", snmw, onCaps, tc.want)
				}
			}
		})
	}
}

// TestBuildPVReadOnly: the decision reaches the PV's CSI source, for a
// filesystem and a block claim.
func TestBuildPVReadOnly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		claim *v1.PersistentVolumeClaim
		flag  bool
		want  bool
	}{
		{"filesystem ReadOnlyMany, flag", newClaim(modes(v1.ReadOnlyMany)), true, true},
		{"block ReadOnlyMany, flag", newClaim(modes(v1.ReadOnlyMany), volumeMode(v1.PersistentVolumeBlock)), true, true},
		{"filesystem ReadOnlyMany, no flag", newClaim(modes(v1.ReadOnlyMany)), false, false},
		{"ReadWriteOnce, flag", newClaim(modes(v1.ReadWriteOnce)), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := pvInput(tc.claim)
			in.ControllerPublishReadOnly = tc.flag
			pv, err := BuildPV(volumeResp("vol-1", 0), in)
			if err != nil {
				t.Fatal(err)
			}
			if got := pv.Spec.CSI.ReadOnly; got != tc.want {
				t.Errorf("csi.readOnly %v, want %v", got, tc.want)
			}
		})
	}
}

func accessModes(m ...v1.PersistentVolumeAccessMode) []v1.PersistentVolumeAccessMode { return m }
