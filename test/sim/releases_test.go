package sim

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/inflight"
)

// The previous release's model: it reads no format, and its claim writes
// leave the stored format as it is, whatever they carry.
func TestReleaseModel(t *testing.T) {
	claim := func(format string) *v1.PersistentVolumeClaim {
		c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns",
			Annotations: map[string]string{inflight.AnnVolume: "pvc-1"}}}
		if format != "-" {
			c.Annotations[inflight.AnnFormat] = format
		}
		return c
	}
	formatOf := func(c *v1.PersistentVolumeClaim) string {
		if f, ok := c.Annotations[inflight.AnnFormat]; ok {
			return f
		}
		return "-"
	}
	tests := []struct {
		name                  string
		rel                   release
		stored, sent          string // the format stored and in the write ("-": none)
		wantViewed, wantWrite string
	}{
		{"current: reads the format", current, "2", "2", "2", "2"},
		{"current: writes format 1 on a new record", current, "-", "1", "-", "1"},
		{"current: removes it with the record", current, "1", "-", "1", "-"},
		{"previous: reads none", previous, "2", "2", "-", "2"},
		{"previous: writes none on a new record", previous, "-", "1", "-", "-"},
		{"previous: leaves it when it drops the record", previous, "1", "-", "-", "1"},
		{"previous: leaves a newer one as it is", previous, "2", "1", "-", "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatOf(tt.rel.view(claim(tt.stored)).(*v1.PersistentVolumeClaim)); got != tt.wantViewed {
				t.Errorf("view: format %s, want %s", got, tt.wantViewed)
			}
			written := tt.rel.write(claim(tt.stored), claim(tt.sent)).(*v1.PersistentVolumeClaim)
			if got := formatOf(written); got != tt.wantWrite {
				t.Errorf("write: format %s, want %s", got, tt.wantWrite)
			}
			if written.Annotations[inflight.AnnVolume] != "pvc-1" {
				t.Errorf("write changed another annotation: %v", written.Annotations)
			}
		})
	}
}
