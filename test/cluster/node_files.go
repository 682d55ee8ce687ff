package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// namespaceScript sets up a node's mount namespace (run by unshare, with
// the node's folder as $1) and then holds it open.
const namespaceScript = `set -eu
d=$1
# /run and /var/lib start empty: containerd's shim sockets, /run/nri,
# /var/lib/cni and whatever else kubelet or containerd write there by
# default stay in this namespace. The node's own folders come back on top.
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var/lib
mkdir -p /var/lib/kubelet /var/lib/tether-local
mount --bind "$d/kubelet" /var/lib/kubelet
mount --bind "$d/data" /var/lib/tether-local
mount --bind "$d/log" /var/log
mount --bind "$d/mnt" /mnt # the static local PV of examples/ is /mnt/disks/ssd1
# kubelet sets these sysctls and the bridge plugin turns on forwarding:
# here they write to files of the node's folder instead of the host's.
for f in vm/overcommit_memory kernel/panic kernel/panic_on_oops net/ipv4/ip_forward; do
  mount --bind "$d/sysctl/$(echo $f | tr / _)" "/proc/sys/$f"
done
# Bidirectional mount propagation (the driver's pod) needs shared mounts;
# this namespace's peer groups are its own.
mount --make-rshared /
touch "$d/namespace-ready"
trap 'exit 0' TERM INT
while :; do sleep 3600 & wait $! || true; done
`

// writeFiles writes the node's folders, configuration and stand-ins.
func (n *RealNode) writeFiles(c *Cluster, subnet string) error {
	for _, d := range []string{"kubelet", "data", "log", "sysctl", "bin", "pki", "images", "cni/net.d", "cni/ipam", "containerd/root", "containerd/state", "opt", "mnt/disks/ssd1"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"namespace.sh": namespaceScript,
		// No iptables: kubelet's chains would land in the host's tables.
		"bin/iptables":  "#!/bin/sh\nexit 1\n",
		"bin/ip6tables": "#!/bin/sh\nexit 1\n",
		"resolv.conf":   "nameserver 127.0.0.1\n",
		"containerd.toml": fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  # runc cannot lower oom_score_adj here (no CAP_SYS_RESOURCE): every pod
  # would fail with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
`, filepath.Join(n.Dir, "containerd/root"), filepath.Join(n.Dir, "containerd/state"), n.containerdSock,
			filepath.Join(n.Dir, "containerd/ttrpc.sock"), filepath.Join(n.Dir, "opt"), PauseImage, filepath.Join(n.Dir, "cni/net.d")),
		// bridge + host-local + loopback; no portmap (iptables), no masquerade.
		"cni/net.d/10-tether.conflist": fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "tether-%[1]s", "plugins": [
  {"type": "bridge", "bridge": %[2]q, "isGateway": true, "ipMasq": false, "hairpinMode": false,
   "ipam": {"type": "host-local", "dataDir": %[3]q, "ranges": [[{"subnet": "%[4]s.0/24", "gateway": "%[4]s.1"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "loopback"}]}
`, n.Name, n.bridge, filepath.Join(n.Dir, "cni/ipam"), subnet),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%[3]s
cgroupDriver: cgroupfs
cgroupRoot: %[4]s
failCgroupV1: false
failSwapOn: false
resolvConf: %[5]s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
serializeImagePulls: false
localStorageCapacityIsolation: false
nodeStatusReportFrequency: 10s
syncFrequency: 10s
`, n.Address, n.Port, n.containerdSock, n.cgroupRoot, filepath.Join(n.Dir, "resolv.conf")),
	}
	for name, data := range files {
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "bin/") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(data), mode); err != nil {
			return err
		}
	}
	// The sysctl stand-ins hold the host's values: kubelet reads them first.
	for _, f := range []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward"} {
		v, err := os.ReadFile("/proc/sys/" + f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(n.Dir, "sysctl", strings.ReplaceAll(f, "/", "_")), v, 0o644); err != nil {
			return err
		}
	}
	return nil
}
