package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/test/benchout"
	"github.com/tether-csi/tether/test/cluster"

	"github.com/tether-csi/tether/test/benchkit"
)

// TestBenchBinderRestart measures what a binder's restart and a leader
// failover cost at scale (make bench-binder-restart): N claims already
// bound to N volumes, then
//
//   - restart: a binder starts (leader election on, alone), and a new
//     claim and volume wait for it; the time from the process's start to
//     that claim Bound, and to the binder's caches synced ("Binder
//     started" in its log);
//   - failover: a second binder stands by on the same lease until its
//     caches are synced, the first is killed (SIGKILL: the lease is not
//     handed back and must expire, 15 s by default), and a new pair waits;
//     the time from the kill to that claim Bound.
//
// With BENCH_CHURN=K (issue 33), each volume is pinned to one of 100
// nodes (its node affinity names it), and the bench runs two rounds on
// the same cluster: the first without churn, to compare with; in the
// second, K other nodes are made and deleted before the restart's binder
// starts, and K more while the standby stands by (it sees them go, as a
// spot or autoscaled cluster's binder does, and leads with them in its
// node tracker). Between rounds the leader is killed and its Lease
// deleted. BENCH_CHURN=0 is the first round alone.
//
// Each binder's peak RSS is printed too. Knobs: BENCH_N (one size,
// default 100000), BENCH_CHURN, BENCH_QPS, BENCH_TIMEOUT (per wait, default 10m),
// BENCH_PPROF (a folder: the API server's and the first binder's CPU
// profiles over its first 20 s, and its heap once the first claim is
// Bound).
func TestBenchBinderRestart(t *testing.T) {
	if os.Getenv("TETHER_BENCH") == "" {
		t.Skip("set TETHER_BENCH=1 to run the restart bench (make bench-binder-restart)")
	}
	n := 100000
	if v := os.Getenv("BENCH_N"); v != "" {
		sizes, err := ParseSizes(v)
		if err != nil || len(sizes) != 1 {
			t.Fatalf("BENCH_N=%q: want one size", v)
		}
		n = sizes[0]
	}
	timeout := 10 * time.Minute
	if v := os.Getenv("BENCH_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("BENCH_TIMEOUT: %v", err)
		}
		timeout = d
	}
	qps := "2000"
	if v := os.Getenv("BENCH_QPS"); v != "" {
		qps = v
	}
	churn := 0
	if v := os.Getenv("BENCH_CHURN"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 0 {
			t.Fatalf("BENCH_CHURN=%q: want a number of nodes", v)
		}
		churn = k
	}
	nodes := 0
	if os.Getenv("BENCH_CHURN") != "" {
		nodes = 100 // BENCH_CHURN=0 is the same cluster without the churn
	}

	c := cluster.Start(t, cluster.Options{APIServerArgs: map[string][]string{
		"max-requests-inflight":          {"2000"},
		"max-mutating-requests-inflight": {"1000"},
	}})
	ctx := t.Context()
	kubeconfig, config := c.AdminTokenKubeconfig(t)
	fast := rest.CopyConfig(config)
	fast.QPS, fast.Burst = 20000, 40000
	admin := kubernetes.NewForConfigOrDie(fast)

	setupStart := time.Now()
	if err := populateBound(ctx, admin, n, nodes); err != nil {
		t.Fatalf("create %d bound pairs: %v", n, err)
	}
	t.Logf("created %d claims bound to %d volumes in %s", n, n, time.Since(setupStart).Round(time.Second))
	path := cluster.BuildBinary(t, "./cmd/binder")
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=true", "--leader-elect-resource-namespace=default",
		"--kube-api-qps=" + qps, "--kube-api-burst=" + qps + "0", "-v=2"}
	r := &rounds{t: t, c: c, admin: admin, path: path, args: args, pprof: os.Getenv("BENCH_PPROF"),
		addrs: map[string]string{}, n: n, timeout: timeout}
	// With churn, the same cluster is measured without it first, then with
	// it: the two rows side by side, on the same machine at the same time.
	plan := []int{churn}
	if churn > 0 {
		plan = []int{0, churn}
	}
	for i, k := range plan {
		if i > 0 {
			r.handOver()
		}
		res := r.measure(i, k)
		shown := -1 // no churn line: volumes not pinned
		if nodes > 0 {
			shown = k
		}
		table := RestartTable(n, shown, res.restart, res.failover, res.rssA, res.rssB)
		t.Log("\n" + table)
		fmt.Print(table)
		apiRSS := benchkit.ReadMem(mustPID(c)).HWM
		run := benchout.Run{Bench: "binder-restart", Label: "tether", Started: setupStart,
			Settings: map[string]any{"n": n, "qps": qps, "lease_duration_seconds": 15, "churned_nodes": k, "pinned_nodes": nodes, "round": i + 1},
			Figures: map[string]any{
				"restart_synced_seconds": res.restart.Synced.Seconds(), "restart_first_bound_seconds": res.restart.Bound.Seconds(),
				"failover_synced_seconds": res.failover.Synced.Seconds(), "failover_first_bound_seconds": res.failover.Bound.Seconds(),
				"binder_peak_rss_bytes": res.rssA, "standby_peak_rss_bytes": res.rssB, "apiserver_peak_rss_bytes": apiRSS,
				"binder_rss_bytes_per_pair": float64(res.rssA) / float64(n),
			}}
		if path, err := benchout.Write(run); err != nil {
			t.Logf("figures as JSON: %v", err)
		} else {
			t.Logf("figures appended to %s", path)
		}
	}
}

func mustPID(c *cluster.Cluster) int {
	api, _ := c.ControlPlanePIDs()
	return api
}

