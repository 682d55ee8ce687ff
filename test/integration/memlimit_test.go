package integration

import (
	"strconv"
	"testing"

	"github.com/tether-csi/tether/internal/gogc"
	"github.com/tether-csi/tether/test/cluster"
)

// TestMemoryLimitFromContainer: the binder and the provisioner, started in
// a cgroup limited to 128 MiB as a container with that memory limit is, set
// the Go runtime's soft limit to gogc.MemoryRatio of it before anything
// else (here they then fail: no API server to reach).
func TestMemoryLimitFromContainer(t *testing.T) {
	var limit int64 = 128 << 20
	// memlimit's "GOMEMLIMIT is updated" line.
	want := " GOMEMLIMIT=" + strconv.FormatInt(int64(float64(limit)*gogc.MemoryRatio), 10) + " previous="
	dir := t.TempDir()
	for _, tc := range []struct {
		pkg  string
		args []string
	}{
		{"./cmd/binder", []string{"--kubeconfig=" + dir + "/none"}},
		{"./cmd/provisioner", []string{"--kubeconfig=" + dir + "/none", "--csi-address=" + dir + "/csi.sock"}},
	} {
		t.Run(tc.pkg[len("./cmd/"):], func(t *testing.T) {
			procs := cluster.MemoryCgroup(t, limit)
			path, args := cluster.InCgroup(procs, cluster.BuildBinary(t, tc.pkg), tc.args...)
			p := cluster.StartProcess(t, cluster.ProcessOptions{Name: "memlimit", Path: path, Args: args, Dir: t.TempDir(),
				Env: []string{"GOMEMLIMIT="}})
			waitLog(t, p, want)
		})
	}
}
