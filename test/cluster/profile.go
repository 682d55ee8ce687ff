package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// CPUProfiles records CPU profiles, for the given number of seconds from
// now, of the API server and of each process serving Go's pprof at
// addrs (name to host:port), into dir/<label>.<name>.pprof. It returns at
// once; the returned func waits for the profiles. A profile that cannot be
// had is logged, not fatal: profiles are a bench's extra.
func (c *Cluster) CPUProfiles(t T, dir, label string, seconds int, addrs map[string]string) (done func()) {
	var wg sync.WaitGroup
	secs := strconv.Itoa(seconds)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("profiles: %v", err)
		return wg.Wait
	}
	save := func(name string, fetch func() ([]byte, error)) {
		wg.Go(func() {
			raw, err := fetch()
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, label+"."+name+".pprof"), raw, 0o644)
			}
			if err != nil {
				t.Logf("profiling %s: %v", name, err)
			}
		})
	}
	save("apiserver", func() ([]byte, error) {
		return c.Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", secs).DoRaw(t.Context())
	})
	for name, addr := range addrs {
		save(name, func() ([]byte, error) {
			// A process started just now may not serve yet.
			var resp *http.Response
			err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				var err error
				resp, err = http.Get("http://" + addr + "/debug/pprof/profile?seconds=" + secs)
				return err == nil, nil
			})
			if err != nil {
				return nil, fmt.Errorf("%s does not serve: %w", addr, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("%s: %s", addr, resp.Status)
			}
			return io.ReadAll(resp.Body)
		})
	}
	return wg.Wait
}
