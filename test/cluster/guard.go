package cluster

import (
	"fmt"
	"os"
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
	// The folders go in the environment, not the script: on its command
	// line, `pkill -f folder` would match the watchdog itself and kill it
	// before it reached the next folder.
	script := "trap '"
	var env []string
	for i, f := range folders {
		if f != "" {
			script += fmt.Sprintf(`pkill -9 -f "$GUARD_%d"; `, i)
			env = append(env, fmt.Sprintf("GUARD_%d=%s", i, f))
		}
	}
	script += "exit 0' TERM; while :; do sleep 3600 & wait $!; done"
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
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
