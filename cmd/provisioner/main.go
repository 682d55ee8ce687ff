// Command provisioner is tether's CSI external-provisioner sidecar.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
)

func main() {
	fs := flag.NewFlagSet("provisioner", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: provisioner [flags]\n\nProvisions and deletes volumes through a CSI driver.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	klog.InitFlags(fs)
	_ = fs.String("csi-address", "/run/csi/socket", "Path of the CSI driver's unix socket.")
	_ = fs.String("kubeconfig", "", "Path to a kubeconfig file; in-cluster configuration when empty.")
	_ = fs.Parse(os.Args[1:])
	klog.Info("provisioner: not implemented yet")
	os.Exit(1)
}
