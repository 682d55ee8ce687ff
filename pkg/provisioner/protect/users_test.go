package protect

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/inflight"
)

// makingVolume: which claims made from a source may still be making their
// volume from it, so that the source keeps its protection.
func TestMakingVolume(t *testing.T) {
	now := metav1.Now()
	claim := func(volumeName, record, format string, deleted bool) *v1.PersistentVolumeClaim {
		c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u"}}
		c.Spec.VolumeName = volumeName
		if record != "" {
			inflight.Record(c, "csi.tether.dev", record)
		}
		if format != "" {
			c.Annotations[inflight.AnnFormat] = format
		}
		if deleted {
			c.DeletionTimestamp = &now
		}
		return c
	}
	tests := []struct {
		name  string
		claim *v1.PersistentVolumeClaim
		want  bool
	}{
		{"pending", claim("", "", "", false), true},
		{"bound, no record", claim("pvc-u", "", "", false), false},
		{"bound to its recorded volume", claim("pvc-u", "pvc-u", "", false), false},
		{"bound to another volume than its record's", claim("pvc-other", "pvc-u", "", false), true},
		{"deleted with its record", claim("", "pvc-u", "", true), true},
		{"deleted without a record", claim("", "", "", true), false},
		// docs/upgrade.md: a record this version does not read may stand
		// for a call still running from the source.
		{"bound, a record of a format this version does not read", claim("pvc-u", "pvc-u", "2", false), true},
		{"bound, a format-1 record of its volume", claim("pvc-u", "pvc-u", "1", false), false},
	}
	for _, tt := range tests {
		if got := makingVolume(tt.claim); got != tt.want {
			t.Errorf("%s: makingVolume = %v, want %v", tt.name, got, tt.want)
		}
	}
}
