package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/test/cluster"
)

// watch shows the claims' table until it settles or the settle time ends,
// and reports whether it settled: every claim Bound and, on real nodes,
// every pod Running with what it wrote on its node's disk.
func watch(ctx context.Context, cs kubernetes.Interface, nodes map[string]*cluster.RealNode) bool {
	tty := isTerminal()
	boundAt := map[string]time.Duration{}
	last := ""
	deadline := time.Now().Add(settleTimeout)
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	for {
		table, done := render(ctx, cs, nodes, boundAt)
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

// row is one claim of the table.
type row struct {
	claim, status, volume, node, capacity, bound string
	pod, disk                                    string
}

// render makes the table of claims; done is true when it has settled.
func render(ctx context.Context, cs kubernetes.Interface, nodes map[string]*cluster.RealNode, boundAt map[string]time.Duration) (string, bool) {
	claims, err := cs.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("  (cannot list claims: %v)\n", err), false
	}
	pvs := map[string]*corev1.PersistentVolume{}
	if list, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); err == nil {
		for i := range list.Items {
			pvs[list.Items[i].Name] = &list.Items[i]
		}
	}
	podOf := map[string]*corev1.Pod{}
	if list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err == nil {
		for i := range list.Items {
			for _, v := range list.Items[i].Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					podOf[v.PersistentVolumeClaim.ClaimName] = &list.Items[i]
				}
			}
		}
	}
	slices.SortFunc(claims.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	rows := []row{{"CLAIM", "STATUS", "VOLUME", "NODE", "CAPACITY", "BOUND IN", "POD", "ON THE NODE'S DISK"}}
	done := len(claims.Items) > 0
	for _, pvc := range claims.Items {
		r := row{claim: pvc.Name, status: string(pvc.Status.Phase), volume: pvc.Spec.VolumeName}
		if pvc.Status.Phase == corev1.ClaimBound {
			if _, ok := boundAt[pvc.Name]; !ok {
				boundAt[pvc.Name] = time.Since(pvc.CreationTimestamp.Time).Round(100 * time.Millisecond)
			}
			r.bound = boundAt[pvc.Name].String()
		} else {
			done = false
		}
		if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
			r.capacity = q.String()
		}
		pv := pvs[pvc.Spec.VolumeName]
		if pv != nil {
			r.node = cluster.PVNode(pv)
		}
		if r.node == "" {
			r.node = pvc.Annotations["volume.kubernetes.io/selected-node"]
		}
		if nodes != nil {
			if pod := podOf[pvc.Name]; pod != nil {
				r.pod = pod.Name + " " + string(pod.Status.Phase)
				done = done && pod.Status.Phase == corev1.PodRunning
				if pv != nil && pv.Spec.CSI != nil && nodes[r.node] != nil {
					r.disk = onDisk(filepath.Join(nodes[r.node].Data, "volumes", pv.Spec.CSI.VolumeHandle))
					done = done && r.disk != ""
				}
			}
		}
		rows = append(rows, r)
	}
	var b strings.Builder
	for _, r := range rows {
		line := fmt.Sprintf("  %-12s %-8s %-40s %-7s %-9s %-9s", r.claim, r.status, r.volume, r.node, r.capacity, r.bound)
		if nodes != nil {
			line += fmt.Sprintf(" %-18s %s", r.pod, r.disk)
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.String(), done
}

// onDisk sums up the files a pod wrote into a volume's folder: the first
// file's name and first line, and how many more there are.
func onDisk(dir string) string {
	var files []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	if len(files) == 0 {
		return ""
	}
	data, _ := os.ReadFile(files[0])
	first, _, _ := strings.Cut(string(data), "\n")
	if len(first) > 32 {
		first = first[:32] + "…"
	}
	s := fmt.Sprintf("%s: %q", strings.TrimPrefix(files[0], dir+"/"), first)
	if len(files) > 1 {
		s += fmt.Sprintf(" (+%d files)", len(files)-1)
	}
	return s
}
