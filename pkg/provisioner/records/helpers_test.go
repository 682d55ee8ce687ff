package records

import (
	"github.com/tether-csi/tether/pkg/inflight"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Small builders for plain API objects; options change the defaults.

const (
	testNS    = "apps"
	testClaim = "data"
	testClass = "fast"
	testUID   = "4f9d1c2e-6a1b-4c8d-9e0f-112233445566"
	driverNm  = "csi.tether.dev"
)

type claimOpt func(*v1.PersistentVolumeClaim)

// newClaim is apps/data, UID testUID, class "fast", requesting 1Gi with
// ReadWriteOnce and no volumeMode (Filesystem).
func newClaim(opts ...claimOpt) *v1.PersistentVolumeClaim {
	class := testClass
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testClaim, UID: types.UID(testUID), ResourceVersion: "7"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName: &class,
			Resources: v1.VolumeResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// recordOf gives the claim the record's finalizer and a format annotation
// of value f.
func recordOf(f string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Finalizers = append(c.Finalizers, inflight.Finalizer)
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, inflight.AnnFormat, f)
	}
}

func claimAnn(k, v string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { metav1.SetMetaDataAnnotation(&c.ObjectMeta, k, v) }
}

// The volume of the test claim.
const testVolume = "pvc-" + testUID
