package main

import (
	"flag"
	"os"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// Every flag but klog's is in the README (the acceptance of the
// provisioner issue: the README lists every flag).
func TestREADMEListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	o := defaultOptions()
	newFlagSet(&o).VisitAll(func(f *flag.Flag) {
		if klogFlags.Lookup(f.Name) != nil {
			return
		}
		if !strings.Contains(string(readme), "`--"+f.Name+"`") {
			t.Errorf("README does not list --%s", f.Name)
		}
	})
}
