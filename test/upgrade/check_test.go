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
	// deletedEarly: volumes the driver deleted before the first claim was.
	deletedEarly int
	// records, annotated: claims still carrying the in-flight record's
	// finalizer, or any of its annotations, once all were Bound (the
	// binder drops it as it binds; the provisioner after BinderGrace).
	records, annotated int
	took               time.Duration
}

// exercise creates n claims, runs the steps as they bind, checks the bound
// state, deletes the claims, runs the deletion steps as their PVs go, and
// checks that nothing is left. It returns the figures; every broken
// invariant is a test error.
func (e *env) exercise(tr *tracker, n int, onBound, onGone []step) result {
	t := e.t
	t.Helper()
	start := time.Now()
	r := result{claims: n}
	e.createClaims(n)
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
	e.checkBound(tr, n)
	_, early := e.driverVolumes()
	r.deletedEarly = len(early)
	if r.deletedEarly > 0 {
		t.Errorf("the driver deleted %d volumes while every claim lived (its log %s): %v", r.deletedEarly, e.driver.LogPath, firstOf(early))
	}

	e.deleteClaims(n)
	for _, s := range onGone {
		want := int(s.at * float64(n))
		e.poll(fmt.Sprintf("%d of %d PVs gone before %s", want, n, s.what), e.phaseTimeout(n), func(context.Context) (bool, error) {
			return n-tr.progress().pvs >= want, nil
		})
		t.Logf("%s: %s at %s", time.Now().Format("15:04:05.000"), s.what, tr.progress())
		s.do()
	}
	deadline := e.phaseTimeout(n)
	_ = pollFor(t.Context(), deadline, func() bool {
		p := tr.progress()
		return p.claims == 0 && p.pvs == 0 && len(e.volumeFolders()) == 0
	})
	r.stuck = e.stuck(tr)
	made, deleted := e.driverVolumes()
	r.made, r.deleted = len(made), len(deleted)
	left := e.volumeFolders()
	r.leaked = len(left)
	if r.leaked > 0 {
		t.Errorf("%d volumes left in the driver's folder %s: %v", r.leaked, filepath.Join(e.root, "volumes"), firstOf(left))
	}
	if r.made != n {
		t.Errorf("the driver made %d volumes for %d claims", r.made, n)
	}
	for id := range made {
		if !deleted[id] {
			t.Errorf("volume %s was made and never deleted", id)
		}
	}
	r.took = time.Since(start)
	return r
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

func (e *env) createClaims(n int) {
	e.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				_, err := e.c.Client.CoreV1().PersistentVolumeClaims(namespace).Create(e.t.Context(), claim(i), metav1.CreateOptions{})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
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

func (e *env) deleteClaims(n int) {
	e.t.Helper()
	for i := range n {
		if err := e.c.Client.CoreV1().PersistentVolumeClaims(namespace).Delete(e.t.Context(), claim(i).Name, metav1.DeleteOptions{}); err != nil {
			e.t.Fatalf("delete claim: %v", err)
		}
	}
}

// checkBound checks the state with every claim Bound, from the API: each
// claim's PV names it (by UID) and no other claim, its volume is in the
// driver's folder; and, from the watches, no claim was ever bound to a
// second PV and no PV ever named a second claim.
func (e *env) checkBound(tr *tracker, n int) {
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
	folders := map[string]bool{}
	for _, f := range e.volumeFolders() {
		folders[f] = true
	}
	owner := map[string]string{}
	for _, c := range claims.Items {
		pv, ok := byName[c.Spec.VolumeName]
		switch {
		case c.Status.Phase != corev1.ClaimBound || !ok:
			t.Errorf("claim %s: %s, volume %q (found: %v)", c.Name, c.Status.Phase, c.Spec.VolumeName, ok)
		case owner[pv.Name] != "":
			t.Errorf("PV %s is the volume of claims %s and %s", pv.Name, owner[pv.Name], c.Name)
		case pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != c.UID:
			t.Errorf("claim %s is bound to PV %s, whose claimRef is %v", c.Name, pv.Name, pv.Spec.ClaimRef)
		case pv.Spec.CSI == nil || !folders[pv.Spec.CSI.VolumeHandle]:
			t.Errorf("PV %s of claim %s: its volume is not in the driver's folder", pv.Name, c.Name)
		}
		owner[pv.Name] = c.Name
	}
	if len(claims.Items) != n || len(pvs.Items) != n {
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

var volumeIDField = regexp.MustCompile(`volumeID="([^"]+)"`)

// driverVolumes reads the driver's log: the IDs of the volumes it made and
// of those it deleted (its log says each; a DeleteVolume of a volume it
// does not hold says it too).
func (e *env) driverVolumes() (made, deleted map[string]bool) {
	e.t.Helper()
	data, err := os.ReadFile(e.driver.LogPath)
	if err != nil {
		e.t.Fatal(err)
	}
	made, deleted = map[string]bool{}, map[string]bool{}
	for line := range strings.Lines(string(data)) {
		m := volumeIDField.FindStringSubmatch(line)
		switch {
		case m == nil:
		case strings.Contains(line, `"Created volume"`):
			made[m[1]] = true
		case strings.Contains(line, `"Deleted volume"`):
			deleted[m[1]] = true
		}
	}
	return made, deleted
}

// volumeFolders lists the volumes in the driver's folder.
func (e *env) volumeFolders() []string {
	e.t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.root, "volumes"))
	if err != nil && !os.IsNotExist(err) {
		e.t.Fatal(err)
	}
	var ids []string
	for _, d := range entries {
		if d.IsDir() {
			ids = append(ids, d.Name())
		}
	}
	return ids
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
