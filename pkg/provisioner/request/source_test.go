package request

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestDataSourceOf(t *testing.T) {
	tests := []struct {
		name    string
		claim   *v1.PersistentVolumeClaim
		want    SourceKind
		wantErr string
	}{
		{name: "none", claim: newClaim(), want: NoSource},
		{name: "a claim", claim: newClaim(cloneOf("src")), want: CloneSource},
		{name: "a snapshot", claim: newClaim(restoreOf("snap")), want: SnapshotSource},
		{name: "a snapshot in dataSourceRef only", claim: newClaim(restoreOf("snap"), func(c *v1.PersistentVolumeClaim) { c.Spec.DataSource = nil }),
			want: SnapshotSource},
		{name: "a VolumeSnapshot of another group: a populator's", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: ptr.To("example.com"), Kind: "VolumeSnapshot", Name: "x"}
		}), want: PopulatorSource},
		{name: "a populator's kind", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: ptr.To("hello.example.com"), Kind: "Hello", Name: "x"}
		}), want: PopulatorSource},
		{name: "a snapshot in another namespace", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: "x", Namespace: ptr.To("other")}
		}), wantErr: "cross-namespace data sources are not supported"},
		{name: "a dataSourceRef naming the claim's own namespace", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: "x", Namespace: ptr.To(testNS)}
		}), want: SnapshotSource},
		{name: "a snapshot without a name", claim: newClaim(restoreOf("")), wantErr: "has no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, err := DataSourceOf(tt.claim)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if ds.Kind != tt.want {
				t.Errorf("kind %v, want %v", ds.Kind, tt.want)
			}
		})
	}
}
