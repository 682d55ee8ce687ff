package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// saveHeapProfile saves the heap profile of the process serving Go's
// pprof at addr into dir/<label>.<name>.heap.pprof (`go tool pprof
// -sample_index=inuse_space` shows what stays in memory). With
// BENCH_PPROF the bench takes one from tether's binder once every claim is
// Bound. A profile that cannot be had is logged: profiles are a bench's
// extra.
func saveHeapProfile(t *testing.T, dir, label, name, addr string) {
	if dir == "" || addr == "" {
		return
	}
	if err := fetchHeapProfile(filepath.Join(dir, label+"."+name+".heap.pprof"), addr); err != nil {
		t.Logf("heap profile of %s: %v", name, err)
	}
}

func fetchHeapProfile(path, addr string) error {
	// gc=1: a collection first, so that the profile shows what is live.
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", addr, resp.Status)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}
