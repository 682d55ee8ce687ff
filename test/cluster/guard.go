package cluster

import (
	"fmt"
	"os/exec"
	"syscall"
)

// guardAgainstOrphans covers what envtest cannot: its etcd and
// kube-apiserver run in their own process groups, so if the test binary is
// killed (a timeout, Ctrl-C) before its clean-ups run, they would live on.
// A small watchdog shell gets SIGTERM from the kernel when the test binary
// dies (Pdeathsig) and then kills every process whose command line names
// the control plane's own folders. On a normal end the watchdog is killed
// quietly (SIGKILL runs no trap) after envtest has stopped its processes.
func guardAgainstOrphans(t T, folders ...string) {
	t.Helper()
	script := "trap '"
	for _, f := range folders {
		if f != "" {
			script += fmt.Sprintf("pkill -9 -f %q; ", f)
		}
	}
	script += "exit 0' TERM; while :; do sleep 3600 & wait $!; done"
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Logf("no orphan guard: %v", err)
		return
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
}
