// Command demo runs tether on a local control plane and shows claims going
// from Pending to Bound. `make demo` runs it; DEMO_EXIT=1 makes it end by
// itself once the table settles (non-zero if a claim did not bind).
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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
	kubectl, err := cluster.Tool("kubectl")
	if err != nil {
		r.Fatal(err)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		r.Fatal(err)
	}
	step("Applying the examples")
	for _, m := range manifests {
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig="+c.Kubeconfig, "apply", "-f",
			filepath.Join(root, "examples", m)).CombinedOutput()
		fmt.Print(indent(string(out)))
		if err != nil {
			r.Fatalf("kubectl apply -f examples/%s: %v", m, err)
		}
	}
	step("Watching the claims (Ctrl-C to stop)")
	allBound := watch(ctx, c.Client)
	fmt.Printf("\nWhat to type next (while this runs):\n")
	fmt.Printf("  %s --kubeconfig %s get pvc,pv,pods -o wide\n", kubectl, c.Kubeconfig)
	fmt.Printf("  %s --kubeconfig %s describe pvc web-data\n", kubectl, c.Kubeconfig)
	fmt.Printf("  %s --kubeconfig %s get csistoragecapacities -o wide\n", kubectl, c.Kubeconfig)
	fmt.Printf("  component logs: %s/*.log\n", c.Dir)
	if os.Getenv("DEMO_EXIT") == "1" {
		if !allBound {
			fmt.Println("\nNot every claim was bound.")
			return 1
		}
		fmt.Println("\nEvery claim is bound (DEMO_EXIT=1: ending now).")
		return 0
	}
	fmt.Println("\nRunning until Ctrl-C.")
	<-ctx.Done()
	return 0
}

// watch shows the claims' table until every claim is Bound or the settle
// time ends, and reports whether every claim was bound.
func watch(ctx context.Context, cs kubernetes.Interface) bool {
	tty := isTerminal()
	boundAt := map[string]time.Duration{}
	last := ""
	deadline := time.Now().Add(settleTimeout)
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	for {
		table, done := render(ctx, cs, boundAt)
		if table != last {
			if tty && last != "" {
				fmt.Printf("\033[%dA\033[J", strings.Count(last, "\n"))
			}
			fmt.Print(table)
			last = table
		}
		if done || time.Now().After(deadline) {
			return done
		}
		select {
		case <-ctx.Done():
			return done
		case <-ticker.C:
		}
	}
}

// render makes the table of claims; done is true when all are Bound.
func render(ctx context.Context, cs kubernetes.Interface, boundAt map[string]time.Duration) (string, bool) {
	claims, err := cs.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("  (cannot list claims: %v)\n", err), false
	}
	pvs, _ := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	nodeOf := map[string]string{}
	if pvs != nil {
		for _, pv := range pvs.Items {
			nodeOf[pv.Name] = cluster.PVNode(&pv)
		}
	}
	slices.SortFunc(claims.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	fmt.Fprintf(&b, "  %-12s %-8s %-42s %-7s %-9s %s\n", "CLAIM", "STATUS", "VOLUME", "NODE", "CAPACITY", "BOUND IN")
	done := len(claims.Items) > 0
	for _, pvc := range claims.Items {
		status := string(pvc.Status.Phase)
		bound := ""
		if pvc.Status.Phase == corev1.ClaimBound {
			if _, ok := boundAt[pvc.Name]; !ok {
				boundAt[pvc.Name] = time.Since(pvc.CreationTimestamp.Time).Round(100 * time.Millisecond)
			}
			bound = boundAt[pvc.Name].String()
		} else {
			done = false
		}
		capacity := ""
		if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
			capacity = q.String()
		}
		node := nodeOf[pvc.Spec.VolumeName]
		if node == "" {
			node = pvc.Annotations["volume.kubernetes.io/selected-node"]
		}
		fmt.Fprintf(&b, "  %-12s %-8s %-42s %-7s %-9s %s\n", pvc.Name, status, pvc.Spec.VolumeName, node, capacity, bound)
	}
	return b.String(), done
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
