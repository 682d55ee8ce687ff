package benchkit

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// HeapProfile saves the heap profile of the process serving Go's pprof at
// addr into path (`go tool pprof -sample_index=inuse_space` shows what
// stays in memory). With gc the process collects first, so that the
// profile is of what is live; without, it is as of its last collection.
func HeapProfile(path, addr string, gc bool) error {
	url := "http://" + addr + "/debug/pprof/heap"
	if gc {
		url += "?gc=1"
	}
	client := http.Client{Timeout: time.Minute}
	resp, err := client.Get(url)
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

// PeakHeapProfile reads the VmRSS of the process pid every interval and,
// each time it has grown by a tenth past the last profile's, saves the heap
// profile of addr (without a collection) into path, over the one before:
// the profile left is the one nearest the process's peak. stop ends it and
// returns the last error, if the last profile failed.
func PeakHeapProfile(path, addr string, pid int, every time.Duration) (stop func() error) {
	done := make(chan struct{})
	var (
		wg      sync.WaitGroup
		lastErr error
	)
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		var profiled int64
		for {
			if rss := ReadMem(pid).RSS; rss > profiled+profiled/10 {
				if lastErr = HeapProfile(path, addr, false); lastErr == nil {
					profiled = rss
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() error { close(done); wg.Wait(); return lastErr }
}
