package kind

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// capSysResource is CAP_SYS_RESOURCE's bit in /proc/PID/status's CapBnd.
const capSysResource = 24

// hasCapSysResource says whether this process's bounding set holds
// CAP_SYS_RESOURCE. Some VMs withhold it; then runc cannot start a
// privileged container ("unable to apply caps: operation not permitted")
// nor lower a process's oom_score_adj.
func hasCapSysResource() bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err != nil || bits&(1<<capSysResource) != 0
		}
	}
	return true
}

// runcWrapper is the runtime dockerd runs when CAP_SYS_RESOURCE is
// withheld: it removes CAP_SYS_RESOURCE from every capability list and
// oomScoreAdj from the bundle's config.json (create, run: --bundle or -b)
// and from the process file of exec (--process or -p), then runs the real
// runc. It needs sh and jq (Debian's jq).
const runcWrapper = `#!/bin/sh
# Written by tether's test/kind: runc without CAP_SYS_RESOURCE, which this
# host's bounding set lacks.
set -e
strip() {
	[ -f "$1" ] || return 0
	jq -c 'walk(if type == "array" then map(select(. != "CAP_SYS_RESOURCE"))
		elif type == "object" then del(.oomScoreAdj) else . end)' "$1" >"$1.tether-kind"
	cat "$1.tether-kind" >"$1"
	rm -f "$1.tether-kind"
}
prev=
for a in "$@"; do
	case $prev in
	--bundle | -b) strip "$a/config.json" ;;
	--process | -p) strip "$a" ;;
	esac
	case $a in
	--bundle=*) strip "${a#--bundle=}/config.json" ;;
	--process=*) strip "${a#--process=}" ;;
	esac
	prev=$a
done
exec %s "$@"
`

// writeRuncWrapper writes the wrapper into dir and returns its path.
func writeRuncWrapper(dir string) (string, error) {
	runc, err := exec.LookPath("runc")
	if err != nil {
		return "", fmt.Errorf("runc is not in PATH (Debian's docker.io brings it): %w", err)
	}
	if _, err := exec.LookPath("jq"); err != nil {
		return "", fmt.Errorf("the runc wrapper needs jq (apt-get install jq): %w", err)
	}
	path := filepath.Join(dir, "runc-wrapper")
	return path, os.WriteFile(path, []byte(runcWrapperScript(runc)), 0o755)
}

// runcWrapperScript is the wrapper that runs the runc at path runc.
func runcWrapperScript(runc string) string {
	return fmt.Sprintf(runcWrapper, "'"+strings.ReplaceAll(runc, "'", `'\''`)+"'")
}
