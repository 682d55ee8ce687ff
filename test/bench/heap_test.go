package bench

import (
	"path/filepath"
	"testing"

	"github.com/tether-csi/tether/test/benchkit"
)

// saveHeapProfile saves the heap profile of the process serving Go's
// pprof at addr into dir/<label>.<name>.heap.pprof, after a collection.
// With BENCH_PPROF the bench takes one from tether's binder once every
// claim is Bound. A profile that cannot be had is logged: profiles are a
// bench's extra.
func saveHeapProfile(t *testing.T, dir, label, name, addr string) {
	if dir == "" || addr == "" {
		return
	}
	if err := benchkit.HeapProfile(filepath.Join(dir, label+"."+name+".heap.pprof"), addr, true); err != nil {
		t.Logf("heap profile of %s: %v", name, err)
	}
}
