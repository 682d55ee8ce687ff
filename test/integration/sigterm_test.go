package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// klogError is the header of a klog line at error level (E, then the
// date): "E1123 22:30:14.123456 ...".
var klogError = regexp.MustCompile(`(?m)^E\d{4} \d\d:\d\d:\d\d\.\d+ .*$`)

// TestSIGTERMExitsCleanly: the kubelet stops a container with SIGTERM, and
// a component that then exits non-zero or logs an error looks like a crash
// (a restart counted, an alert). Each way the binder and the provisioner
// run is stopped so: the binder leading and standing by (the Deployment's
// two replicas), the provisioner leading after a volume went through it,
// and without leader election (node mode's DaemonSet). Each must exit with
// status 0, and log no error from the signal on.
func TestSIGTERMExitsCleanly(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	leases := cs.CoordinationV1().Leases("default")

	binderArgs := []string{"--leader-elect=true", "--leader-elect-resource-namespace=default", "--http-endpoint=" + cluster.FreeAddr(t)}
	leader := startNamedBinder(t, c, "binder-leader", binderArgs...)
	eventually(t, "the first binder leads", func(ctx context.Context) (bool, error) {
		l, err := leases.Get(ctx, "tether-binder", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	standby := startNamedBinder(t, c, "binder-standby", "--leader-elect=true", "--leader-elect-resource-namespace=default",
		"--http-endpoint="+cluster.FreeAddr(t))
	waitLog(t, standby, "Another replica leads")

	mock := startMock(t, c, mockName, "")
	provLeader := startProvisioner(t, c, "leader", mock.Socket, "--leader-election=true",
		"--leader-election-namespace=default", "--http-endpoint="+cluster.FreeAddr(t))
	provPlain := startProvisioner(t, c, "plain", startMock(t, c, "other.csi.tether.dev", "").Socket)
	createCSIClass(t, c, "sigterm", mockName, "Delete", storagev1.VolumeBindingImmediate)
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("sigterm", "sigterm", "1Gi"))
	waitClaimBound(t, cs, "sigterm")
	waitLog(t, provPlain, "Provisioner started")

	// Stopped while starting: the provisioner before its driver's socket
	// appears (the driver container not up yet), the binder before its
	// caches are filled (an API server that does not answer).
	provWaiting := startProvisioner(t, c, "waiting", filepath.Join(t.TempDir(), "no-driver-yet.sock"))
	waitLog(t, provWaiting, "Waiting for the CSI driver")
	binderSyncing := startNamedBinder(t, c, "binder-syncing", "--leader-elect=false", "--kubeconfig="+silentAPIServer(t))
	waitLog(t, binderSyncing, "Version")

	for _, p := range []struct {
		name string
		proc *cluster.Process
	}{
		{"binder standing by", standby},
		{"binder leading", leader},
		{"provisioner leading", provLeader},
		{"provisioner without leader election", provPlain},
		{"provisioner waiting for its driver", provWaiting},
		{"binder before its caches synced", binderSyncing},
	} {
		t.Run(p.name, func(t *testing.T) {
			sigtermCleanly(t, p.proc)
		})
	}
}

// startNamedBinder is startBinder under a log name of its own, so that two
// binders can run in one test.
func startNamedBinder(t *testing.T, c *cluster.Cluster, name string, extra ...string) *cluster.Process {
	t.Helper()
	path := cluster.BuildBinary(t, "./cmd/binder")
	args := append([]string{"--kubeconfig=" + c.RBACCheckedKubeconfig(t, "tether-binder"), "--resync-period=5s", "-v=4"}, extra...)
	return c.Run(t, cluster.ProcessOptions{Name: name, Path: path, Args: args})
}

// silentAPIServer writes a kubeconfig naming a server that takes
// connections and never answers, and returns its path.
func silentAPIServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	path := filepath.Join(t.TempDir(), "silent.kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: silent, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: silent, user: {token: none}}]
contexts: [{name: silent, context: {cluster: silent, user: silent}}]
current-context: silent
`, ln.Addr())
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitLog waits until a process's log holds text.
func waitLog(t *testing.T, p *cluster.Process, text string) {
	t.Helper()
	eventually(t, "log of "+p.LogPath+" says "+text, func(context.Context) (bool, error) {
		data, err := os.ReadFile(p.LogPath)
		return err == nil && strings.Contains(string(data), text), nil
	})
}

// sigtermCleanly sends SIGTERM to a running process and fails the test
// unless it exits by itself with status 0 and logs no error line after the
// signal.
func sigtermCleanly(t *testing.T, p *cluster.Process) {
	t.Helper()
	if !p.Running() {
		t.Fatalf("%s is not running before the signal:\n%s", p.LogPath, cluster.Tail(p.LogPath, 20))
	}
	before, err := os.Stat(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The pod's default grace period: past it the kubelet kills.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = p.Wait(ctx)
	var exit *exec.ExitError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		t.Errorf("still running 30 s after SIGTERM (the kubelet would kill it)")
		p.Kill()
	case errors.As(err, &exit):
		t.Errorf("exited with %v after SIGTERM, want status 0", exit)
	case err != nil:
		t.Errorf("waiting for the exit: %v", err)
	}
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	after := string(data[before.Size():])
	for _, line := range klogError.FindAllString(after, -1) {
		t.Errorf("error logged after SIGTERM: %s", line)
	}
	if t.Failed() {
		t.Logf("log from the signal on:\n%s", after)
	}
}
