package main

import (
	"testing"

	"github.com/tether-csi/tether/internal/flagdoc"
)

// Every flag but klog's is in the README (the acceptance of the
// provisioner issue: the README lists every flag).
func TestREADMEListsEveryFlag(t *testing.T) {
	o := defaultOptions()
	flagdoc.CheckREADME(t, newFlagSet(&o), "../../README.md")
}
