package records

import (
	"context"
	"errors"
	"testing"

	"github.com/tether-csi/tether/pkg/inflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Record writes the record in this version's format, and never writes over
// a record of a format it does not read (docs/upgrade.md).
func TestWriterRecordFormats(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		format     string // the claim's record's format annotation; "" for no record
		wantErr    bool
		wantFormat string // on the stored claim after Record
	}{
		{name: "no record: written in format 1", wantFormat: "1"},
		{name: "a format-1 record of another volume: written again", format: "1", wantFormat: "1"},
		{name: "a newer release's format: left, UnreadError", format: "2", wantErr: true, wantFormat: "2"},
		{name: "garbage: left, UnreadError", format: "v2", wantErr: true, wantFormat: "v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := newClaim()
			if tt.format != "" {
				claim = newClaim(recordOf(tt.format), claimAnn(inflight.AnnVolume, "pvc-other"), claimAnn(inflight.AnnDriver, driverNm))
			}
			client := fake.NewClientset(claim)
			w := &Writer{Client: client, Driver: driverNm}
			_, err := w.Record(ctx, claim, testVolume)
			var unread UnreadError
			if got := errors.As(err, &unread); got != tt.wantErr {
				t.Fatalf("Record error %v; want an UnreadError: %v", err, tt.wantErr)
			}
			stored, gerr := client.CoreV1().PersistentVolumeClaims(testNS).Get(ctx, testClaim, metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			if got := stored.Annotations[inflight.AnnFormat]; got != tt.wantFormat {
				t.Errorf("stored format %q, want %q", got, tt.wantFormat)
			}
			if tt.wantErr && (stored.Annotations[inflight.AnnVolume] != "pvc-other" || len(client.Actions()) != 1) {
				t.Errorf("an unread record was written over: %v, %d actions", stored.Annotations, len(client.Actions()))
			}
		})
	}
}
