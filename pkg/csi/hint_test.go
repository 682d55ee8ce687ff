package csi

import (
	"errors"
	"strings"
	"testing"
)

func TestSocketHint(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("connection error: desc = \"transport: Error while dialing: dial unix /csi/csi.sock: connect: no such file or directory\""), ""},
		{errors.New("connection error: desc = \"transport: Error while dialing: dial unix /csi/csi.sock: connect: permission denied\""), "uid 65532"},
	} {
		got := socketHint(tc.err, 65532)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("socketHint(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
