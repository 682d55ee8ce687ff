package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"
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
		// A syntax error is returned, not printed: the caller says it.
		{args: []string{"--nope"}, status: ExitBadSetting},
		{args: []string{"--n=x"}, status: ExitBadSetting},
		{args: []string{"--n=3"}, status: 0},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("prog", flag.ContinueOnError)
			fs.Int("n", 1, "a number")
			var stdout, stderr bytes.Buffer
			err := Parse(fs, tc.args, &stdout, &stderr)
			if err != nil && !errors.Is(err, flag.ErrHelp) && strings.Contains(err.Error(), "Usage") {
				t.Errorf("the usage in the error: %v", err)
			}
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

// TestExplain: a syntax error names the flag as it was typed and says
// what the value must be, in one line.
func TestExplain(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("binder", flag.ContinueOnError)
		fs.Duration("resync-period", time.Second, "")
		fs.Bool("enable-pprof", false, "")
		fs.Int("workers", 1, "")
		fs.Uint("worker-threads", 1, "")
		fs.Float64("kube-api-qps", 1, "")
		fs.Int("v", 0, "")
		fs.Func("feature-gates", "", func(s string) error { return errors.New("missing bool value for " + s) })
		fs.String("kubeconfig", "", "")
		fs.String("kube-api-burst", "", "")
		return fs
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--resync-period=5"}, `invalid value "5" for flag --resync-period: a duration needs a unit, e.g. 5s`},
		{[]string{"--resync-period", "15"}, `invalid value "15" for flag --resync-period: a duration needs a unit, e.g. 15s`},
		{[]string{"-resync-period=1.5"}, `invalid value "1.5" for flag -resync-period: a duration needs a unit, e.g. 5s`},
		{[]string{"--resync-period=soon"}, `invalid value "soon" for flag --resync-period: a duration is a number and a unit: 300ms, 5s, 2m, 1h`},
		{[]string{"--enable-pprof=yes"}, `invalid value "yes" for flag --enable-pprof: a boolean: true or false`},
		{[]string{"--workers=many"}, `invalid value "many" for flag --workers: a whole number`},
		{[]string{"--worker-threads=-1"}, `invalid value "-1" for flag --worker-threads: a whole number, 0 or more`},
		{[]string{"--kube-api-qps=fast"}, `invalid value "fast" for flag --kube-api-qps: a number`},
		{[]string{"-v=x"}, `invalid value "x" for flag -v: a whole number`},
		{[]string{"--feature-gates=A"}, `invalid value "A" for flag --feature-gates: missing bool value for A`},
		{[]string{`--workers="q"`}, `invalid value "\"q\"" for flag --workers: a whole number`},
		{[]string{"--resync=5"}, `unknown flag --resync: did you mean --resync-period? (binder --help lists the flags)`},
		{[]string{"--worker=5"}, `unknown flag --worker (binder --help lists the flags)`}, // two flags start so
		{[]string{"--kubeconfg=x"}, `unknown flag --kubeconfg: did you mean --kubeconfig? (binder --help lists the flags)`},
		{[]string{"-kubeconfg=x"}, `unknown flag -kubeconfg: did you mean -kubeconfig? (binder --help lists the flags)`},
		{[]string{"--frobnicate"}, `unknown flag --frobnicate (binder --help lists the flags)`},
		{[]string{"--workers"}, `flag needs an argument: -workers`},
	} {
		fs := newFS()
		err := Explain(fs, tc.args, fs.Parse(tc.args))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %s", tc.args, err, tc.want)
		}
	}
	if err := Explain(newFS(), nil, nil); err != nil {
		t.Errorf("no error: %v", err)
	}
}
