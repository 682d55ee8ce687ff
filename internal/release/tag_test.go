package release

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestDecideTag(t *testing.T) {
	const a, b = "sha256:aaa", "sha256:bbb"
	for _, tc := range []struct {
		name          string
		current, want string
		force         bool
		action        tagAction
	}{
		{"absent", "", a, false, pushTag},
		{"absent, forced", "", a, true, pushTag},
		{"same bytes", a, a, false, skipTag},
		{"same bytes, forced", a, a, true, skipTag},
		{"other bytes", b, a, false, refuseTag},
		{"other bytes, forced", b, a, true, pushTag},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideTag(tc.current, tc.want, tc.force); got != tc.action {
				t.Errorf("decideTag(%q, %q, %v) = %v, want %v", tc.current, tc.want, tc.force, got, tc.action)
			}
		})
	}
}

func TestAbsent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		absent bool
	}{
		{"nil", nil, false},
		{"404 without a body (HEAD)", &transport.Error{StatusCode: http.StatusNotFound}, true},
		{"manifest unknown", &transport.Error{StatusCode: http.StatusBadRequest, Errors: []transport.Diagnostic{{Code: transport.ManifestUnknownErrorCode}}}, true},
		{"name unknown, wrapped", fmt.Errorf("x: %w", &transport.Error{StatusCode: http.StatusBadRequest, Errors: []transport.Diagnostic{{Code: transport.NameUnknownErrorCode}}}), true},
		{"unauthorized", &transport.Error{StatusCode: http.StatusUnauthorized}, false},
		{"server error", &transport.Error{StatusCode: http.StatusInternalServerError}, false},
		{"no answer", errors.New("connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := absent(tc.err); got != tc.absent {
				t.Errorf("absent(%v) = %v, want %v", tc.err, got, tc.absent)
			}
		})
	}
}
