package benchnodes

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"

	"github.com/tether-csi/tether/test/bench"
)

// stream is a steady flow of new claims while provisioners roll: rate a
// second, round robin over the nodes, each made as a StatefulSet's claim
// is once the scheduler picked its node (newClaims' shape). The bench does
// the binder's part: it binds a claim when its PV appears, deletes it life
// after, and marks its PV Released. Probes are claims made on one node at
// a moment the roll chooses (while a node's provisioner is down, and
// once it synced).
type stream struct {
	e     *env
	label string
	nodes []string
	rate  float64
	life  time.Duration

	ctx        context.Context
	cancel     context.CancelFunc
	stopMaking context.CancelFunc // ends create alone
	makingDone chan struct{}
	wg         sync.WaitGroup

	mu     sync.Mutex
	seq    int
	claims map[string]*streamClaim
	errs   []string
}

// streamClaim is one claim's times.
type streamClaim struct {
	node                             string
	probe                            bool
	created, pvSeen, deleted, pvGone time.Time
	pv                               string
}

// startStream starts the flow on the nodes: a PV watch, the creator, and
// the bench's binding and deleting.
func startStream(t *testing.T, e *env, label string, nodes []string, rate float64, life time.Duration) *stream {
	ctx, cancel := context.WithCancel(t.Context())
	st := &stream{e: e, label: label, nodes: nodes, rate: rate, life: life, ctx: ctx, cancel: cancel,
		claims: map[string]*streamClaim{}}
	list, err := e.admin.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return e.admin.CoreV1().PersistentVolumes().Watch(ctx, o)
		}})
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	st.wg.Go(func() { st.watch(w) })
	making, stopMaking := context.WithCancel(ctx)
	st.stopMaking, st.makingDone = stopMaking, make(chan struct{})
	go func() { defer close(st.makingDone); st.create(making) }()
	return st
}

// watch notes each stream claim's PV as it appears and goes, and binds it.
func (st *stream) watch(w *watchtools.RetryWatcher) {
	defer w.Stop()
	for {
		var ev watch.Event
		select {
		case <-st.ctx.Done():
			return
		case e, ok := <-w.ResultChan():
			if !ok {
				return
			}
			ev = e
		}
		pv, ok := ev.Object.(*corev1.PersistentVolume)
		if !ok || pv.Spec.ClaimRef == nil {
			continue
		}
		now := time.Now()
		st.mu.Lock()
		c, ok := st.claims[pv.Spec.ClaimRef.Name]
		bind := false
		if ok {
			switch ev.Type {
			case watch.Added, watch.Modified:
				if c.pvSeen.IsZero() {
					c.pvSeen, c.pv, bind = now, pv.Name, true
				}
			case watch.Deleted:
				if c.pvGone.IsZero() {
					c.pvGone = now
				}
			}
		}
		st.mu.Unlock()
		if bind {
			name := pv.Spec.ClaimRef.Name
			st.wg.Go(func() { st.bindThenDelete(name, pv.Name) })
		}
	}
}

// create makes a claim every 1/rate, on the nodes in turn, until ctx
// ends.
func (st *stream) create(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / st.rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		node := st.nodes[i%len(st.nodes)]
		st.wg.Go(func() { st.makeClaim(node, false) })
	}
}

// Probe makes a claim on node now and returns its name.
func (st *stream) Probe(node string) string { return st.makeClaim(node, true) }

func (st *stream) makeClaim(node string, probe bool) string {
	st.mu.Lock()
	st.seq++
	name := fmt.Sprintf("roll-%s-%06d", st.label, st.seq)
	c := &streamClaim{node: node, probe: probe, created: time.Now()}
	st.claims[name] = c
	st.mu.Unlock()
	claim := wffcClaim(name, node, map[string]string{"app.kubernetes.io/name": "roll"})
	if _, err := st.e.admin.CoreV1().PersistentVolumeClaims(namespace).Create(st.ctx, claim, metav1.CreateOptions{}); err != nil {
		st.fail("creating %s: %v", name, err)
	}
	return name
}

// bindThenDelete binds the claim to its PV as the binder would, deletes
// the claim life later, and marks the PV Released.
func (st *stream) bindThenDelete(name, pvName string) {
	ctx, cs := st.ctx, st.e.admin
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c, err := cs.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return bench.BindWrites(ctx, cs, pv, c)
	})
	if err != nil {
		st.fail("binding %s: %v", name, err)
		return
	}
	select {
	case <-time.After(st.life):
	case <-ctx.Done():
		return
	}
	st.deleteClaim(ctx, name, pvName)
}

func (st *stream) deleteClaim(ctx context.Context, name, pvName string) {
	cs := st.e.admin
	st.mu.Lock()
	st.claims[name].deleted = time.Now()
	st.mu.Unlock()
	if err := cs.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		st.fail("deleting %s: %v", name, err)
		return
	}
	if pvName == "" {
		return
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		pv.Status.Phase = corev1.VolumeReleased
		_, err = cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		st.fail("releasing %s: %v", pvName, err)
	}
}

func (st *stream) fail(format string, args ...any) {
	if st.ctx.Err() != nil {
		return // the stream was stopped
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.errs = append(st.errs, fmt.Sprintf(format, args...))
}

// settled reports whether every claim made has had its PV and seen it go.
func (st *stream) settled() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, c := range st.claims {
		if c.pvGone.IsZero() {
			return false
		}
	}
	return true
}

// seen is when the claim's PV appeared, zero before.
func (st *stream) seen(name string) time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	if c, ok := st.claims[name]; ok {
		return c.pvSeen
	}
	return time.Time{}
}

// Stop ends the flow: no claim is made after it; those made go through
// their life (PV, bound, deleted, PV gone) until drain passes, so that the
// last window's claims are measured whole. Then what is left is deleted,
// uncounted, and it returns the claims' times and the errors met.
func (st *stream) Stop(drain time.Duration) (map[string]streamClaim, []string) {
	st.stopMaking()
	<-st.makingDone
	deadline := time.Now().Add(drain)
	for time.Now().Before(deadline) && st.ctx.Err() == nil && !st.settled() {
		select {
		case <-time.After(100 * time.Millisecond):
		case <-st.ctx.Done():
		}
	}
	st.cancel()
	st.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st.mu.Lock()
	left := map[string]string{}
	for name, c := range st.claims {
		if c.deleted.IsZero() {
			left[name] = c.pv
		}
	}
	st.mu.Unlock()
	for name, pv := range left {
		st.deleteClaim(ctx, name, pv)
		st.mu.Lock()
		st.claims[name].deleted = time.Time{} // not the stream's deletion: not counted
		st.mu.Unlock()
	}
	out := map[string]streamClaim{}
	st.mu.Lock()
	defer st.mu.Unlock()
	for name, c := range st.claims {
		out[name] = *c
	}
	return out, st.errs
}
