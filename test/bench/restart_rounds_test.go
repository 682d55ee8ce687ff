package bench

import (
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/test/cluster"

	"github.com/tether-csi/tether/test/benchkit"
)

// rounds runs the restart bench's measurements, one round per churn
// figure, on one cluster: each round a binder starts (restart), a second
// stands by and leads once the first is killed (failover).
type rounds struct {
	t       *testing.T
	c       *cluster.Cluster
	admin   kubernetes.Interface
	path    string
	args    []string
	pprof   string
	addrs   map[string]string
	n       int
	timeout time.Duration
	// leader is the binder that leads at the end of the last round.
	leader *cluster.Process
}

type roundResult struct {
	restart, failover Timing
	rssA, rssB        int64
}

func (r *rounds) start(name string) *cluster.Process {
	a := r.args
	if r.pprof != "" {
		r.addrs[name] = cluster.FreeAddr(r.t)
		a = append(append([]string(nil), r.args...), "--enable-pprof", "--http-endpoint="+r.addrs[name])
	}
	return r.c.Run(r.t, cluster.ProcessOptions{Name: name, Path: r.path, Args: a})
}

// handOver ends a round: its leader is killed and its Lease deleted, so
// that the next round's binder starts as the first did, with no Lease to
// wait out.
func (r *rounds) handOver() {
	t := r.t
	r.leader.Kill()
	err := r.admin.CoordinationV1().Leases("default").Delete(t.Context(), "tether-binder", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete the binder's Lease: %v", err)
	}
}

// measure is round i, with k nodes made and deleted before its binder
// starts and k more while its standby stands by.
func (r *rounds) measure(i, k int) roundResult {
	t, ctx, admin, timeout := r.t, r.t.Context(), r.admin, r.timeout
	label := fmt.Sprintf("%d", i+1)
	if k > 0 {
		if err := churnNodes(ctx, admin, "early"+label, k); err != nil {
			t.Fatalf("churn before the start: %v", err)
		}
		t.Logf("%d nodes made and deleted before the start", k)
	}

	// Restart: a new pair, then the binder.
	probe := "restart-" + label
	if err := createProbe(ctx, admin, probe); err != nil {
		t.Fatal(err)
	}
	nameA, nameB := fmt.Sprintf("binder-%c", 'a'+2*i), fmt.Sprintf("binder-%c", 'b'+2*i)
	start := time.Now()
	first := r.start(nameA)
	waitProfile := func() {}
	if r.pprof != "" {
		waitProfile = r.c.CPUProfiles(t, r.pprof, fmt.Sprintf("restart-%d-churn-%d", r.n, k), 20, map[string]string{"binder": r.addrs[nameA]})
	}
	synced, bound, err := waitStartAndBind(ctx, admin, first, probe, timeout)
	if err != nil {
		t.Fatalf("restart: %v\n%s", err, cluster.Tail(first.LogPath, 30))
	}
	waitProfile()
	saveHeapProfile(t, r.pprof, fmt.Sprintf("restart-%d-churn-%d", r.n, k), "binder", r.addrs[nameA])
	res := roundResult{restart: Timing{Synced: synced.Sub(start), Bound: bound.Sub(start)}}
	res.rssA = benchkit.ReadMem(first.Pid()).HWM

	// Failover: a standby, the leader killed, a new pair.
	second := r.start(nameB)
	if err := waitLog(ctx, second.LogPath, "Another replica leads", time.Minute); err != nil {
		t.Fatalf("the standby did not see the leader: %v\n%s", err, cluster.Tail(second.LogPath, 30))
	}
	// A standby that has stood by a while: its caches are full (it fills
	// them before it leads).
	if err := waitLog(ctx, second.LogPath, "Caches synced", timeout); err != nil {
		t.Fatalf("the standby's caches did not sync: %v\n%s", err, cluster.Tail(second.LogPath, 30))
	}
	if k > 0 {
		prefix := "standby" + label
		if err := churnNodes(ctx, admin, prefix, k); err != nil {
			t.Fatalf("churn while the standby stands by: %v", err)
		}
		churned := time.Now()
		// The deletions reach the standby in order: the marker's is last.
		if err := waitLog(ctx, second.LogPath, `node="churn-`+prefix+`-marker" lost=true`, timeout); err != nil {
			t.Fatalf("the standby did not see the churn: %v\n%s", err, cluster.Tail(second.LogPath, 30))
		}
		t.Logf("%d nodes made and deleted while the standby stood by; it saw the last go %s after the deletions were sent",
			k, time.Since(churned).Round(10*time.Millisecond))
	}
	killed := time.Now()
	first.Kill()
	probe = "failover-" + label
	if err := createProbe(ctx, admin, probe); err != nil {
		t.Fatal(err)
	}
	synced, bound, err = waitStartAndBind(ctx, admin, second, probe, timeout)
	if err != nil {
		t.Fatalf("failover: %v\n%s", err, cluster.Tail(second.LogPath, 30))
	}
	res.failover = Timing{Synced: synced.Sub(killed), Bound: bound.Sub(killed)}
	res.rssB = benchkit.ReadMem(second.Pid()).HWM
	r.leader = second
	return res
}