// Timing is one restart's or failover's: from the start (the process's,
// or the kill of the leader) to the binder's caches synced, and to the
// waiting claim Bound.
type Timing struct{ Synced, Bound time.Duration }

// RestartTable renders the restart bench's figures.
func RestartTable(n, churn int, restart, failover Timing, rss, standbyRSS int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "binder restart and failover with %d claims bound to %d volumes (leader election on, lease 15 s):\n", n, n)
	if churn >= 0 {
		fmt.Fprintf(&b, "  volumes pinned to 100 nodes; %d nodes deleted before the start, %d while the standby stood by\n", churn, churn)
	}
	fmt.Fprintf(&b, "  %-9s %14s %16s\n", "", "caches synced", "new claim Bound")
	fmt.Fprintf(&b, "  %-9s %14s %16s   (from the binder's start)\n", "restart", seconds(restart.Synced), seconds(restart.Bound))
	fmt.Fprintf(&b, "  %-9s %14s %16s   (from the leader's SIGKILL)\n", "failover", seconds(failover.Synced), seconds(failover.Bound))
	fmt.Fprintf(&b, "  peak RSS: binder %s (%.2f KiB per pair), standby turned leader %s\n", mib(rss), float64(rss)/1024/float64(n), mib(standbyRSS))
	return b.String()
}

// waitStartAndBind waits for the binder's caches to sync (its log says
// "Binder started") and for the probe claim to be Bound, and returns when
// each was seen.
func waitStartAndBind(ctx context.Context, cs kubernetes.Interface, p *cluster.Process, probe string, timeout time.Duration) (synced, bound time.Time, err error) {
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if !p.Running() {
			return false, fmt.Errorf("the binder exited")
		}
		if synced.IsZero() {
			if log, err := os.ReadFile(p.LogPath); err == nil && strings.Contains(string(log), "Binder started") {
				synced = time.Now()
			}
		}
		if bound.IsZero() {
			claim, err := cs.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, "probe-"+probe, metav1.GetOptions{})
			if err == nil && claim.Status.Phase == corev1.ClaimBound {
				bound = time.Now()
			}
		}
		return !synced.IsZero() && !bound.IsZero(), nil
	})
	return synced, bound, err
}

func waitLog(ctx context.Context, path, text string, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		log, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(log), text), nil
	})
}

// createProbe creates a claim probe-<name> and a volume probe-pv-<name>
// that only it fits (every other volume is bound).
func createProbe(ctx context.Context, cs kubernetes.Interface, name string) error {
	size := resource.MustParse("1Gi")
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-pv-" + name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: className, Capacity: corev1.ResourceList{corev1.ResourceStorage: size}, AccessModes: modes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/tether-bench/probe-" + name}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return err
	}
	claimClass := className
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-" + name, Namespace: namespace},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &claimClass, AccessModes: modes,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}},
	}
	_, err := cs.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, claim, metav1.CreateOptions{})
	return err
}

// populateBound creates the class, the namespace and n claims each bound
// to its own volume, as a binder leaves them: the volume's claimRef and
// phase, the claim's volumeName, annotations and phase.
func populateBound(ctx context.Context, cs kubernetes.Interface, n, nodes int) error {
	if err := populate(ctx, cs, 0); err != nil {
		return err
	}
	if err := parallel(ctx, nodes, func(i int) error {
		name := fmt.Sprintf("node-%03d", i)
		_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{corev1.LabelHostname: name}}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	size := resource.MustParse("1Gi")
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	claimClass := className
	return parallel(ctx, n, func(i int) error {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%05d", i), Namespace: namespace},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &claimClass, AccessModes: modes,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}},
		}
		claim, err := cs.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		name := fmt.Sprintf("pv-%05d", i)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{storagehelpers.AnnBoundByController: "yes"}},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName: className, Capacity: corev1.ResourceList{corev1.ResourceStorage: size}, AccessModes: modes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/tether-bench/" + name}},
				NodeAffinity:                  pinTo(i, nodes),
				ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace,
					Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion},
			},
		}
		if pv, err = cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return err
		}
		pv.Status.Phase = corev1.VolumeBound
		if _, err = cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return err
		}
		claim.Spec.VolumeName = name
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
		if claim, err = cs.CoreV1().PersistentVolumeClaims(namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return err
		}
		claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: modes,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: size}}
		_, err = cs.CoreV1().PersistentVolumeClaims(namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		return err
	})
}

// pinTo is the node affinity of the i-th volume: one of nodes, by its
// hostname label (nil when nodes is 0).
func pinTo(i, nodes int) *corev1.VolumeNodeAffinity {
	if nodes == 0 {
		return nil
	}
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn,
			Values: []string{fmt.Sprintf("node-%03d", i%nodes)}}}}}}}
}

// churnNodes makes k nodes and deletes them, then a marker node, made and
// deleted after all the others are gone.
func churnNodes(ctx context.Context, cs kubernetes.Interface, prefix string, k int) error {
	names := make([]string, k)
	for i := range names {
		names[i] = fmt.Sprintf("churn-%s-%04d", prefix, i)
	}
	names = append(names, "churn-"+prefix+"-marker")
	for _, batch := range [][]string{names[:k], names[k:]} {
		if err := parallel(ctx, len(batch), func(i int) error {
			_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: batch[i],
				Labels: map[string]string{corev1.LabelHostname: batch[i], corev1.LabelTopologyZone: "zone-" + batch[i][len(batch[i])-1:]}}},
				metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
		if err := parallel(ctx, len(batch), func(i int) error {
			return cs.CoreV1().Nodes().Delete(ctx, batch[i], metav1.DeleteOptions{})
		}); err != nil {
			return err
		}
	}
	return nil
}
