// Command binder is tether's persistent-volume binder: it binds claims to
// volumes in place of kube-controller-manager's persistentvolume-binder-controller.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
)

func main() {
	fs := flag.NewFlagSet("binder", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: binder [flags]\n\nBinds PersistentVolumeClaims to PersistentVolumes.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	klog.InitFlags(fs)
	_ = fs.String("kubeconfig", "", "Path to a kubeconfig file; in-cluster configuration when empty.")
	_ = fs.Parse(os.Args[1:])
	klog.Info("binder: not implemented yet")
	os.Exit(1)
}
