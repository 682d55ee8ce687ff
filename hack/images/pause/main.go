// Command pause is the sandbox ("pause") image of test/cluster's real
// nodes: PID 1 of each pod, it holds the pod's namespaces, reaps orphans
// and exits on SIGTERM or SIGINT. (The upstream image cannot be pulled
// here: no registry.)
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
