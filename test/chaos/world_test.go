package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tether-csi/tether/test/cluster"
)

const ns = "default"

var kinds = []string{"immediate", "wffc", "static", "prebound"}

// world is the run's state: the cluster, the processes, what was made.
type world struct {
	t     *testing.T
	c     *cluster.Cluster
	stack *cluster.Stack
	mu    *sync.Mutex
	rng   *rand.Rand
	uids  map[string]bool // UIDs of every claim created
}

func (w *world) chance(p float64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.Float64() < p
}

func (w *world) intn(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.IntN(n)
}

func name(i int) string { return fmt.Sprintf("c-%04d", i) }

func (w *world) create(i int, n *counters) {
	t, ctx, cs := w.t, w.t.Context(), w.c.Client
	kind := kinds[i%len(kinds)]
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	class := kind
	if kind == "static" || kind == "prebound" {
		class = "manual"
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name(i)}, Spec: corev1.PersistentVolumeSpec{
			StorageClassName: "manual", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/" + name(i)}}}}
		if kind == "prebound" {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: name(i)}
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Errorf("create PV: %v", err)
		}
	}
	claim.Spec.StorageClassName = &class
	out, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Errorf("create claim: %v", err)
		return
	}
	w.mu.Lock()
	w.uids[string(out.UID)] = true
	w.mu.Unlock()
	n.created.Add(1)
	if kind == "wffc" {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name(i)}}}}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Errorf("create pod: %v", err)
		}
	}
}

// delete removes a claim (and its pod, which would hold it).
func (w *world) delete(i int, n *counters) {
	ctx, cs := w.t.Context(), w.c.Client
	zero := int64(0)
	_ = cs.CoreV1().Pods(ns).Delete(ctx, name(i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name(i), metav1.DeleteOptions{}); err == nil {
		n.deleted.Add(1)
	}
}

// killer SIGKILLs a binder leader, a provisioner leader or a driver every
// few seconds, and restarts it a moment later.
func (w *world) killer(ctx context.Context, n *counters) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(2000+w.intn(3000)) * time.Millisecond):
		}
		node := w.stack.Nodes[w.intn(len(w.stack.Nodes))]
		var victim *cluster.Process
		switch w.intn(3) {
		case 0:
			victim = w.leader(w.stack.Binders, "tether-binder")
		case 1:
			victim = w.leader(node.Provisioners, strings.ReplaceAll(cluster.LocalDriver, ".", "-")+"-"+node.Name)
		default:
			victim = node.Driver
		}
		if victim == nil || !victim.Running() {
			continue
		}
		victim.Kill()
		n.kills.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(300+w.intn(1500)) * time.Millisecond):
		}
		if err := victim.Start(); err != nil {
			w.t.Errorf("restart %s: %v", victim.LogPath, err)
		}
	}
}

// leader is the process that holds a Lease now, by the identity it logged.
func (w *world) leader(procs []*cluster.Process, lease string) *cluster.Process {
	l, err := w.c.Client.CoordinationV1().Leases(ns).Get(w.t.Context(), lease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return nil
	}
	for _, p := range procs {
		if strings.Contains(cluster.Tail(p.LogPath, 1000000), `identity="`+*l.Spec.HolderIdentity+`"`) {
			return p
		}
	}
	return nil
}

func (w *world) restartAll() {
	for _, p := range w.allProcs() {
		if !p.Running() {
			if err := p.Start(); err != nil {
				w.t.Errorf("restart %s: %v", p.LogPath, err)
			}
		}
	}
}

func (w *world) allProcs() []*cluster.Process {
	procs := append([]*cluster.Process{}, w.stack.Binders...)
	for _, n := range w.stack.Nodes {
		procs = append(procs, n.Driver)
		procs = append(procs, n.Provisioners...)
	}
	return procs
}

// converge waits until every claim is Bound or gone, and nothing is being
// deleted.
func (w *world) converge(limit time.Duration) {
	cs := w.c.Client
	var last string
	err := wait.PollUntilContextTimeout(w.t.Context(), 500*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range claims.Items {
			if c.Status.Phase != corev1.ClaimBound || c.DeletionTimestamp != nil {
				last = fmt.Sprintf("claim %s: %s, deleting %v", c.Name, c.Status.Phase, c.DeletionTimestamp != nil)
				return false, nil
			}
		}
		pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, pv := range pvs.Items {
			dynamic := pv.Spec.CSI != nil
			if pv.DeletionTimestamp != nil || (dynamic && pv.Status.Phase != corev1.VolumeBound) {
				last = fmt.Sprintf("PV %s: %s, deleting %v", pv.Name, pv.Status.Phase, pv.DeletionTimestamp != nil)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		w.t.Fatalf("did not converge within %s: %s", limit, last)
	}
}

var volumeNameRE = regexp.MustCompile(`pvc-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// check asserts the invariants and returns them as figures.
func (w *world) check() string {
	t, ctx, cs := w.t, w.t.Context(), w.c.Client
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvOfClaim, claimOfPV := map[string]string{}, map[string]string{}
	double := 0
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.UID != "" && pv.Status.Phase == corev1.VolumeBound {
			if _, dup := pvOfClaim[string(ref.UID)]; dup {
				double++
				t.Errorf("claim %s has two PVs", ref.Name)
			}
			pvOfClaim[string(ref.UID)] = pv.Name
		}
	}
	for _, c := range claims.Items {
		if _, dup := claimOfPV[c.Spec.VolumeName]; dup {
			double++
			t.Errorf("PV %s is named by two claims", c.Spec.VolumeName)
		}
		claimOfPV[c.Spec.VolumeName] = c.Name
	}
	// Backend volumes against the PVs that reference them, node by node.
	leaked, lost := 0, 0
	handles := map[string]bool{}
	for _, pv := range pvs.Items {
		if pv.Spec.CSI != nil {
			handles[pv.Spec.CSI.VolumeHandle] = true
		}
	}
	backend := map[string]bool{}
	for _, node := range w.stack.Nodes {
		for _, id := range listVolumes(t, node.Socket) {
			backend[id] = true
			if !handles[id] {
				leaked++
				t.Errorf("leaked backend volume %s on %s", id, node.Name)
			}
		}
	}
	for h := range handles {
		if !backend[h] {
			lost++
			t.Errorf("PV handle %s has no backend volume", h)
		}
	}
	// Every CreateVolume name was prefix-<UID> of a claim that existed.
	strangers := 0
	for _, node := range w.stack.Nodes {
		for _, line := range strings.Split(cluster.Tail(node.Driver.LogPath, 10000000), "\n") {
			if !strings.Contains(line, "CreateVolume") || !strings.Contains(line, `"CSI call"`) {
				continue
			}
			for _, v := range volumeNameRE.FindAllString(line, -1) {
				if !w.uids[strings.TrimPrefix(v, "pvc-")] {
					strangers++
					t.Errorf("CreateVolume %s names no claim that existed", v)
				}
			}
		}
	}
	return fmt.Sprintf("surviving claims %d (all Bound), double bindings %d, leaked backend volumes %d, PVs without backend %d, CreateVolume names without a claim %d",
		len(claims.Items), double, leaked, lost, strangers)
}

func listVolumes(t *testing.T, socket string) []string {
	vols, err := cluster.DriverVolumes(t.Context(), socket)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(vols))
	for _, v := range vols {
		ids = append(ids, v.GetVolumeId())
	}
	return ids
}
