package request

import (
	"maps"
	"slices"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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

func modes(m ...v1.PersistentVolumeAccessMode) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.AccessModes = m }
}
func volumeMode(m v1.PersistentVolumeMode) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeMode = &m }
}
func requested(q string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.Resources.Requests = v1.ResourceList{v1.ResourceStorage: resource.MustParse(q)}
	}
}
func limit(q string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.Resources.Limits = v1.ResourceList{v1.ResourceStorage: resource.MustParse(q)}
	}
}
func noRequest() claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.Resources.Requests = nil }
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

func seg(pairs ...string) Segment { return Segment(kv(pairs...)) }

// expr is one match-label expression; term gathers them.
func expr(key string, values ...string) v1.TopologySelectorLabelRequirement {
	return v1.TopologySelectorLabelRequirement{Key: key, Values: values}
}
func term(exprs ...v1.TopologySelectorLabelRequirement) v1.TopologySelectorTerm {
	return v1.TopologySelectorTerm{MatchLabelExpressions: exprs}
}

// segments turns CSI topologies back into segments, keeping the order.
func segments(ts []*csi.Topology) []Segment {
	out := make([]Segment, 0, len(ts))
	for _, t := range ts {
		out = append(out, Segment(t.GetSegments()))
	}
	return out
}

func segmentsEqual(a, b []Segment) bool {
	return slices.EqualFunc(a, b, func(x, y Segment) bool { return maps.Equal(x, y) })
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

func restoreOf(name string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: name}
		c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: name}
	}
}

func cloneOf(name string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: name}
	}
}

const region = "topology.example.com/region"
