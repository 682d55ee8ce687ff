package inflight

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	testDriver = "csi.tether.dev"
	testVolume = "pvc-1"
)

// claim is ns/c with UID uid-1, the given finalizers, and a record for
// volume (of testDriver) when volume is not empty.
func claim(volume string, finalizers ...string) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-1", Finalizers: finalizers}}
	if volume != "" {
		c.Annotations = map[string]string{AnnVolume: volume, AnnDriver: testDriver, "keep": "me"}
	}
	return c
}

// pv is a CSI PV of the name and driver, pre-bound to the claim UID uid
// (none when uid is empty).
func pv(name, driver, uid string) *v1.PersistentVolume {
	p := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.CSI = &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "h-" + name}
	if uid != "" {
		p.Spec.ClaimRef = &v1.ObjectReference{Namespace: "ns", Name: "c", UID: types.UID(uid)}
	}
	return p
}

func TestSettle(t *testing.T) {
	tests := []struct {
		name    string
		claim   *v1.PersistentVolumeClaim
		pv      *v1.PersistentVolume
		settled bool
		left    []string
	}{
		{"the PV the record names", claim(testVolume, Finalizer), pv(testVolume, testDriver, "uid-1"), true, nil},
		{"other finalizers stay", claim(testVolume, "a", Finalizer, "b"), pv(testVolume, testDriver, "uid-1"), true, []string{"a", "b"}},
		{"no record", claim("", "a"), pv(testVolume, testDriver, "uid-1"), false, []string{"a"}},
		{"a record of an older tether names no volume: only the provisioner settles it", claim("", Finalizer), pv(testVolume, testDriver, "uid-1"), false, []string{Finalizer}},
		// Defect: a claim bound to a recycled volume while its own
		// CreateVolume runs lost its record, and its volume with it.
		{"another provisioned PV bound to the claim (its own volume is still on its way)", claim(testVolume, Finalizer), pv("pvc-other", testDriver, "uid-1"), false, []string{Finalizer}},
		{"a PV of the name but of another driver", claim(testVolume, Finalizer), pv(testVolume, "other.csi", "uid-1"), false, []string{Finalizer}},
		{"a PV of the name for an earlier claim of the same name", claim(testVolume, Finalizer), pv(testVolume, testDriver, "other"), false, []string{Finalizer}},
		{"an unbound PV of the name", claim(testVolume, Finalizer), pv(testVolume, testDriver, ""), false, []string{Finalizer}},
		{"no PV", claim(testVolume, Finalizer), nil, false, []string{Finalizer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Settle(tt.claim, tt.pv); got != tt.settled {
				t.Errorf("Settle = %v, want %v", got, tt.settled)
			}
			if !slices.Equal(tt.claim.Finalizers, tt.left) {
				t.Errorf("finalizers %v, want %v", tt.claim.Finalizers, tt.left)
			}
			if _, has := tt.claim.Annotations[AnnVolume]; tt.settled && has {
				t.Errorf("the record's annotations stayed: %v", tt.claim.Annotations)
			}
		})
	}
}

func TestRecordAndForget(t *testing.T) {
	c := claim("", "a")
	if !Record(c, testDriver, testVolume) {
		t.Fatal("Record changed nothing")
	}
	if d, n, ok := Volume(c); !ok || d != testDriver || n != testVolume {
		t.Fatalf("Volume = %q %q %v", d, n, ok)
	}
	if Record(c, testDriver, testVolume) {
		t.Error("a second Record of the same volume changed the claim")
	}
	if !slices.Equal(c.Finalizers, []string{"a", Finalizer}) {
		t.Errorf("finalizers %v", c.Finalizers)
	}
	c.Annotations[AnnSnapshot] = "snap-handle" // a restore's source goes with the record
	if !Forget(c) || Holds(c) || c.Annotations != nil || !slices.Equal(c.Finalizers, []string{"a"}) {
		t.Errorf("after Forget: finalizers %v, annotations %v", c.Finalizers, c.Annotations)
	}
	if Forget(c) {
		t.Error("Forget of nothing changed the claim")
	}
	kept := claim(testVolume, Finalizer)
	if s := Strip(kept); Holds(s) || s.Annotations["keep"] != "me" || !Holds(kept) {
		t.Errorf("Strip: %v / original %v", s.ObjectMeta, kept.ObjectMeta)
	}
}
