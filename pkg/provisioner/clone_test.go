package provisioner

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// cloneDriver is the smallest Driver: cloneSource only asks its name.
type cloneDriver struct{}

func (cloneDriver) DriverName() string { return driverNm }
func (cloneDriver) CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	panic("not called")
}
func (cloneDriver) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	panic("not called")
}

// sourcePair is the bound claim apps/src (UID src-uid) and its PV pv-src
// of driverNm, handle "handle-src".
func sourcePair() (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	src := newClaim(func(c *v1.PersistentVolumeClaim) {
		c.Name, c.UID = "src", "src-uid"
		c.Spec.VolumeName = "pv-src"
		c.Status.Phase = v1.ClaimBound
	})
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-src"},
		Spec: v1.PersistentVolumeSpec{
			Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				CSI: &v1.CSIPersistentVolumeSource{Driver: driverNm, VolumeHandle: "handle-src"}},
			ClaimRef: &v1.ObjectReference{Namespace: testNS, Name: "src", UID: "src-uid"},
		},
	}
	return src, pv
}

func cloneOf(name string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: name}
	}
}

func TestCloneSource(t *testing.T) {
	block := v1.PersistentVolumeBlock
	tests := []struct {
		name    string
		noClone bool // the driver lacks CLONE_VOLUME
		claim   *v1.PersistentVolumeClaim
		src     func(*v1.PersistentVolumeClaim, *v1.PersistentVolume)
		wantErr string
	}{
		{name: "no data source", claim: newClaim()},
		{name: "a bound claim of the same class and driver", claim: newClaim(cloneOf("src"))},
		{name: "a larger clone", claim: newClaim(cloneOf("src"), requested("2Gi"))},
		{name: "Block clone of a Block source", claim: newClaim(cloneOf("src"), volumeMode(block)),
			src: func(c *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
				c.Spec.VolumeMode, pv.Spec.VolumeMode = &block, &block
			}},
		{name: "Block clone of a Filesystem source", claim: newClaim(cloneOf("src"), volumeMode(block)),
			wantErr: "the source is Filesystem, the clone requests Block"},
		{name: "Filesystem clone of a Block source", claim: newClaim(cloneOf("src")),
			src: func(c *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
				c.Spec.VolumeMode, pv.Spec.VolumeMode = &block, &block
			},
			wantErr: "the source is Block, the clone requests Filesystem"},
		{name: "a snapshot source, with no snapshot API", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			group := "snapshot.storage.k8s.io"
			c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "snap"}
		}), wantErr: "cannot restore snapshots"},
		{name: "a driver without CLONE_VOLUME", noClone: true, claim: newClaim(cloneOf("src")), wantErr: "cannot clone"},
		{name: "a missing source", claim: newClaim(cloneOf("nothere")), wantErr: "not found"},
		{name: "a source being deleted", claim: newClaim(cloneOf("src")), wantErr: "is being deleted",
			src: func(c *v1.PersistentVolumeClaim, _ *v1.PersistentVolume) {
				c.DeletionTimestamp = &metav1.Time{}
				c.Finalizers = []string{"kubernetes.io/pvc-protection"}
			}},
		{name: "an unbound source", claim: newClaim(cloneOf("src")), wantErr: "is not bound",
			src: func(c *v1.PersistentVolumeClaim, _ *v1.PersistentVolume) {
				c.Spec.VolumeName, c.Status.Phase = "", v1.ClaimPending
			}},
		{name: "a source of another class", claim: newClaim(cloneOf("src")), wantErr: "another storage class",
			src: func(c *v1.PersistentVolumeClaim, _ *v1.PersistentVolume) {
				other := "slow"
				c.Spec.StorageClassName = &other
			}},
		{name: "a smaller clone", claim: newClaim(cloneOf("src"), requested("512Mi")), wantErr: "less than its source's"},
		{name: "a source of another driver", claim: newClaim(cloneOf("src")), wantErr: "does not belong to the driver",
			src: func(_ *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) { pv.Spec.CSI.Driver = "other.csi" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, pv := sourcePair()
			if tt.src != nil {
				tt.src(src, pv)
			}
			p := &Provisioner{o: Options{Client: fake.NewClientset(src, pv), Driver: cloneDriver{}, Clone: !tt.noClone}}
			got, err := p.contentSource(t.Context(), tt.claim, false)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if tt.claim.Spec.DataSource == nil {
				if got != nil {
					t.Fatalf("a claim without data source got %+v", got)
				}
				return
			}
			if h := got.content.GetVolume().GetVolumeId(); h != "handle-src" {
				t.Errorf("content source volume %q, want handle-src", h)
			}
			if got.claim == nil || got.claim.UID != "src-uid" {
				t.Errorf("source claim %v, want apps/src", got.claim)
			}
		})
	}
}
