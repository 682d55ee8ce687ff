package cluster

import (
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// controller-runtime's log, which envtest (Start, AddUser) writes to, goes
// to klog, like every other Kubernetes library's log in the process: at
// klog's default verbosity that is envtest's errors only. Without a logger
// set, controller-runtime drops its lines and, on the first one 30 s or more
// after the process started, prints a goroutine stack to stderr instead (a
// cold `make demo` builds images for longer than that before Start; long
// test binaries start clusters later than that). A program that wants
// another logger calls ctrllog.SetLogger itself after this init.
func init() { ctrllog.SetLogger(klog.NewKlogr()) }
