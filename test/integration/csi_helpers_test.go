package integration

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// mockDriver is the csi-test mock driver, run as a process.
type mockDriver struct {
	Name, Socket string
	Proc         *cluster.Process
}

// startMock runs the mock driver on a fresh unix socket. hooks, if not
// empty, is the text of its hooks file.
func startMock(t *testing.T, c *cluster.Cluster, name, hooks string, extra ...string) *mockDriver {
	t.Helper()
	path, err := cluster.Tool("mock-driver")
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
	proc := c.Run(t, cluster.ProcessOptions{Name: "mock-" + name, Path: path, Args: args, Env: []string{"CSI_ENDPOINT=unix://" + socket}})
	return &mockDriver{Name: name, Socket: socket, Proc: proc}
}

// volumes lists the IDs of the volumes the driver made for claims (the
// mock also lists three volumes of its own, which are left out).
func (m *mockDriver) volumes(t *testing.T) []string {
	t.Helper()
	vols, err := cluster.DriverVolumes(t.Context(), m.Socket)
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

// startProvisioner runs our provisioner against a driver socket.
func startProvisioner(t *testing.T, c *cluster.Cluster, name, socket string, extra ...string) *cluster.Process {
	t.Helper()
	return startProvisionerEnv(t, c, name, socket, nil, extra...)
}

// startProvisionerEnv is startProvisioner with extra environment.
func startProvisionerEnv(t *testing.T, c *cluster.Cluster, name, socket string, env []string, extra ...string) *cluster.Process {
	t.Helper()
	path := cluster.BuildBinary(t, "./cmd/provisioner")
	args := append([]string{"--kubeconfig=" + c.Kubeconfig, "--csi-address=" + socket, "--leader-election=false",
		"--retry-interval-start=200ms", "--retry-interval-max=2s", "-v=4"}, extra...)
	return c.Run(t, cluster.ProcessOptions{Name: "provisioner-" + name, Path: path, Args: args, Env: env})
}

func createCSIClass(t *testing.T, c *cluster.Cluster, name, driver string, policy string, mode storagev1.VolumeBindingMode) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: driver, VolumeBindingMode: &mode}
	if policy != "" {
		p := corev1ReclaimPolicy(policy)
		sc.ReclaimPolicy = &p
	}
	mustCreate(t, c.Client.StorageV1().StorageClasses().Create, sc)
}

func corev1ReclaimPolicy(p string) corev1.PersistentVolumeReclaimPolicy {
	return corev1.PersistentVolumeReclaimPolicy(p)
}
