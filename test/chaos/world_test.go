package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/test/cluster"
)

const ns = "default"

// kinds of claim, made in turn: dynamic Immediate and WaitForFirstConsumer
// (with a pod) on the local driver, static and pre-bound PVs, dynamic Retain
// on the local driver, and on the mock driver clone sources and their
// clones.
var kinds = []string{"immediate", "wffc", "static", "prebound", "retain", "source", "clone"}

// Finalizers that must be gone from a settled claim.
const (
	finalizerInFlight = "provisioner.tether.dev/volume-in-flight"
	finalizerClone    = "provisioner.storage.kubernetes.io/cloning-protection"
)

// world is the run's state: the cluster, the processes, what was made.
type world struct {
	t     *testing.T
	c     *cluster.Cluster
	stack *cluster.Stack
	mu    *sync.Mutex
	rng   *rand.Rand
	uids  map[string]bool // UIDs of every claim created
	mock  *mock

	kindOf  map[int]string // claim index -> kind
	sources []int          // indices of clone sources made
	pvsMu   sync.Mutex
	pvs     map[string]seenPV // every dynamic PV ever seen
}

// seenPV is what the run remembers of a dynamic PV, even once it is gone.
type seenPV struct {
	driver, handle, claim string
	policy                corev1.PersistentVolumeReclaimPolicy
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

func (w *world) create(i int, n *counters) string {
	t, ctx, cs := w.t, w.t.Context(), w.c.Client
	kind := kinds[i%len(kinds)]
	var source string
	if kind == "clone" {
		w.mu.Lock()
		if len(w.sources) == 0 {
			kind = "source"
		} else {
			source = name(w.sources[w.rng.IntN(len(w.sources))])
		}
		w.mu.Unlock()
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if source != "" {
		claim.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: source}
	}
	class := classOf[kind]
	if kind == "static" || kind == "prebound" {
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
		return kind
	}
	w.mu.Lock()
	w.uids[string(out.UID)] = true
	w.kindOf[i] = kind
	if kind == "source" {
		w.sources = append(w.sources, i)
	}
	w.mu.Unlock()
	n.made(kind)
	if kind == "wffc" {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name(i)}}}}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Errorf("create pod: %v", err)
		}
	}
	return kind
}

// watchPVs remembers every dynamic PV the run sees, so that the check can
// tell a retained volume that was deleted.
func (w *world) watchPVs() {
	factory := informers.NewSharedInformerFactory(w.c.Client, 0)
	inf := factory.Core().V1().PersistentVolumes().Informer()
	record := func(obj any) {
		pv, ok := obj.(*corev1.PersistentVolume)
		if !ok || pv.Spec.CSI == nil {
			return
		}
		s := seenPV{driver: pv.Spec.CSI.Driver, handle: pv.Spec.CSI.VolumeHandle, policy: pv.Spec.PersistentVolumeReclaimPolicy}
		if pv.Spec.ClaimRef != nil {
			s.claim = pv.Spec.ClaimRef.Name
		}
		w.pvsMu.Lock()
		w.pvs[pv.Name] = s
		w.pvsMu.Unlock()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record,
		UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		w.t.Fatal(err)
	}
	factory.Start(w.t.Context().Done())
	factory.WaitForCacheSync(w.t.Context().Done())
	w.t.Cleanup(factory.Shutdown)
}

