package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// mockDriver is the csi-test mock driver, run as a process.
type mockDriver = cluster.MockDriver

// startMock runs the mock driver on a fresh unix socket. hooks, if not
// empty, is the text of its hooks file.
func startMock(t *testing.T, c *cluster.Cluster, name, hooks string, extra ...string) *mockDriver {
	t.Helper()
	return cluster.StartMockDriver(t, c, name, hooks, extra...)
}

// startProvisioner runs our provisioner against a driver socket.
func startProvisioner(t *testing.T, c *cluster.Cluster, name, socket string, extra ...string) *cluster.Process {
	t.Helper()
	return startProvisionerEnv(t, c, name, socket, nil, extra...)
}

// startProvisionerEnv is startProvisioner with extra environment. Every
// request the provisioner makes must be one deploy/csi's RBAC allows it,
// the opt-in secrets rule included (cluster.RBACCheckedKubeconfig).
func startProvisionerEnv(t *testing.T, c *cluster.Cluster, name, socket string, env []string, extra ...string) *cluster.Process {
	t.Helper()
	path := cluster.BuildBinary(t, "./cmd/provisioner")
	kubeconfig := c.RBACCheckedKubeconfig(t, "tether-provisioner", "provisioner-secrets")
	args := append([]string{"--kubeconfig=" + kubeconfig, "--csi-address=" + socket, "--leader-election=false",
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
