package chaos

import (
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
	*cluster.MockDriver
	provisioners []*cluster.Process
}

func startMock(t *testing.T, c *cluster.Cluster, kubeconfig string) *mock {
	t.Helper()
	m := &mock{MockDriver: cluster.StartMockDriver(t, c, mockDriver, "")}
	prov := cluster.BuildBinary(t, "./cmd/provisioner")
	for r := range 2 {
		args := []string{"--kubeconfig=" + kubeconfig, "--csi-address=" + m.Socket,
			"--leader-election=true", "--leader-election-namespace=" + ns, "--leader-election-lease-duration=4s",
			"--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms",
			"--retry-interval-start=200ms", "--retry-interval-max=5s", "-v=4"}
		m.provisioners = append(m.provisioners, c.Run(t, cluster.ProcessOptions{Name: "provisioner-mock-" + string(rune('0'+r)),
			Path: prov, Args: args}))
	}
	return m
}
