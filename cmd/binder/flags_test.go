package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/tether-csi/tether/internal/cli"
	"github.com/tether-csi/tether/internal/doccheck"
	"github.com/tether-csi/tether/internal/flagdoc"
)

// Every flag but klog's is in the docs' flag table, with its default.
func TestDocsListEveryFlag(t *testing.T) {
	o := defaultOptions()
	flagdoc.CheckREADME(t, newFlagSet(&o), "../../docs/binder.md")
}

// Every flag of the binder the README and the docs name in prose (all but
// the other programs' pages) takes the value they give it, and has the
// default they say.
func TestDocsProseFlags(t *testing.T) {
	flagdoc.CheckProse(t, func() *flag.FlagSet {
		o := defaultOptions()
		return newFlagSet(&o)
	}, "../..", "docs/provisioner.md", "docs/why.md", "docs/release.md")
}

// Issue 25: `binder --kubeconfig=kc foo --workers=0` ran with 100 workers
// (the flag package stops at the first argument that is not a flag).
// Issue 38: every value no binder can run with is found before it starts,
// by the flag package or by checkOptions.
func TestCheckOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // a fragment of the error; "" for none
	}{
		{nil, ""},
		{[]string{"--kubeconfig=kc", "--workers=3", "--version"}, ""},
		{[]string{"--kubeconfig=kc", "foo", "--workers=0"}, "unexpected arguments"},
		{[]string{"--no-such-flag"}, "unknown flag --no-such-flag"},
		{[]string{"--workers=x"}, "invalid value"},
		{[]string{"--workers=0"}, "--workers"},
		{[]string{"--resync-period=0s"}, "--resync-period"},
		{[]string{"--node-loss-grace=0s"}, "--node-loss-grace"},
		{[]string{"--kube-api-qps=0"}, "--kube-api-qps"},
		{[]string{"--kube-api-burst=-1"}, "--kube-api-burst"},
		{[]string{"--http-endpoint=8080"}, "--http-endpoint"},
		{[]string{"--http-endpoint=:8080"}, ""},
		{[]string{"--http-endpoint=:8443", "--metrics-secure"}, ""},
		{[]string{"--http-endpoint=:8443", "--metrics-secure", "--tls-cert-file=c", "--tls-private-key-file=k"}, ""},
		{[]string{"--metrics-secure"}, "needs an address"},
		{[]string{"--http-endpoint=:8443", "--metrics-secure", "--tls-cert-file=c"}, "go together"},
		{[]string{"--http-endpoint=:8080", "--tls-cert-file=c", "--tls-private-key-file=k"}, "need --metrics-secure"},
		{[]string{"--leader-elect-lease-duration=10s"}, "lease duration"},
		{[]string{"--leader-elect-renew-deadline=2s"}, "renew deadline"},
		{[]string{"--leader-elect-retry-period=0s"}, "retry period"},
		{[]string{"--leader-elect-resource-name="}, "no name"},
		{[]string{"--leader-elect=false", "--leader-elect-resource-name="}, ""},
	} {
		o := defaultOptions()
		err := parseFlags(&o, tc.args, io.Discard, io.Discard)
		if err == nil {
			err = checkOptions(o)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: refused: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v (workers %d), want an error naming %s", tc.args, err, o.workers, tc.want)
		}
	}
}

// Issue 38: --version prints only after every setting passed; a bad
// setting exits 2 whoever finds it; help is on stdout with status 0.
// Issue 51: a bad setting is one line, without the usage; --version names
// the program, whatever the file is called.
func TestBegin(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		status int
		exit   bool
		stdout string // a fragment; "" for nothing
		stderr string
	}{
		{[]string{"--version"}, 0, true, "binder ", ""},
		{[]string{"--workers=0", "--version"}, cli.ExitBadSetting, true, "", "--workers"},
		{[]string{"--kube-api-qps=0", "--version"}, cli.ExitBadSetting, true, "", "--kube-api-qps"},
		{[]string{"--leader-elect-retry-period=20s", "--version"}, cli.ExitBadSetting, true, "", "retry period"},
		{[]string{"--metrics-secure", "--version"}, cli.ExitBadSetting, true, "", "--metrics-secure"},
		{[]string{"--no-such-flag", "--version"}, cli.ExitBadSetting, true, "", "binder: unknown flag --no-such-flag (binder --help lists the flags)\n"},
		{[]string{"--resync-period=5"}, cli.ExitBadSetting, true, "", "binder: invalid value \"5\" for flag --resync-period: a duration needs a unit, e.g. 5s\n"},
		{[]string{"--resync=5s"}, cli.ExitBadSetting, true, "", "binder: unknown flag --resync: did you mean --resync-period? (binder --help lists the flags)\n"},
		{[]string{"--version", "x"}, cli.ExitBadSetting, true, "", "unexpected arguments"},
		{[]string{"-h"}, 0, true, "Usage: binder", ""},
		{[]string{"--workers=0", "--help"}, 0, true, "-resync-period", ""},
		{[]string{"--workers=3"}, 0, false, "", ""},
	} {
		var stdout, stderr bytes.Buffer
		_, status, exit := begin(append([]string{"/usr/local/bin/tether-binder-v0"}, tc.args...), &stdout, &stderr)
		if status != tc.status || exit != tc.exit {
			t.Errorf("%q: status %d, exit %v; want %d, %v\nstderr: %s", tc.args, status, exit, tc.status, tc.exit, stderr.String())
		}
		for _, w := range []struct{ name, got, want string }{{"stdout", stdout.String(), tc.stdout}, {"stderr", stderr.String(), tc.stderr}} {
			if (w.want == "") != (w.got == "") || !strings.Contains(w.got, w.want) {
				t.Errorf("%q: %s %q, want %q", tc.args, w.name, w.got, w.want)
			}
		}
		if slices.Contains(tc.args, "--version") && status == 0 && !strings.HasPrefix(stdout.String(), tc.stdout) {
			t.Errorf("%q: stdout %q does not start with %q", tc.args, stdout.String(), tc.stdout)
		}
		if status == cli.ExitBadSetting && (strings.Count(stderr.String(), "\n") != 1 || !strings.HasPrefix(stderr.String(), "binder: ")) {
			t.Errorf("%q: a bad setting in more than one line, or not the binder's: %q", tc.args, stderr.String())
		}
	}
}

// Every container of deploy/ and examples/ that runs the binder passes it
// args its own flag parser takes, and no stray argument.
func TestManifestArgsParse(t *testing.T) {
	containers, err := doccheck.ManifestContainers("../..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, cs := range containers {
		for _, c := range cs {
			if doccheck.ImageProgram(c.Image) != "binder" {
				continue
			}
			n++
			o := defaultOptions()
			fs := newFlagSet(&o)
			fs.SetOutput(io.Discard)
			err := fs.Parse(c.Args)
			if err == nil && fs.NArg() > 0 {
				err = fmt.Errorf("stray arguments %q", fs.Args())
			}
			if err != nil {
				t.Error(doccheck.ArgsProblem(path, c, err))
			}
		}
	}
	if n == 0 {
		t.Error("no container of deploy/ or examples/ runs the binder: the reading is broken")
	}
}
