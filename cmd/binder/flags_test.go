package main

import (
	"testing"

	"github.com/tether-csi/tether/internal/flagdoc"
)

// Every flag but klog's is in the docs' flag table, with its default.
func TestDocsListEveryFlag(t *testing.T) {
	o := defaultOptions()
	flagdoc.CheckREADME(t, newFlagSet(&o), "../../docs/binder.md")
}

// Issue 25: `binder --kubeconfig=kc foo --workers=0` ran with 100 workers
// (the flag package stops at the first argument that is not a flag).
func TestParseFlagsRefusesWhatCannotRun(t *testing.T) {
	for _, args := range [][]string{
		{"--kubeconfig=kc", "foo", "--workers=0"},
		{"--workers=0"},
		{"--resync-period=0s"},
		{"--node-loss-grace=0s"},
		{"--no-such-flag"},
	} {
		o := defaultOptions()
		if err := parseFlags(&o, args); err == nil {
			t.Errorf("%q: accepted (workers %d)", args, o.workers)
		}
	}
	o := defaultOptions()
	if err := parseFlags(&o, []string{"--kubeconfig=kc", "--workers=3", "--version"}); err != nil || o.workers != 3 || !o.showVersion {
		t.Errorf("good flags: %v (workers %d, version %v)", err, o.workers, o.showVersion)
	}
}
