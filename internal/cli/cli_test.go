package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		status         int
		stdout, stderr string // fragments; "" for nothing at all
	}{
		{args: []string{"-h"}, status: 0, stdout: "Usage of prog"},
		{args: []string{"--help"}, status: 0, stdout: "Usage of prog"},
		{args: []string{"-help"}, status: 0, stdout: "Usage of prog"},
		{args: []string{"--nope"}, status: ExitBadSetting, stderr: "not defined: -nope"},
		{args: []string{"--n=x"}, status: ExitBadSetting, stderr: "invalid value"},
		{args: []string{"--n=3"}, status: 0},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("prog", flag.ContinueOnError)
			fs.Int("n", 1, "a number")
			var stdout, stderr bytes.Buffer
			err := Parse(fs, tc.args, &stdout, &stderr)
			if got := ExitCode(err); got != tc.status {
				t.Errorf("exit status %d (%v), want %d", got, err, tc.status)
			}
			for _, w := range []struct {
				name, got, want string
			}{{"stdout", stdout.String(), tc.stdout}, {"stderr", stderr.String(), tc.stderr}} {
				if (w.want == "") != (w.got == "") || !strings.Contains(w.got, w.want) {
					t.Errorf("%s %q, want %q", w.name, w.got, w.want)
				}
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{flag.ErrHelp, 0},
		{fmt.Errorf("x: %w", flag.ErrHelp), 0},
		{errors.New("the driver went away"), ExitFailed},
		{BadSetting(errors.New("--workers must be at least 1")), ExitBadSetting},
		{fmt.Errorf("wrapped: %w", BadSetting(errors.New("x"))), ExitBadSetting},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if BadSetting(nil) != nil {
		t.Error("BadSetting(nil) is not nil")
	}
	if err := BadSetting(errors.New("msg")); err.Error() != "msg" {
		t.Errorf("message %q", err)
	}
}
