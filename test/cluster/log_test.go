package cluster

import (
	"testing"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// controller-runtime's log is set when the package is loaded: a logger
// made the way envtest makes its own is enabled at verbosity 0 (the null
// sink that an unset controller-runtime log falls back to is not, and
// controller-runtime prints its goroutine stack before falling back).
func TestControllerRuntimeLogSet(t *testing.T) {
	if !ctrllog.Log.WithName("controller-runtime").WithName("test-env").Enabled() {
		t.Fatal("controller-runtime's log is not set: envtest's lines are dropped, and a stack is printed after 30 s")
	}
}
