package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tether-csi/tether/internal/cli"
)

// Issue 38: help on stdout with status 0; every bad setting exits 2, before
// -version prints; a push that fails exits 1. Issue 51: a syntax error is
// one line, without the usage; -version names tether-push, whatever the
// file is called.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		status         int
		stdout, stderr string // fragments; "" for nothing
	}{
		{[]string{"-h"}, 0, "usage: tether-push", ""},
		{[]string{"--help"}, 0, "-registry", ""},
		{[]string{"-version"}, 0, "tether-push ", ""},
		{[]string{"-registy", "x"}, cli.ExitBadSetting, "", "tether-push: unknown flag -registy: did you mean -registry? (tether-push --help lists the flags)\n"},
		{[]string{"-force=maybe"}, cli.ExitBadSetting, "", "tether-push: invalid value \"maybe\" for flag -force: a boolean: true or false\n"},
		{[]string{"-version", "somewhere"}, cli.ExitBadSetting, "", "unexpected arguments"},
		{[]string{"-registry", "Registry.example.com/UPPER", "-version"}, cli.ExitBadSetting, "", "-registry"},
		{[]string{"-dir", t.TempDir()}, cli.ExitFailed, "", "images.json"},
	} {
		var stdout, stderr bytes.Buffer
		got := run(t.Context(), append([]string{"/tmp/tether-push-darwin-arm64"}, tc.args...), &stdout, &stderr)
		if got != tc.status {
			t.Errorf("%q: status %d, want %d\nstderr: %s", tc.args, got, tc.status, stderr.String())
		}
		for _, w := range []struct{ name, got, want string }{{"stdout", stdout.String(), tc.stdout}, {"stderr", stderr.String(), tc.stderr}} {
			if (w.want == "") != (w.got == "") || !strings.Contains(w.got, w.want) {
				t.Errorf("%q: %s %q, want %q", tc.args, w.name, w.got, w.want)
			}
		}
	}
}
