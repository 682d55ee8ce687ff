package binder

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/inflight"
)

// conflictRetries is how often one sync decides again from fresh state
// after a write conflict, before it gives the key back to the queue.
const conflictRetries = 3

func (c *Controller) syncClaim(ctx context.Context, key string) error {
	namespace, name, _ := strings.Cut(key, "/")
	claim, ok := c.claims.Get(namespace, name)
	if !ok {
		return nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("pvc", klog.KObj(claim)))
	for attempt := 1; ; attempt++ {
		err := c.syncClaimOnce(ctx, claim)
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			return err
		}
		// Someone changed the claim or a volume: read them afresh.
		if pvName := conflictedVolume(err); pvName != "" {
			if err := c.refreshVolume(ctx, pvName); err != nil {
				return err
			}
		}
		fresh, err := c.opts.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		claim = c.claims.Returned(fresh)
		if err := c.refreshVolume(ctx, claim.Spec.VolumeName); err != nil {
			return err
		}
	}
}

func (c *Controller) syncClaimOnce(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	start := time.Now()
	needs, needsErr := ParseClaim(claim)
	in := ClaimInput{Claim: claim, Needs: needs, NeedsErr: needsErr, DefaultClass: c.defaultClass(),
		Waited: time.Since(claim.CreationTimestamp.Time)}
	if needs.Class != "" {
		in.Class, _ = c.classLister.Get(needs.Class)
	}
	if claim.Spec.VolumeName != "" {
		in.Volume, _ = c.volumes.Get(claim.Spec.VolumeName)
	}
	if !BindCompleted(claim) && claim.Spec.VolumeName == "" && needsErr == nil {
		q := MatchQuery{Needs: needs, DelayBinding: DelayBinding(in.Class)}
		if q.DelayBinding {
			q.NodeLabels = c.selectedNodeLabels(claim)
		}
		if in.Match = c.volumes.Reserve(q); in.Match != nil {
			defer c.volumes.Release(in.Match.Name, needs.UID)
		}
		if inflight.ClaimBehindVolume(claim, in.Match) {
			klog.FromContext(ctx).V(4).Info("Claim cache older than its volume's claimRef; waiting for its update", "pv", klog.KObj(in.Match))
			return nil
		}
	}
	d := DecideClaim(in)
	key := claimKey(claim.Namespace, claim.Name)
	if d.Op == ClaimPending || d.Op == ClaimProvision {
		c.markPending(key, needs.Class)
	} else {
		c.pending.remove(key)
	}
	err := c.writer.ApplyClaim(ctx, claim, d)
	c.metrics.observe("claim-"+d.Op.String(), start, err)
	return err
}

// markPending records a waiting claim. The claim may have been deleted
// since this sync read it, and the delete handler may already have
// removed its key: then the key would stay for ever. The handler deletes
// from the cache before it removes the key, so checking the cache after
// adding leaves no window.
func (c *Controller) markPending(key, class string) {
	c.pending.add(key, class)
	namespace, name, _ := strings.Cut(key, "/")
	if _, ok := c.claims.Get(namespace, name); !ok {
		c.pending.remove(key)
	}
}

// selectedNodeLabels returns the labels of the node the scheduler chose for
// the claim, nil when it chose none, and empty labels for a node that does
// not exist (so only volumes without node affinity fit).
func (c *Controller) selectedNodeLabels(claim *v1.PersistentVolumeClaim) map[string]string {
	nodeName, ok := claim.Annotations[storagehelpers.AnnSelectedNode]
	if !ok {
		return nil
	}
	node, err := c.nodeLister.Get(nodeName)
	if err != nil || node.Labels == nil {
		return map[string]string{}
	}
	return node.Labels
}

// defaultClass picks the default StorageClass (DefaultClass).
func (c *Controller) defaultClass() string {
	classes, err := c.classLister.List(labels.Everything())
	if err != nil {
		return ""
	}
	return DefaultClass(classes)
}

