// Command demo runs tether on a local control plane and shows claims going
// from Pending to Bound. `make demo` runs it; DEMO_EXIT=1 makes it end by
// itself once the table settles (non-zero if a claim did not bind).
package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tether-csi/tether/test/cluster"
)

// The demo's claims, from examples/ (applied in this order).
var manifests = []string{
	"storageclass-local.yaml",
	"static-local-pv.yaml",
	"prebound-pv.yaml",
	"claim-with-volumename.yaml",
	"claim-immediate.yaml",
	"claim-and-pod.yaml",
}

const settleTimeout = 3 * time.Minute

func main() {
	r := newRunner()
	code := 0
	func() {
		defer func() {
			if p := recover(); p != nil && p != errFatal {
				panic(p)
			}
		}()
		code = run(r)
	}()
	fmt.Println("\nStopping every process and removing the temporary folders…")
	r.cleanUp()
	if r.Failed() && code == 0 {
		code = 1
	}
	os.Exit(code)
}

func run(r *runner) int {
	ctx := r.Context()
	var c *cluster.Cluster
	var nodes map[string]*cluster.RealNode
	if err := cluster.RealNodeHostReady(); err != nil {
		fmt.Printf("\n(No real nodes on this machine: %v.\n The demo runs on fake nodes: claims bind, but no pod runs.)\n", err)
		c = startFake(r)
	} else {
		c, nodes = startReal(r)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		r.Fatal(err)
	}
	step("Applying the examples")
	for _, m := range manifests {
		fmt.Print(indent(string(c.Kubectl(r, nil, "apply", "-f", filepath.Join(root, "examples", m)))))
	}
	step("Watching the claims (Ctrl-C to stop)")
	done := watch(ctx, c.Client, nodes)
	kubectl, _ := cluster.Tool("kubectl")
	fmt.Printf("\nWhat to type next (while this runs):\n")
	fmt.Printf("  %s --kubeconfig %s get pvc,pv,pods -o wide\n", kubectl, c.Kubeconfig)
	fmt.Printf("  %s --kubeconfig %s describe pvc web-data\n", kubectl, c.Kubeconfig)
	fmt.Printf("  %s --kubeconfig %s get csistoragecapacities -o wide\n", kubectl, c.Kubeconfig)
	if nodes != nil {
		fmt.Printf("  %s --kubeconfig %s -n %s get pods -o wide\n", kubectl, c.Kubeconfig, cluster.DeployNamespace)
		for _, name := range slices.Sorted(maps.Keys(nodes)) {
			fmt.Printf("  ls -R %s   # the disk of %s (its local volumes)\n", filepath.Join(nodes[name].Data, "volumes"), name)
		}
	}
	fmt.Printf("  component logs: %s/*.log\n", c.Dir)
	if os.Getenv("DEMO_EXIT") == "1" {
		if !done {
			fmt.Println("\nNot every claim was bound (or not every pod wrote to its volume).")
			return 1
		}
		fmt.Println("\nEvery claim is bound (DEMO_EXIT=1: ending now).")
		return 0
	}
	fmt.Println("\nRunning until Ctrl-C.")
	<-ctx.Done()
	return 0
}

// startReal starts the control plane and two real nodes (kubelet,
// containerd, runc), and runs deploy/csi on them as pods.
func startReal(r *runner) (*cluster.Cluster, map[string]*cluster.RealNode) {
	step("Building tether's images as `make images` does (binder, provisioner, local driver), and the test registrar")
	start := time.Now()
	images := cluster.NodeImages(r)
	fmt.Printf("  built in %s\n", time.Since(start).Round(time.Second))
	step("Starting etcd, kube-apiserver, kube-scheduler and kube-controller-manager (its PV binder off)")
	c := cluster.Start(r, cluster.Options{RealNodes: true, Scheduler: true,
		Controllers: []string{"*", "-persistentvolume-binder-controller"}})
	step("Starting two real nodes: kubelet, containerd and runc, each in a mount namespace of its own")
	nodes := map[string]*cluster.RealNode{}
	for _, name := range []string{"node-1", "node-2"} {
		nodes[name] = c.StartRealNode(r, name, images)
	}
	step("Applying deploy/csi (tether's binder Deployment; the local driver DaemonSet with tether's provisioner)")
	took := c.DeployCSI(r, slices.Sorted(maps.Keys(nodes)))
	fmt.Printf("  running on both nodes %s after apply\n", took.Round(100*time.Millisecond))
	c.CheckRunsReleaseImages(r)
	fmt.Println("  the pods run the images just built (their image IDs match)")
	return c, nodes
}

// startFake starts the control plane, and two fake nodes each with the
// local driver and tether's provisioner as processes, and the binder.
func startFake(r *runner) *cluster.Cluster {
	step("Building the binder, the provisioner and the local driver")
	for _, pkg := range []string{"./cmd/binder", "./cmd/provisioner", "./examples/local-driver"} {
		fmt.Printf("  go build %s\n", pkg)
		cluster.BuildBinary(r, pkg)
	}
	step("Starting etcd, kube-apiserver, kube-scheduler and kube-controller-manager (its PV binder off)")
	c := cluster.Start(r, cluster.Options{Scheduler: true, Controllers: []string{
		"persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller"}})
	step("Starting two fake nodes, each with the local driver and a tether provisioner, and the tether binder")
	cluster.StartLocalStack(r, c, cluster.StackOptions{})
	return c
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}

func isTerminal() bool {
	fi, err := os.Stdout.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
