package provisioner

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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

func volumeMode(m v1.PersistentVolumeMode) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeMode = &m }
}
func requested(q string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.Resources.Requests = v1.ResourceList{v1.ResourceStorage: resource.MustParse(q)}
	}
}
func claimAnn(k, v string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { metav1.SetMetaDataAnnotation(&c.ObjectMeta, k, v) }
}

// newClass is the class "fast" with the given parameters and mount options.
func newClass(params map[string]string, mountOptions ...string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:   metav1.ObjectMeta{Name: testClass},
		Provisioner:  driverNm,
		Parameters:   params,
		MountOptions: mountOptions,
	}
}

// kv builds a map from alternating keys and values.
func kv(pairs ...string) map[string]string {
	m := make(map[string]string, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

func seg(pairs ...string) request.Segment { return request.Segment(kv(pairs...)) }

// segments turns CSI topologies back into segments, keeping the order.
func segments(ts []*csi.Topology) []request.Segment {
	out := make([]request.Segment, 0, len(ts))
	for _, t := range ts {
		out = append(out, request.Segment(t.GetSegments()))
	}
	return out
}

func segmentsEqual(a, b []request.Segment) bool {
	return slices.EqualFunc(a, b, func(x, y request.Segment) bool { return maps.Equal(x, y) })
}

// checkErr fails unless err matches want: "" for no error, else a
// substring of the message.
func checkErr(t *testing.T, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
	return err == nil
}

func vacName(name string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeAttributesClassName = &name }
}

func selector(c *v1.PersistentVolumeClaim) {
	c.Spec.Selector = &metav1.LabelSelector{MatchLabels: kv("tier", "gold")}
}

func newVAC(name, driver string, params map[string]string) *storagev1.VolumeAttributesClass {
	return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: driver, Parameters: params}
}
