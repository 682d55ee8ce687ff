package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/test/cluster"
)

// tracker follows the claims and PVs from before the first claim, and
// remembers every volume a claim was seen bound to and every claim a PV's
// claimRef was seen naming: more than one is a double binding.
type tracker struct {
	claims corelisters.PersistentVolumeClaimLister
	pvs    corelisters.PersistentVolumeLister

	mu           sync.Mutex
	claimVolumes map[string]map[string]bool    // claim -> spec.volumeName values seen
	pvClaims     map[string]map[types.UID]bool // PV -> claimRef UIDs seen
}

func (e *env) track() *tracker {
	e.t.Helper()
	tr := &tracker{claimVolumes: map[string]map[string]bool{}, pvClaims: map[string]map[types.UID]bool{}}
	f := informers.NewSharedInformerFactory(e.c.Client, 0)
	claims, pvs := f.Core().V1().PersistentVolumeClaims(), f.Core().V1().PersistentVolumes()
	tr.claims, tr.pvs = claims.Lister(), pvs.Lister()
	seeClaim := func(obj any) {
		if c, ok := obj.(*corev1.PersistentVolumeClaim); ok && c.Spec.VolumeName != "" {
			tr.mu.Lock()
			if tr.claimVolumes[c.Name] == nil {
				tr.claimVolumes[c.Name] = map[string]bool{}
			}
			tr.claimVolumes[c.Name][c.Spec.VolumeName] = true
			tr.mu.Unlock()
		}
	}
	seePV := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID != "" {
			tr.mu.Lock()
			if tr.pvClaims[pv.Name] == nil {
				tr.pvClaims[pv.Name] = map[types.UID]bool{}
			}
			tr.pvClaims[pv.Name][pv.Spec.ClaimRef.UID] = true
			tr.mu.Unlock()
		}
	}
	if _, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seeClaim,
		UpdateFunc: func(_, obj any) { seeClaim(obj) }}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := pvs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seePV,
		UpdateFunc: func(_, obj any) { seePV(obj) }}); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	e.t.Cleanup(func() { cancel(); f.Shutdown() })
	f.WaitForCacheSync(e.t.Context().Done())
	return tr
}

// progress is the claims' state as the tracker's caches see it.
// records counts the claims with the record's finalizer, annotated those
// with any of its annotations.
type progress struct{ claims, bound, records, annotated, pvs int }

func (p progress) String() string {
	return fmt.Sprintf("%d claims, %d Bound, %d carrying an in-flight record (%d its annotations), %d PVs",
		p.claims, p.bound, p.records, p.annotated, p.pvs)
}

func (tr *tracker) progress() progress {
	var p progress
	claims, _ := tr.claims.PersistentVolumeClaims(namespace).List(everything)
	for _, c := range claims {
		p.claims++
		if c.Status.Phase == corev1.ClaimBound {
			p.bound++
		}
		if slices.Contains(c.Finalizers, inflight.Finalizer) {
			p.records++
		}
		if len(recordOf(c.Annotations)) > 0 {
			p.annotated++
		}
	}
	pvs, _ := tr.pvs.List(everything)
	p.pvs = len(pvs)
	return p
}

