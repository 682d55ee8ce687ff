package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RealNode is a Kubernetes node with kubelet, containerd and runc: real
// pods, real mounts. It lives in a mount namespace of its own (held by a
// small process), in which /var/lib/kubelet, /var/lib/tether-local and
// /var/log are this node's folders and /run and the rest of /var/lib are
// empty tmpfs: two nodes on one machine both see the paths deploy/csi
// names, and every overlay, netns and CSI mount vanishes with the
// namespace. Nothing is changed on the host beyond the node's own folder,
// its bridge and its cgroups, all removed at clean-up and checked for.
type RealNode struct {
	Name string
	// Dir is the node's folder on the host; Data is what the node sees as
	// /var/lib/tether-local (the local driver's volumes).
	Dir, Data string
	// Address is the node's InternalIP (the host's), Port kubelet's.
	Address string
	Port    int

	bridge, cgroupRoot, containerdSock string
	holder, containerd, kubelet        *Process
}

// APIAddress is the host address the API server must serve on when the
// cluster has real nodes: pods reach it there, through their bridge.
func APIAddress() (string, error) {
	conn, err := net.Dial("udp", "192.0.2.1:9") // no packet is sent: this picks the source address of the default route
	if err != nil {
		return "", fmt.Errorf("no address to serve the API server on for real nodes: %w", err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// apiHostPort is APIAddress with a port free on it.
func apiHostPort() (string, string, error) {
	addr, err := APIAddress()
	if err != nil {
		return "", "", err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return "", "", err
	}
	defer l.Close()
	return addr, strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// RealNodeArgs are the kube-apiserver flags real nodes need.
var RealNodeArgs = map[string][]string{
	"allow-privileged":                {"true"}, // the driver's pod is privileged
	"kubelet-preferred-address-types": {"InternalIP"},
}

// CheckRealNodeHost fails the test with what is missing for real nodes.
func CheckRealNodeHost(t T) {
	t.Helper()
	if err := RealNodeHostReady(); err != nil {
		t.Fatal(err)
	}
}

// RealNodeHostReady says what this host lacks to run real nodes, or nil.
func RealNodeHostReady() error {
	var missing []string
	for _, p := range []string{"/usr/bin/containerd", "/usr/bin/containerd-shim-runc-v2", "/usr/sbin/runc", "/usr/lib/cni/bridge",
		"/usr/lib/cni/host-local", "/usr/lib/cni/loopback", "/bin/busybox"} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("real nodes need %s: apt-get install -y containerd runc containernetworking-plugins busybox-static", strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root")
	}
	_, err := Tool("kubelet")
	return err
}

// StartRealNode starts a node named name, with images imported, and waits
// until it is Ready. Clean-up stops it and checks that it left nothing.
func (c *Cluster) StartRealNode(t T, name string, images []Image) *RealNode {
	t.Helper()
	CheckRealNodeHost(t)
	kubelet, _ := Tool("kubelet")
	start := time.Now()
	addr, err := APIAddress()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tn-") // unix socket paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	id := filepath.Base(dir)[3:]
	n := &RealNode{Name: name, Dir: dir, Data: filepath.Join(dir, "data"), Address: addr, Port: freePort(t),
		bridge: "tn" + id, cgroupRoot: "/tether-" + id, containerdSock: filepath.Join(dir, "containerd.sock")}
	before := snapshotHost()
	t.Cleanup(func() {
		n.stop(t)
		checkNothingLeft(t, n, before)
	})
	guardNode(t, n)
	subnet := freeSubnet()
	if err := n.writeFiles(c, subnet); err != nil {
		t.Fatal(err)
	}
	n.holder = c.Run(t, ProcessOptions{Name: name + "-namespace", Path: "unshare",
		Args: []string{"--mount", "--propagation", "private", "sh", filepath.Join(dir, "namespace.sh"), dir}})
	Eventually(t, name+": mount namespace ready", func(context.Context) (bool, error) {
		_, err := os.Stat(filepath.Join(dir, "namespace-ready"))
		return err == nil || !n.holder.Running(), nil
	})
	if !n.holder.Running() {
		t.Fatalf("%s: the mount namespace did not start:\n%s", name, Tail(n.holder.LogPath, 20))
	}
	env := []string{"PATH=" + filepath.Join(dir, "bin") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	n.containerd = c.Run(t, ProcessOptions{Name: name + "-containerd", Path: "nsenter", Env: env,
		Args: n.inNamespace("containerd", "--config", filepath.Join(dir, "containerd.toml"))})
	Eventually(t, name+": containerd up", func(ctx context.Context) (bool, error) {
		return exec.CommandContext(ctx, "ctr", "-a", n.containerdSock, "version").Run() == nil || !n.containerd.Running(), nil
	})
	if err := n.importImages(t, images); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := makeCgroups(n.cgroupRoot); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	n.kubelet = c.Run(t, ProcessOptions{Name: name + "-kubelet", Path: "nsenter", Env: env,
		Args: n.inNamespace(kubelet, "--config="+filepath.Join(dir, "kubelet.yaml"), "--kubeconfig="+c.Kubeconfig,
			"--root-dir=/var/lib/kubelet", "--cert-dir="+filepath.Join(dir, "pki"), "--hostname-override="+name,
			"--node-ip="+addr, "--v=2")})
	Eventually(t, "node "+name+" Ready", func(ctx context.Context) (bool, error) {
		if !n.kubelet.Running() {
			return false, fmt.Errorf("kubelet exited:\n%s", Tail(n.kubelet.LogPath, 5))
		}
		return nodeReady(ctx, c, name), nil
	})
	t.Logf("node %s Ready in %s (kubelet port %d, bridge %s, folder %s)", name, time.Since(start).Round(100*time.Millisecond), n.Port, n.bridge, dir)
	return n
}

// freeSubnet picks a /24 (as "10.a.b") for a node's bridge that no
// interface of the host is on (other nodes' bridges included).
func freeSubnet() string {
	addrs, _ := net.InterfaceAddrs()
	for {
		subnet := fmt.Sprintf("10.%d.%d", 200+rand.IntN(50), rand.IntN(250))
		_, cidr, _ := net.ParseCIDR(subnet + ".0/24")
		if !slices.ContainsFunc(addrs, func(a net.Addr) bool {
			ip, _, err := net.ParseCIDR(a.String())
			return err == nil && cidr.Contains(ip)
		}) {
			return subnet
		}
	}
}

// inNamespace turns a command into nsenter arguments for the node's
// mount namespace.
func (n *RealNode) inNamespace(cmd ...string) []string {
	return append([]string{"--target", strconv.Itoa(n.holder.Pid()), "--mount", "--"}, cmd...)
}

// WaitNodeReady waits for a node's Ready condition.
func (c *Cluster) WaitNodeReady(t T, name string) {
	t.Helper()
	Eventually(t, "node "+name+" Ready", func(ctx context.Context) (bool, error) { return nodeReady(ctx, c, name), nil })
}

func nodeReady(ctx context.Context, c *Cluster, name string) bool {
	node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Exec runs a command in the node's mount namespace (as the node sees its
// files) and returns its output.
func (n *RealNode) Exec(ctx context.Context, cmd ...string) ([]byte, error) {
	return exec.CommandContext(ctx, "nsenter", n.inNamespace(cmd...)...).CombinedOutput()
}

// Processes lists the node's container processes (those in its cgroups)
// whose command line contains s.
func (n *RealNode) Processes(s string) []int {
	var out []int
	for _, pid := range cgroupPids(n.cgroupRoot) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), s) {
			out = append(out, pid)
		}
	}
	return out
}

// StopKubelet kills the node's kubelet, as a machine that lost power
// would lose it: its containers run on, unmanaged, and the Node goes
// NotReady once kube-controller-manager's --node-monitor-grace-period
// passes without a renewal of its lease.
func (n *RealNode) StopKubelet() { n.kubelet.Kill() }

// StartKubelet starts the node's kubelet again: it registers the Node
// anew if it was deleted, and stops the containers of pods the API server
// no longer has.
func (n *RealNode) StartKubelet() error { return n.kubelet.Start() }

// RestartKubelet stops kubelet and starts it again.
func (n *RealNode) RestartKubelet() error {
	n.kubelet.Stop(10 * time.Second)
	return n.kubelet.Start()
}

func (n *RealNode) importImages(t T, images []Image) error {
	t.Helper()
	for _, img := range images {
		path := img.Archive
		if path == "" {
			path = filepath.Join(n.Dir, "images", strings.NewReplacer("/", "_", ":", "_").Replace(img.Ref)+".tar")
			if err := img.WriteArchive(path); err != nil {
				return fmt.Errorf("image %s: %w", img.Ref, err)
			}
			defer os.Remove(path)
		}
		out, err := exec.CommandContext(t.Context(), "ctr", "-a", n.containerdSock, "-n", "k8s.io", "images", "import",
			"--no-unpack", path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import %s: %v: %s", img.Ref, err, out)
		}
	}
	return nil
}

func freePort(t T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
