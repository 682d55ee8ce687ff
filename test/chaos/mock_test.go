package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-csi/tether/test/cluster"
)

// mockDriver is the name the csi-test mock driver runs under. The example
// local driver has no CLONE_VOLUME (it refuses volume content sources), so
// clones go to the mock, which has it.
const mockDriver = "mock.csi.tether.dev"

// mock is the csi-test mock driver with two provisioners in front of it
// (centralised, leader election on a Lease). The mock keeps its volumes in
// memory, so the run never kills it, only its provisioners.
type mock struct {
	socket       string
	driver       *cluster.Process
	provisioners []*cluster.Process
}

func startMock(t *testing.T, c *cluster.Cluster, kubeconfig string) *mock {
	t.Helper()
	path, err := cluster.Tool("mock-driver")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tether-mock") // socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m := &mock{socket: filepath.Join(dir, "csi.sock")}
	m.driver = c.Run(t, cluster.ProcessOptions{Name: "mock-driver", Path: path, Args: []string{"-name=" + mockDriver, "-v=5"},
		Env: []string{"CSI_ENDPOINT=unix://" + m.socket}})
	prov := cluster.BuildBinary(t, "./cmd/provisioner")
	for r := range 2 {
		args := []string{"--kubeconfig=" + kubeconfig, "--csi-address=" + m.socket,
			"--leader-election=true", "--leader-election-namespace=" + ns, "--leader-election-lease-duration=4s",
			"--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms",
			"--retry-interval-start=200ms", "--retry-interval-max=5s", "-v=4"}
		m.provisioners = append(m.provisioners, c.Run(t, cluster.ProcessOptions{Name: "provisioner-mock-" + string(rune('0'+r)),
			Path: prov, Args: args}))
	}
	return m
}

// volumes lists the IDs of the mock's volumes made for claims (it also
// lists three of its own, which are left out).
func (m *mock) volumes(t *testing.T) []string {
	t.Helper()
	vols, err := cluster.DriverVolumes(t.Context(), m.socket)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range vols {
		if strings.HasPrefix(v.GetVolumeContext()["name"], "pvc-") {
			ids = append(ids, v.GetVolumeId())
		}
	}
	return ids
}
