package csi

import (
	"fmt"
	"strings"
)

// socketHint says what to do when the driver's socket refuses this process
// (connect: permission denied): the usual cause is a driver that runs as
// root beside a sidecar that does not, since external-provisioner's image
// ran as root and tether's runs as 65532. "" for any other error.
func socketHint(err error, uid int) string {
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		return ""
	}
	return fmt.Sprintf("this process (uid %d) may not open the driver's socket: run this container as the "+
		"socket's owner (securityContext.runAsUser: 0 for a driver running as root, as external-provisioner's "+
		"image did), or have the driver make its socket writable by this user's group", uid)
}