// DefaultClass picks the default StorageClass as kube-controller-manager
// does: of several, the newest, then the first by name; "" for none.
func DefaultClass(classes []*storagev1.StorageClass) string {
	var best *storagev1.StorageClass
	for _, sc := range classes {
		if sc.Annotations[isDefaultClassAnnotation] != "true" &&
			sc.Annotations[betaIsDefaultClassAnnotation] != "true" {
			continue
		}
		if best == nil || sc.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&best.CreationTimestamp) && sc.Name < best.Name) {
			best = sc
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, ok := c.volumes.Get(name)
	if !ok {
		return nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("pv", klog.KObj(pv)))
	for attempt := 1; ; attempt++ {
		err := c.syncVolumeOnce(ctx, pv)
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			return err
		}
		if err := c.refreshVolume(ctx, name); err != nil {
			return err
		}
		if pv, ok = c.volumes.Get(name); !ok {
			return nil
		}
	}
}

func (c *Controller) syncVolumeOnce(ctx context.Context, pv *v1.PersistentVolume) error {
	start := time.Now()
	claim, err := c.claimOf(ctx, pv)
	if err != nil {
		return err
	}
	d := DecideVolume(VolumeInput{Volume: pv, Claim: claim})
	if d.SyncClaim {
		c.claimQueue.Add(claimKey(pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name))
	}
	err = c.writer.ApplyVolume(ctx, pv, claim, d)
	if err == nil {
		err = c.syncNodeLoss(ctx, pv.Name, claim)
	}
	op := "volume"
	if d.Phase != "" {
		op = "volume-" + strings.ToLower(string(d.Phase))
	}
	c.metrics.observe(op, start, err)
	return err
}

// claimOf returns the claim that a volume's claimRef names, or nil when it
// is gone or is another claim with the same name. Before a volume is
// released on the cache's word, the API server is asked: a cache that lags
// must never release a bound volume.
func (c *Controller) claimOf(ctx context.Context, pv *v1.PersistentVolume) (*v1.PersistentVolumeClaim, error) {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil, nil
	}
	if ref.Name == "" {
		// No claim has an empty name (and the API server, asked for one,
		// answers with an error, not NotFound: the volume would never be
		// released).
		return nil, nil
	}
	claim, ok := c.claims.Get(ref.Namespace, ref.Name)
	if ok && claim.UID == ref.UID {
		return claim, nil
	}
	if !ok && slices.Contains([]v1.PersistentVolumePhase{v1.VolumeReleased, v1.VolumeFailed}, pv.Status.Phase) {
		return nil, nil // already released; nothing more to learn
	}
	if c.gone.has(pv.Name, ref.UID) {
		// The API server said so before, and a UID never comes back: a
		// claim that reuses the name (in the cache or not) changes nothing.
		return nil, nil
	}
	fresh, err := c.opts.Client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.gone.set(pv.Name, ref.UID)
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	fresh = c.claims.Returned(fresh)
	if fresh.UID != ref.UID {
		c.gone.set(pv.Name, ref.UID)
		return nil, nil
	}
	return fresh, nil
}

// goneClaims remembers, per volume, the claim UID in its claimRef that the
// API server said no longer exists, so that claimOf asks only once. One
// entry per volume at most; the volume's deletion drops it.
type goneClaims struct {
	mu    sync.Mutex
	byVol map[string]types.UID
}

func (g *goneClaims) has(volume string, uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	got, ok := g.byVol[volume]
	return ok && got == uid
}

func (g *goneClaims) set(volume string, uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byVol == nil {
		g.byVol = map[string]types.UID{}
	}
	g.byVol[volume] = uid
}

func (g *goneClaims) forget(volume string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.byVol, volume)
}

// conflictedVolume names the PV that a conflict error is about, if any.
func conflictedVolume(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return ""
	}
	if d := status.Status().Details; d != nil && d.Kind == "persistentvolumes" {
		return d.Name
	}
	return ""
}

// refreshVolume reads a volume from the API into the index after a conflict.
func (c *Controller) refreshVolume(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	pv, err := c.opts.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if old, ok := c.volumes.Get(name); ok {
			c.volumes.Delete(old)
		}
		return nil
	} else if err != nil {
		return err
	}
	c.volumes.Returned(pv)
	return nil
}

// The annotations that make a StorageClass the default.
const (
	isDefaultClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaIsDefaultClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)