// recordKeys says, when claims carry any of the record's annotations,
// how many carry each, and each with or without the finalizer.
func (tr *tracker) recordKeys() string {
	counts := map[string]int{}
	claims, _ := tr.claims.PersistentVolumeClaims(namespace).List(everything)
	for _, c := range claims {
		fin := "without the finalizer"
		if slices.Contains(c.Finalizers, inflight.Finalizer) {
			fin = "with the finalizer"
		}
		for k, v := range recordOf(c.Annotations) {
			counts[fmt.Sprintf("%s=%q %s", k, v, fin)]++
		}
	}
	if len(counts) == 0 {
		return ""
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(parts)
	return "; the record's annotations left: " + strings.Join(parts, ", ")
}

// step is a change of versions made once a fraction of the claims is Bound
// (or, while they are deleted, once that fraction of their PVs is gone).
type step struct {
	at   float64
	what string
	do   func()
}

// phaseTimeout bounds each wait of a case: N claims take N/workers rounds
// of the driver's latency, plus the lease hand-overs.
func (e *env) phaseTimeout(n int) time.Duration {
	return 3*time.Minute + time.Duration(4*(n/workers+1))*e.latency
}

// result is one case's figures.
type result struct {
	claims, made, deleted, leaked, stuck int
	// deletedEarly: volumes the driver deleted before the first claim was
	// (and snapshots before the first VolumeSnapshot was).
	deletedEarly int
	// records, annotated: claims still carrying the in-flight record's
	// finalizer, or any of its annotations, once all were Bound (the
	// binder drops it as it binds; the provisioner after BinderGrace).
	records, annotated int
	// snaps: the VolumeSnapshots, and the snapshots the driver made,
	// deleted and left (snapsStuck: VolumeSnapshots and contents left).
	snaps, snapsMade, snapsDeleted, snapsLeaked, snapsStuck int
	// perDriver: with several drivers, each one's volumes deleted and made.
	perDriver string
	took      time.Duration
}

// workload is what a case makes and deletes: n claims, claim(i) the i-th,
// and the VolumeSnapshots of snaps (nil: none), made with the claims.
type workload struct {
	n     int
	claim func(i int) *corev1.PersistentVolumeClaim
	snaps *snapshots
}

// plain is n claims of the class, each of its own.
func plain(n int) workload { return workload{n: n, claim: claim} }

// exercise creates the workload's claims (and snapshots), runs the steps
// as they bind, checks the bound state, deletes them, runs the deletion
// steps as their PVs go, and checks that nothing is left. It returns the
// figures; every broken invariant is a test error.
func (e *env) exercise(tr *tracker, w workload, onBound, onGone []step) result {
	t := e.t
	t.Helper()
	n := w.n
	start := time.Now()
	r := result{claims: n}
	e.createClaims(w)
	if w.snaps != nil {
		r.snaps = len(w.snaps.of)
		w.snaps.create()
	}
	for _, s := range onBound {
		want := int(s.at * float64(n))
		e.poll(fmt.Sprintf("%d of %d claims Bound before %s", want, n, s.what), e.phaseTimeout(n), func(context.Context) (bool, error) {
			return tr.progress().bound >= want, nil
		})
		t.Logf("%s: %s at %s", time.Now().Format("15:04:05.000"), s.what, tr.progress())
		s.do()
	}
	e.poll(fmt.Sprintf("all %d claims Bound", n), e.phaseTimeout(n), func(context.Context) (bool, error) {
		return tr.progress().bound == n, nil
	})
	p := tr.progress()
	r.records, r.annotated = p.records, p.annotated
	t.Logf("all Bound after %s: %s%s", time.Since(start).Round(100*time.Millisecond), p, tr.recordKeys())
	if w.snaps != nil {
		w.snaps.waitReady(e.phaseTimeout(n))
	}
	e.checkBound(tr, w)
	for _, k := range e.kinds(w) {
		for _, d := range e.backends() {
			if _, early := d.logged(t, k); len(early) > 0 {
				r.deletedEarly += len(early)
				t.Errorf("the driver of %s deleted %d %s while every claim and snapshot lived (its logs %v): %v", d.name(), len(early), k.folder, d.logs(), firstOf(early))
			}
		}
	}

	e.deleteAll(w)
	for _, s := range onGone {
		want := int(s.at * float64(n))
		e.poll(fmt.Sprintf("%d of %d PVs gone before %s", want, n, s.what), e.phaseTimeout(n), func(context.Context) (bool, error) {
			return n-tr.progress().pvs >= want, nil
		})
		t.Logf("%s: %s at %s", time.Now().Format("15:04:05.000"), s.what, tr.progress())
		s.do()
	}
	_ = pollFor(t.Context(), e.phaseTimeout(n), func() bool {
		p := tr.progress()
		return p.claims == 0 && p.pvs == 0 && (w.snaps == nil || len(w.snaps.left()) == 0) &&
			len(e.folders(volumeKind)) == 0 && len(e.folders(snapshotKind)) == 0
	})
	r.stuck = e.stuck(tr)
	if w.snaps != nil {
		r.snapsStuck = w.snaps.stuck()
	}
	var nodes []string
	for _, d := range e.backends() {
		made, deleted := e.checkGone(d, volumeKind)
		r.made, r.deleted = r.made+made, r.deleted+deleted
		nodes = append(nodes, fmt.Sprintf("%s %d/%d", d.name(), deleted, made))
		if w.snaps != nil {
			made, deleted := e.checkGone(d, snapshotKind)
			r.snapsMade, r.snapsDeleted = r.snapsMade+made, r.snapsDeleted+deleted
		}
	}
	if len(e.backends()) > 1 {
		r.perDriver = strings.Join(nodes, ", ")
	}
	r.leaked = len(e.folders(volumeKind))
	r.snapsLeaked = len(e.folders(snapshotKind))
	if r.made != n {
		t.Errorf("the drivers made %d volumes for %d claims", r.made, n)
	}
	if r.snapsMade != r.snaps {
		t.Errorf("the drivers made %d snapshots for %d VolumeSnapshots", r.snapsMade, r.snaps)
	}
	r.took = time.Since(start)
	return r
}

// kinds are what the drivers make for w: volumes, and snapshots if w has
// them.
func (e *env) kinds(w workload) []kind {
	if w.snaps != nil {
		return []kind{volumeKind, snapshotKind}
	}
	return []kind{volumeKind}
}

// checkGone checks, once all is deleted, that d deleted each k it made and
// holds none: each a test error. It returns how many it made and deleted.
func (e *env) checkGone(d backend, k kind) (made, deleted int) {
	t := e.t
	t.Helper()
	m, del := d.logged(t, k)
	for id := range m {
		if !del[id] {
			t.Errorf("the driver of %s made %s %s and never deleted it (its logs %v)", d.name(), k.folder, id, d.logs())
		}
	}
	if left := d.held(t, k); len(left) > 0 {
		t.Errorf("%d %s left in the driver of %s (%s): %v", len(left), k.folder, d.name(), d.where(k), firstOf(left))
	}
	return len(m), len(del)
}

// pollFor polls cond until it holds or timeout passes; false at timeout.
func pollFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

func (e *env) createClaims(w workload) {
	e.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, w.n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				_, err := e.c.Client.CoreV1().PersistentVolumeClaims(namespace).Create(e.t.Context(), w.claim(i), metav1.CreateOptions{})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range w.n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatalf("create claim: %v", err)
	}
}

