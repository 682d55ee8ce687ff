package release

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/tether-csi/tether/internal/cli"
)

func TestPushCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		status   int    // cli.ExitCode of the error
		stdout   string // a prefix
		errUsage bool   // the usage on stderr (never: a syntax error is the caller's to print, in one line)
	}{
		{"version", []string{"-version"}, 0, "tether-push ", false},
		{"help", []string{"-h"}, 0, "usage: tether-push", false},
		{"an argument", []string{"somewhere"}, cli.ExitBadSetting, "", false},
		{"version with an argument", []string{"-version", "somewhere"}, cli.ExitBadSetting, "", false},
		{"an unknown flag", []string{"-registy", "x"}, cli.ExitBadSetting, "", false},
		{"a registry no image can be named in", []string{"-registry", "Registry.example.com/UPPER", "-version"}, cli.ExitBadSetting, "", false},
		{"no bundle here", []string{"-dir", t.TempDir()}, cli.ExitFailed, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := PushCommand(t.Context(), "tether-push", tc.args, &stdout, &stderr)
			if got := cli.ExitCode(err); got != tc.status {
				t.Errorf("error %v: status %d, want %d", err, got, tc.status)
			}
			if tc.name == "help" && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("help: %v, want flag.ErrHelp", err)
			}
			if !strings.HasPrefix(stdout.String(), tc.stdout) || (tc.stdout == "" && tc.name != "no bundle here" && stdout.Len() > 0) {
				t.Errorf("stdout %q, want it to start with %q", stdout.String(), tc.stdout)
			}
			if got := strings.Contains(stderr.String(), "-registry"); got != tc.errUsage {
				t.Errorf("usage on stderr: %v, want %v: %q", got, tc.errUsage, stderr.String())
			}
		})
	}
}

func TestCheckPush(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		registry string
		want     string // a fragment of the error; "" for none
	}{
		{nil, "", ""},
		{nil, "registry.example.com/tether", ""},
		{nil, "localhost:5001/tether/", ""},
		{[]string{"x"}, "", "unexpected arguments"},
		{nil, "registry.example.com/Tether", "-registry"},
		{nil, "registry example", "-registry"},
	} {
		err := checkPush(tc.args, tc.registry)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q %q: %v", tc.args, tc.registry, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q %q: %v, want %q", tc.args, tc.registry, err, tc.want)
		}
	}
}