// delete removes a claim (and its pod, which would hold it).
func (w *world) delete(i int, n *counters) {
	ctx, cs := w.t.Context(), w.c.Client
	zero := int64(0)
	_ = cs.CoreV1().Pods(ns).Delete(ctx, name(i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name(i), metav1.DeleteOptions{}); err == nil {
		w.mu.Lock()
		kind := w.kindOf[i]
		w.mu.Unlock()
		n.gone(kind)
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
		switch w.intn(4) {
		case 0:
			victim = w.leader(w.stack.Binders, "tether-binder")
		case 1:
			victim = w.leader(node.Provisioners, strings.ReplaceAll(cluster.LocalDriver, ".", "-")+"-"+node.Name)
		case 2:
			victim = node.Driver
		default: // the mock driver keeps its volumes in memory: only its provisioners die
			victim = w.leader(w.mock.provisioners, strings.ReplaceAll(mockDriver, ".", "-"))
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
	return append(procs, w.mock.provisioners...)
}

// converge waits until every claim is Bound or gone, nothing is being
// deleted and every dynamic PV is Bound to a live claim or, with Retain,
// Released; it returns what has not settled by the deadline.
func (w *world) converge(limit time.Duration) []string {
	var stuck []string
	start, said := time.Now(), time.Now()
	_ = wait.PollUntilContextTimeout(w.t.Context(), 500*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		s, err := w.unsettled(ctx)
		if err != nil {
			return false, nil
		}
		stuck = s
		if len(s) > 0 && time.Since(said) > 15*time.Second {
			said = time.Now()
			w.t.Logf("settling, %s: %d not settled, such as %s", time.Since(start).Round(time.Second), len(s), s[0])
		}
		return len(s) == 0, nil
	})
	return stuck
}

// unsettled lists the claims and PVs that are not where they should end.
func (w *world) unsettled(ctx context.Context) ([]string, error) {
	cs := w.c.Client
	claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	live := map[string]bool{}
	for _, c := range claims.Items {
		live[string(c.UID)] = true
		switch {
		case c.DeletionTimestamp != nil:
			out = append(out, fmt.Sprintf("claim %s: Terminating (%s), finalizers %v", c.Name, c.Status.Phase, c.Finalizers))
		case c.Status.Phase != corev1.ClaimBound:
			out = append(out, fmt.Sprintf("claim %s: %s", c.Name, c.Status.Phase))
		case slices.Contains(c.Finalizers, finalizerInFlight) || slices.Contains(c.Finalizers, finalizerClone):
			out = append(out, fmt.Sprintf("claim %s: Bound, still has finalizers %v", c.Name, c.Finalizers))
		}
	}
	for _, pv := range pvs.Items {
		if pv.DeletionTimestamp != nil {
			out = append(out, fmt.Sprintf("PV %s: deleting (%s), finalizers %v", pv.Name, pv.Status.Phase, pv.Finalizers))
			continue
		}
		if pv.Spec.CSI == nil {
			continue
		}
		claim := "none"
		if pv.Spec.ClaimRef != nil {
			claim = pv.Spec.ClaimRef.Name + " " + string(pv.Spec.ClaimRef.UID)
		}
		retain := pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain
		switch {
		case pv.Status.Phase == corev1.VolumeBound && pv.Spec.ClaimRef != nil && live[string(pv.Spec.ClaimRef.UID)]:
		case pv.Status.Phase == corev1.VolumeReleased && retain:
		default:
			out = append(out, fmt.Sprintf("PV %s (%s): %s, claim %s", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy, pv.Status.Phase, claim))
		}
	}
	return out, nil
}

var volumeNameRE = regexp.MustCompile(`pvc-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// check asserts the invariants and returns them as figures. stuck is what
// converge left.
func (w *world) check(stuck []string) string {
	t, ctx, cs := w.t, w.t.Context(), w.c.Client
	for _, s := range stuck {
		t.Errorf("stuck: %s", s)
	}
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
		if c.Spec.VolumeName == "" {
			continue
		}
		if _, dup := claimOfPV[c.Spec.VolumeName]; dup {
			double++
			t.Errorf("PV %s is named by two claims", c.Spec.VolumeName)
		}
		claimOfPV[c.Spec.VolumeName] = c.Name
	}

	// Backend volumes, by driver and ID: the local driver's on every node,
	// and the mock driver's made for claims.
	backend := map[string]string{} // key -> where
	for _, node := range w.stack.Nodes {
		for _, id := range listVolumes(t, node.Socket) {
			backend[cluster.LocalDriver+"/"+id] = node.Name
		}
	}
	for _, id := range w.mock.Volumes(t) {
		backend[mockDriver+"/"+id] = "mock"
	}
	// What PVs track: a Bound PV, or a Released PV with Retain (kept).
	tracked, keep, retainedPV := map[string]string{}, map[string]string{}, map[string]bool{}
	for _, pv := range pvs.Items {
		if pv.Spec.CSI == nil {
			continue
		}
		key := pv.Spec.CSI.Driver + "/" + pv.Spec.CSI.VolumeHandle
		tracked[key] = pv.Name
		if pv.Status.Phase == corev1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain {
			retainedPV[key] = true
		}
		if pv.Status.Phase == corev1.VolumeBound || retainedPV[key] {
			keep[key] = pv.Name
		}
	}
	leaked, retained, wronglyDeleted := 0, 0, 0
	for key, where := range backend {
		switch {
		case retainedPV[key]:
			retained++
		case tracked[key] == "":
			leaked++
			t.Errorf("leaked backend volume %s on %s: no PV tracks it", key, where)
		}
	}
	// A PV being deleted (Delete policy) may have lost its volume already:
	// if it stayed so, converge named it as stuck.
	for key, pv := range keep {
		if backend[key] == "" {
			wronglyDeleted++
			t.Errorf("wrongly deleted: PV %s tracks %s, which the driver no longer has", pv, key)
		}
	}
	// A dynamic PV with Retain is never deleted by tether.
	live := map[string]bool{}
	for _, pv := range pvs.Items {
		live[pv.Name] = true
	}
	w.pvsMu.Lock()
	seenRetain := 0
	for name, s := range w.pvs {
		if s.policy != corev1.PersistentVolumeReclaimRetain {
			continue
		}
		seenRetain++
		if !live[name] {
			wronglyDeleted++
			t.Errorf("wrongly deleted: PV %s (Retain, claim %s, volume %s) is gone", name, s.claim, s.handle)
		}
	}
	w.pvsMu.Unlock()

	// Every CreateVolume name was prefix-<UID> of a claim that existed.
	strangers := 0
	logs := []string{w.mock.Proc.LogPath}
	for _, node := range w.stack.Nodes {
		logs = append(logs, node.Driver.LogPath)
	}
	for _, path := range logs {
		for _, line := range strings.Split(cluster.Tail(path, 10000000), "\n") {
			if !strings.Contains(line, "CreateVolume") || !(strings.Contains(line, `"CSI call"`) || strings.Contains(line, "gRPCCall")) {
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
	bound := 0
	for _, c := range claims.Items {
		if c.Status.Phase == corev1.ClaimBound {
			bound++
		}
	}
	return fmt.Sprintf("surviving claims %d (%d Bound); leaked backend volumes %d, wrongly deleted %d, stuck %d; "+
		"retained volumes %d (of %d Retain PVs seen); double bindings %d; CreateVolume names without a claim %d",
		len(claims.Items), bound, leaked, wronglyDeleted, len(stuck), retained, seenRetain, double, strangers)
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