func claim(i int) *corev1.PersistentVolumeClaim {
	sc := class
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%04d", i), Namespace: namespace},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}}}
}

// deleteAll deletes the claims made from another (clones, restores)
// first, then the snapshots, then the rest, their sources among them,
// without waiting between them.
func (e *env) deleteAll(w workload) {
	e.t.Helper()
	var restores, rest []string
	for i := range w.n {
		if c := w.claim(i); c.Spec.DataSource != nil {
			restores = append(restores, c.Name)
		} else {
			rest = append(rest, c.Name)
		}
	}
	e.deleteClaims(restores)
	if w.snaps != nil {
		w.snaps.delete()
	}
	e.deleteClaims(rest)
}

func (e *env) deleteClaims(names []string) {
	e.t.Helper()
	for _, name := range names {
		if err := e.c.Client.CoreV1().PersistentVolumeClaims(namespace).Delete(e.t.Context(), name, metav1.DeleteOptions{}); err != nil {
			e.t.Fatalf("delete claim: %v", err)
		}
	}
}

// checkBound checks the state with every claim Bound, from the API: each
// claim's PV names it (by UID) and no other claim, its volume is in the
// folder of the driver of the claim's selected node (if it has one) and of
// the PV's node affinity; and, from the watches, no claim was ever bound to a
// second PV and no PV ever named a second claim.
func (e *env) checkBound(tr *tracker, w workload) {
	t := e.t
	t.Helper()
	ctx := t.Context()
	claims, err := e.c.Client.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvs, err := e.c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.PersistentVolume{}
	for _, pv := range pvs.Items {
		byName[pv.Name] = pv
	}
	folders := e.folders(volumeKind)
	owner := map[string]string{}
	for _, c := range claims.Items {
		pv, ok := byName[c.Spec.VolumeName]
		var at string // the node whose driver's folder holds the volume
		if ok && pv.Spec.CSI != nil {
			at = folders[pv.Spec.CSI.VolumeHandle]
		}
		switch {
		case c.Status.Phase != corev1.ClaimBound || !ok:
			t.Errorf("claim %s: %s, volume %q (found: %v)", c.Name, c.Status.Phase, c.Spec.VolumeName, ok)
		case owner[pv.Name] != "":
			t.Errorf("PV %s is the volume of claims %s and %s", pv.Name, owner[pv.Name], c.Name)
		case pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != c.UID:
			t.Errorf("claim %s is bound to PV %s, whose claimRef is %v", c.Name, pv.Name, pv.Spec.ClaimRef)
		case at == "":
			t.Errorf("PV %s of claim %s: its volume is not in a driver's folder", pv.Name, c.Name)
		case c.Annotations[annSelectedNode] != "" && c.Annotations[annSelectedNode] != at:
			t.Errorf("claim %s, selected node %s: its volume %s is in the folder of the driver of %s", c.Name, c.Annotations[annSelectedNode], pv.Name, at)
		case cluster.PVNode(&pv) != "" && cluster.PVNode(&pv) != at:
			t.Errorf("PV %s of claim %s: affinity to %s, its volume in the folder of the driver of %s", pv.Name, c.Name, cluster.PVNode(&pv), at)
		}
		owner[pv.Name] = c.Name
	}
	if n := w.n; len(claims.Items) != n || len(pvs.Items) != n {
		t.Errorf("%d claims and %d PVs, want %d of each", len(claims.Items), len(pvs.Items), n)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for name, vols := range tr.claimVolumes {
		if len(vols) > 1 {
			t.Errorf("claim %s was seen bound to %d volumes: %v", name, len(vols), vols)
		}
	}
	for name, uids := range tr.pvClaims {
		if len(uids) > 1 {
			t.Errorf("PV %s was seen naming %d claims: %v", name, len(uids), uids)
		}
	}
}

// stuck counts the claims and PVs left, each a test error with its
// finalizers and phase.
func (e *env) stuck(tr *tracker) int {
	e.t.Helper()
	ctx := e.t.Context()
	var left []string
	claims, err := e.c.Client.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range claims.Items {
		left = append(left, fmt.Sprintf("claim %s (%s, finalizers %v, annotations %v)", c.Name, c.Status.Phase, c.Finalizers, recordOf(c.Annotations)))
	}
	pvs, err := e.c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		left = append(left, fmt.Sprintf("PV %s (%s, finalizers %v)", pv.Name, pv.Status.Phase, pv.Finalizers))
	}
	if len(left) > 0 {
		e.t.Errorf("%d claims and PVs left stuck after %s: %v", len(left), e.phaseTimeout(len(tr.claimVolumes)), firstOf(left))
	}
	return len(left)
}

