package provisioner

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// A PV the library creates names the claim's version that Provision wrote
// (its in-flight record), not the library's older copy; other claims' PVs,
// and the library's own object, are left as they are.
func TestLibraryClientClaimVersion(t *testing.T) {
	p := &Provisioner{}
	p.handoffs.add("uid-1", "42", time.Now())
	for _, tc := range []struct {
		name, uid, want string
	}{
		{name: "handed off", uid: "uid-1", want: "42"},
		{name: "another claim", uid: "uid-2", want: "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			pv := patchPV("", "f")
			pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: "ns", Name: "c", UID: types.UID(tc.uid), ResourceVersion: "7"}
			out, err := p.LibraryClient(cs).CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Spec.ClaimRef.ResourceVersion; got != tc.want {
				t.Errorf("claimRef resourceVersion %q, want %q", got, tc.want)
			}
			if pv.Spec.ClaimRef.ResourceVersion != "7" {
				t.Error("the library's own PV object was changed")
			}
		})
	}
}

func patchPV(rv string, finalizers ...string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv", ResourceVersion: rv, Finalizers: finalizers,
			Annotations: map[string]string{"a": "b"}},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete},
	}
}
