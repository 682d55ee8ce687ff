package nodeloss

import (
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPolicy: only the exact value "true" opts a class in; a class that
// cannot be read opts nothing in.
func TestPolicy(t *testing.T) {
	class := func(ann map[string]string) *storagev1.StorageClass {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local", Annotations: ann}}
	}
	tests := []struct {
		name  string
		class *storagev1.StorageClass
		want  bool
	}{
		{"no class", nil, false},
		{"no annotation", class(nil), false},
		{"true", class(map[string]string{AnnPolicy: "true"}), true},
		{"false", class(map[string]string{AnnPolicy: "false"}), false},
		{"True (not the exact value)", class(map[string]string{AnnPolicy: "True"}), false},
		{"empty", class(map[string]string{AnnPolicy: ""}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Policy(tt.class); got != tt.want {
				t.Errorf("Policy = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDefaultGrace: --node-loss-grace defaults to five minutes, as
// docs/binder.md says.
func TestDefaultGrace(t *testing.T) {
	if DefaultGrace != 5*time.Minute {
		t.Errorf("DefaultGrace = %s, docs/binder.md says 5m", DefaultGrace)
	}
}