func recordOf(ann map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range ann {
		if strings.HasPrefix(k, "provisioner.tether.dev/") {
			out[k] = v
		}
	}
	return out
}

// annSelectedNode is the node the scheduler chose for a claim of a
// WaitForFirstConsumer class, which the provisioner of that node serves.
const annSelectedNode = "volume.kubernetes.io/selected-node"

// kind is what a driver keeps in a folder of its root, and how its log
// says it made or deleted one (a delete of one it does not hold says it
// too).
type kind struct {
	folder, made, deleted string
	id                    *regexp.Regexp
}

var (
	volumeKind   = kind{"volumes", `"Created volume"`, `"Deleted volume"`, regexp.MustCompile(`volumeID="([^"]+)"`)}
	snapshotKind = kind{"snapshots", `"Created snapshot"`, `"Deleted snapshot"`, regexp.MustCompile(`snapshotID="([^"]+)"`)}
)

// backend is a driver as the checks read it: its name (its node's, or
// the mock's), the IDs of the volumes or snapshots (k) its logs say it made
// and deleted, those it holds now, and where it holds them.
type backend interface {
	name() string
	logs() []string
	logged(t cluster.T, k kind) (made, deleted map[string]bool)
	held(t cluster.T, k kind) []string
	where(k kind) string
}

func (e *env) backends() []backend {
	var bs []backend
	for _, d := range e.drivers {
		bs = append(bs, d)
	}
	if e.mock != nil {
		bs = append(bs, e.mock)
	}
	return bs
}

func (d *nodeDriver) name() string { return d.node }

func (d *nodeDriver) where(k kind) string { return filepath.Join(d.root, k.folder) }

// logged reads the logs of every start of d's driver: the IDs of the k it
// made and of those it deleted.
func (d *nodeDriver) logged(t cluster.T, k kind) (made, deleted map[string]bool) {
	t.Helper()
	made, deleted = map[string]bool{}, map[string]bool{}
	for _, path := range d.logs() {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			m := k.id.FindStringSubmatch(line)
			switch {
			case m == nil:
			case strings.Contains(line, k.made):
				made[m[1]] = true
			case strings.Contains(line, k.deleted):
				deleted[m[1]] = true
			}
		}
	}
	return made, deleted
}

// held lists the k in d's driver's folder.
func (d *nodeDriver) held(t cluster.T, k kind) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(d.root, k.folder))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var ids []string
	for _, de := range entries {
		if de.IsDir() {
			ids = append(ids, de.Name())
		}
	}
	return ids
}

// folders maps each k each driver holds (in the folder of each node's
// driver, and the mock's) to the driver's name.
func (e *env) folders(k kind) map[string]string {
	e.t.Helper()
	at := map[string]string{}
	for _, d := range e.backends() {
		for _, id := range d.held(e.t, k) {
			at[id] = d.name()
		}
	}
	return at
}

// firstOf names at most 5 of a list or set, for error messages.
func firstOf[S []string | map[string]bool](s S) string {
	var names []string
	switch v := any(s).(type) {
	case []string:
		names = v
	case map[string]bool:
		for k := range v {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

var everything = labels.Everything()
