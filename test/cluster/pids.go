package cluster

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ControlPlanePIDs returns the process ids of this cluster's etcd and
// kube-apiserver (0 when not found), for benchmarks that read their memory.
// envtest does not expose them: they are found in /proc by their command
// lines, which name this cluster's own folders.
func (c *Cluster) ControlPlanePIDs() (apiServer, etcd int) {
	etcdDir := ""
	if c.env.ControlPlane.Etcd != nil {
		etcdDir = c.env.ControlPlane.Etcd.DataDir
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		pid, _ := strconv.Atoi(filepath.Base(d))
		switch filepath.Base(args[0]) {
		case "kube-apiserver":
			if c.certDir != "" && strings.Contains(string(raw), c.certDir) {
				apiServer = pid
			}
		case "etcd":
			if etcdDir != "" && strings.Contains(string(raw), etcdDir) {
				etcd = pid
			}
		}
	}
	return apiServer, etcd
}
