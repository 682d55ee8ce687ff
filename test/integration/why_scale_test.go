package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tether-csi/tether/pkg/explain"
	"github.com/tether-csi/tether/test/cluster"
)

// TestWhyManyVolumes: on a dynamic class with 2,000 PVs (1,990 claimed by
// other claims, 10 free and too small) and no provisioner running, `kubectl
// tether why` prints the cause within its first 10 lines and exits 1, lists
// the volumes a page at a time, and names the counts and the nearest few
// instead of every volume; --show-volumes lists them all; -A finds the
// claim. tether's binder runs as deploy/csi runs it, leading on its Lease.
func TestWhyManyVolumes(t *testing.T) {
	const (
		class   = "bulk"
		driver  = "bulk.csi.tether.dev"
		claimed = 1990
		free    = 10
	)
	c := cluster.Start(t, cluster.Options{})
	cs := c.Client
	ctx := t.Context()
	mustCreate(t, cs.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tether-system"}})
	startBinder(t, c, "--leader-elect=true", "--leader-elect-resource-namespace=tether-system")
	createCSIClass(t, c, class, driver, "Retain", storagev1.VolumeBindingImmediate)

	start := time.Now()
	pvs := make(chan *corev1.PersistentVolume)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for pv := range pvs {
				if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range claimed + free {
		pv := hostPathPV(fmt.Sprintf("pv-%s-%04d", class, i), class, "10Gi")
		if i < claimed {
			// Bound to claims of another namespace that are gone: the
			// binder releases them, and Retain keeps them claimed.
			pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "other",
				Name: fmt.Sprintf("old-%d", i), UID: types.UID(fmt.Sprintf("uid-old-%d", i))}
		} else {
			pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse(fmt.Sprintf("%dGi", i-claimed+1))
		}
		pvs <- pv
	}
	close(pvs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create PV: %v", err)
	}
	t.Logf("created %d PVs of class %q in %v", claimed+free, class, time.Since(start).Round(time.Millisecond))

	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("big", class, "20Gi"))
	bin := cluster.BuildBinary(t, "./cmd/kubectl-tether")
	// The binder hands the claim to the provisioner at its first sync.
	var e explain.Explanation
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		e = whyJSON(t, bin, c.Kubeconfig, "default/big")
		return e.Cause != nil && e.Cause.Reason == explain.CauseNoProvisioner, nil
	})
	if err != nil {
		t.Fatalf("cause %+v, want %s", e.Cause, explain.CauseNoProvisioner)
	}

	start = time.Now()
	text := runWhyStatus(t, bin, c.Kubeconfig, 1, "default/big")
	took := time.Since(start)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	cause := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "Why: "+explain.CauseNoProvisioner+": ") {
			cause = i + 1
			break
		}
	}
	if cause < 0 || cause > 10 {
		t.Errorf("the cause is on line %d, want within the first 10:\n%s", cause, text)
	}
	if len(lines) > 40 {
		t.Errorf("%d lines of output, want the counts and the nearest few, not every volume:\n%s", len(lines), text)
	}
	for _, want := range []string{
		fmt.Sprintf(`Volumes of class %q: %d: %d claimed by other claims, %d too small`, class, claimed+free, claimed, free),
		"pv-bulk-1999  10Gi  TooSmall", fmt.Sprintf("(--show-volumes lists all %d)", claimed+free),
		"Binder: tether's: Lease tether-system/tether-binder is held by ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("%q not in:\n%s", want, text)
		}
	}
	t.Logf("kubectl tether why default/big: %d lines in %v, the cause on line %d\n%s", len(lines), took.Round(time.Millisecond), cause, text)

	start = time.Now()
	all := runWhyStatus(t, bin, c.Kubeconfig, 1, "default/big", "--show-volumes")
	n := strings.Count(all, "\n    pv-bulk-")
	t.Logf("--show-volumes: %d volume lines, %d lines in all, in %v", n, strings.Count(all, "\n"), time.Since(start).Round(time.Millisecond))
	if n != claimed+free {
		t.Errorf("--show-volumes lists %d volumes, want %d", n, claimed+free)
	}

	start = time.Now()
	table := runWhyStatus(t, bin, c.Kubeconfig, 1, "-A")
	t.Logf("kubectl tether why -A in %v\n%s", time.Since(start).Round(time.Millisecond), table)
	if !strings.Contains(table, "1 claim waits: 1 NoProvisioner (all namespaces)") {
		t.Errorf("-A:\n%s", table)
	}
}
