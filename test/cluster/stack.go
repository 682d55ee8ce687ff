package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The example local driver's name and topology key.
const (
	LocalDriver = "local.csi.tether.dev"
	LocalKey    = "topology.local.csi.tether.dev/node"
)

// StackOptions shape a local tether stack.
type StackOptions struct {
	// Nodes is the number of fake nodes (default 2), named node-1, node-2…
	Nodes int
	// NodeCapacity is each node's local capacity (default 10Gi).
	NodeCapacity string
	// BinderReplicas is the number of binder processes (default 1), and
	// ProvisionerReplicas the number of provisioners per node (default 1);
	// with more than one they elect a leader.
	BinderReplicas, ProvisionerReplicas int
	// BinderKubeconfig and ProvisionerKubeconfig are the identities the
	// components use (default: the admin's).
	BinderKubeconfig, ProvisionerKubeconfig string
	// BinderArgs, ProvisionerArgs and DriverArgs are added to the defaults.
	BinderArgs, ProvisionerArgs, DriverArgs []string
	// ProvisionerEnv is added to the provisioners' environment (NODE_NAME
	// and NAMESPACE).
	ProvisionerEnv []string
	// Namespace is where provisioners publish capacity (default "default").
	Namespace string
}

// StackNode is one fake node with its driver and provisioner.
type StackNode struct {
	Name, Socket, Root string
	Driver             *Process
	Provisioners       []*Process
}

// Stack is tether running on a local control plane: on each fake node the
// example local driver and a node-deployment provisioner, plus the binder.
type Stack struct {
	Nodes   []StackNode
	Binders []*Process
}

// StartLocalStack builds and starts the stack on c. The control plane
// should run kube-scheduler (for WaitForFirstConsumer) and KCM without its
// binder.
func StartLocalStack(t T, c *Cluster, o StackOptions) *Stack {
	t.Helper()
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.NodeCapacity == "" {
		o.NodeCapacity = "10Gi"
	}
	if o.BinderReplicas == 0 {
		o.BinderReplicas = 1
	}
	if o.ProvisionerReplicas == 0 {
		o.ProvisionerReplicas = 1
	}
	if o.BinderKubeconfig == "" {
		o.BinderKubeconfig = c.Kubeconfig
	}
	if o.ProvisionerKubeconfig == "" {
		o.ProvisionerKubeconfig = c.Kubeconfig
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	driverBin := BuildBinary(t, "./examples/local-driver")
	provBin := BuildBinary(t, "./cmd/provisioner")
	binderBin := BuildBinary(t, "./cmd/binder")
	ctx := t.Context()
	yes, no := true, false
	_, err := c.Client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: LocalDriver},
		Spec: storagev1.CSIDriverSpec{StorageCapacity: &yes, AttachRequired: &no}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	s := &Stack{}
	for i := 1; i <= o.Nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		if err := AddFakeNode(ctx, c.Client, FakeNode{Name: name, Labels: map[string]string{LocalKey: name},
			Driver: LocalDriver, TopologyKeys: []string{LocalKey}}); err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp("", "tether-node") // socket paths must be short
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		n := StackNode{Name: name, Socket: filepath.Join(dir, "csi.sock"), Root: filepath.Join(dir, "root")}
		driverArgs := append([]string{"--endpoint=" + n.Socket, "--node-id=" + name, "--root=" + n.Root,
			"--capacity=" + o.NodeCapacity, "-v=5"}, o.DriverArgs...)
		n.Driver = c.Run(t, ProcessOptions{Name: "driver-" + name, Path: driverBin, Args: driverArgs})
		for r := range o.ProvisionerReplicas {
			args := append([]string{"--kubeconfig=" + o.ProvisionerKubeconfig, "--csi-address=" + n.Socket,
				"--node-deployment", "--enable-capacity", "--capacity-ownerref-level=-1", "--capacity-poll-interval=5s",
				"--node-deployment-base-delay=200ms", "--node-deployment-max-delay=2s",
				"--retry-interval-start=200ms", "--retry-interval-max=5s", "-v=4"}, leaderArgs(o.ProvisionerReplicas, "leader-election", o.Namespace)...)
			args = append(args, o.ProvisionerArgs...)
			n.Provisioners = append(n.Provisioners, c.Run(t, ProcessOptions{Name: fmt.Sprintf("provisioner-%s-%d", name, r),
				Path: provBin, Args: args, Env: append([]string{"NODE_NAME=" + name, "NAMESPACE=" + o.Namespace}, o.ProvisionerEnv...)}))
		}
		s.Nodes = append(s.Nodes, n)
	}
	for i := range o.BinderReplicas {
		args := append([]string{"--kubeconfig=" + o.BinderKubeconfig, "--resync-period=5s", "-v=4"},
			leaderArgs(o.BinderReplicas, "leader-elect", o.Namespace)...)
		if o.BinderReplicas > 1 {
			args = append(args, "--leader-elect-resource-namespace="+o.Namespace)
		}
		args = append(args, o.BinderArgs...)
		s.Binders = append(s.Binders, c.Run(t, ProcessOptions{Name: fmt.Sprintf("binder-%d", i), Path: binderBin, Args: args}))
	}
	return s
}

// leaderArgs turns leader election on, with short timings, for more than
// one replica, and off for one. prefix is the flags' prefix.
func leaderArgs(replicas int, prefix, namespace string) []string {
	if replicas == 1 {
		return []string{"--" + prefix + "=false"}
	}
	args := []string{"--" + prefix + "=true", "--" + prefix + "-lease-duration=4s",
		"--" + prefix + "-renew-deadline=3s", "--" + prefix + "-retry-period=500ms"}
	if prefix == "leader-election" {
		args = append(args, "--leader-election-namespace="+namespace)
	}
	return args
}
