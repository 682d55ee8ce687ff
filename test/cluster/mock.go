package cluster

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MockDriver is the csi-test mock driver, run as a process on a unix
// socket of its own.
type MockDriver struct {
	Name, Socket string
	Proc         *Process
}

// StartMockDriver runs the mock driver under a name. hooks, if not empty,
// is the text of its hooks file; extra are more flags.
func StartMockDriver(t T, c *Cluster, name, hooks string, extra ...string) *MockDriver {
	t.Helper()
	path, err := Tool("mock-driver")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "csi") // socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "csi.sock")
	args := append([]string{"-name=" + name, "-v=5"}, extra...)
	if hooks != "" {
		file := filepath.Join(dir, "hooks.yaml")
		if err := os.WriteFile(file, []byte(hooks), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-hooks-file="+file)
	}
	proc := c.Run(t, ProcessOptions{Name: "mock-" + name, Path: path, Args: args, Env: []string{"CSI_ENDPOINT=unix://" + socket}})
	return &MockDriver{Name: name, Socket: socket, Proc: proc}
}

// Volumes lists the IDs of the volumes the mock made for claims (names
// pvc-...; it also lists three volumes of its own, which are left out).
func (m *MockDriver) Volumes(t T) []string {
	t.Helper()
	vols, err := DriverVolumes(t.Context(), m.Socket)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range vols {
		if strings.HasPrefix(v.GetVolumeContext()["name"], "pvc-") {
			ids = append(ids, v.GetVolumeId())
		}
	}
	sort.Strings(ids)
	return ids
}
