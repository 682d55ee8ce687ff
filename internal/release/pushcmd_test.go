package release

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestPushCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		help     bool
		stdout   string
		anyError bool
	}{
		{"version", []string{"-version"}, false, "tether-push ", false},
		{"help", []string{"-h"}, true, "", true},
		{"an argument", []string{"somewhere"}, true, "", true},
		{"an unknown flag", []string{"-registy", "x"}, false, "", true},
		{"no bundle here", []string{"-dir", t.TempDir()}, false, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := PushCommand(t.Context(), "tether-push", tc.args, &stdout, &stderr)
			if (err != nil) != tc.anyError || errors.Is(err, flag.ErrHelp) != tc.help {
				t.Errorf("error %v, want error=%v help=%v", err, tc.anyError, tc.help)
			}
			if !strings.HasPrefix(stdout.String(), tc.stdout) {
				t.Errorf("stdout %q, want it to start with %q", stdout.String(), tc.stdout)
			}
			if tc.help && !strings.Contains(stderr.String(), "-registry") {
				t.Errorf("no usage on stderr: %q", stderr.String())
			}
		})
	}
}
