// Package flagdoc checks that a command's flags are documented.
package flagdoc

import (
	"flag"
	"os"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// CheckREADME fails t for every flag of fs, klog's aside, that the README
// at path does not name as `--flag`.
func CheckREADME(t *testing.T, fs *flag.FlagSet, path string) {
	t.Helper()
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.VisitAll(func(f *flag.Flag) {
		if klogFlags.Lookup(f.Name) == nil && !strings.Contains(string(readme), "`--"+f.Name+"`") {
			t.Errorf("README does not list --%s", f.Name)
		}
	})
}
