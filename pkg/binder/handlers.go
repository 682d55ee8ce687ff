package binder

import (
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// wakeOnFreeVolume is how many waiting claims of a class a newly free
// volume wakes. The rest wait for the next free volume or the resync;
// waking all of them would make N volumes and N claims cost N*N.
const wakeOnFreeVolume = 8

func claimKey(namespace, name string) string { return namespace + "/" + name }

func tombstoned(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (c *Controller) claimHandler() cache.ResourceEventHandler {
	upsert := func(obj any, queue bool) {
		if claim, ok := obj.(*v1.PersistentVolumeClaim); ok {
			c.claims.Upsert(claim)
			if queue {
				c.claimQueue.Add(claimKey(claim.Namespace, claim.Name))
			}
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		// The first list is stored, not queued: queueFirstLists queues
		// what of it needs a sync once it is all stored.
		AddFunc: func(obj any, initial bool) { upsert(obj, !initial) },
		UpdateFunc: func(old, obj any) {
			if claim, ok := obj.(*v1.PersistentVolumeClaim); ok && resync(old, obj) && c.settledClaim(claim) {
				return
			}
			upsert(obj, true)
		},
		DeleteFunc: func(obj any) {
			claim, ok := tombstoned(obj).(*v1.PersistentVolumeClaim)
			if !ok {
				return
			}
			c.claims.Delete(claim)
			c.pending.remove(claimKey(claim.Namespace, claim.Name))
			if name := claim.Spec.VolumeName; name != "" {
				// Its volume is now Released. The API server said this
				// claim is gone, and a UID never comes back: the volume's
				// sync need not ask again (claimOf).
				if pv, ok := c.volumes.Get(name); ok && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == claim.UID {
					c.gone.set(name, claim.UID)
				}
				c.volumeQueue.Add(name)
			}
		},
	}
}

func (c *Controller) volumeHandler() cache.ResourceEventHandler {
	upsert := func(obj any, queue bool) {
		pv, ok := obj.(*v1.PersistentVolume)
		if !ok {
			return
		}
		if c.beforeVolumeEvent != nil {
			c.beforeVolumeEvent()
		}
		pv = c.volumes.Upsert(pv)
		if !queue {
			return
		}
		c.volumeQueue.Add(pv.Name)
		if ref := pv.Spec.ClaimRef; ref != nil {
			// A volume pre-bound or provisioned for a claim: bind it now.
			c.claimQueue.Add(claimKey(ref.Namespace, ref.Name))
		} else if available(pv) {
			for _, key := range c.pending.some(storagehelpers.GetPersistentVolumeClass(pv), wakeOnFreeVolume) {
				c.claimQueue.Add(key)
			}
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) { upsert(obj, !initial) },
		UpdateFunc: func(old, obj any) {
			// A settled volume's resync is skipped, unless its node loss is
			// under way: a class that opted in since, or a grace that ended
			// while the binder restarted, is acted on within a resync.
			if pv, ok := obj.(*v1.PersistentVolume); ok && resync(old, obj) && c.settledVolume(pv) && !c.nodeLossUnderWay(pv) {
				return
			}
			upsert(obj, true)
		},
		DeleteFunc: func(obj any) {
			pv, ok := tombstoned(obj).(*v1.PersistentVolume)
			if !ok {
				return
			}
			c.volumes.Delete(pv)
			c.gone.forget(pv.Name)
			if ref := pv.Spec.ClaimRef; ref != nil {
				// A bound claim whose volume is gone is Lost.
				c.claimQueue.Add(claimKey(ref.Namespace, ref.Name))
			}
		},
	}
}

func (c *Controller) classHandler() cache.ResourceEventHandler {
	// A new or changed class (a new default, a new provisioner) can change
	// the fate of every waiting claim; one that opts in to node loss, or
	// out, that of its volumes whose node is lost.
	wake := func(old, obj any) {
		class, ok := tombstoned(obj).(*storagev1.StorageClass)
		if !ok {
			return
		}
		for _, key := range c.pending.all() {
			c.claimQueue.Add(key)
		}
		if was, ok := old.(*storagev1.StorageClass); !ok || nodeloss.Policy(was) != nodeloss.Policy(class) {
			c.queueNodeLossOfClass(class.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { wake(nil, obj) },
		UpdateFunc: wake,
		DeleteFunc: func(obj any) { wake(nil, obj) },
	}
}

// pendingClaims are the unbound claims with no volume yet, by class, so
// that a volume becoming free can wake a few of them at once instead of
// their waiting for the resync.
type pendingClaims struct {
	mu      sync.Mutex
	byClass map[string]map[string]struct{}
	classOf map[string]string
}

func newPendingClaims() *pendingClaims {
	return &pendingClaims{byClass: map[string]map[string]struct{}{}, classOf: map[string]string{}}
}

func (p *pendingClaims) add(key, class string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.classOf[key]; ok {
		if old == class {
			return
		}
		delete(p.byClass[old], key)
	}
	if p.byClass[class] == nil {
		p.byClass[class] = map[string]struct{}{}
	}
	p.byClass[class][key] = struct{}{}
	p.classOf[key] = class
}

func (p *pendingClaims) remove(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if class, ok := p.classOf[key]; ok {
		delete(p.byClass[class], key)
		if len(p.byClass[class]) == 0 {
			delete(p.byClass, class)
		}
		delete(p.classOf, key)
	}
}

// some returns up to n waiting claims of a class.
func (p *pendingClaims) some(class string, n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, n)
	for key := range p.byClass[class] {
		if len(out) == n {
			break
		}
		out = append(out, key)
	}
	return out
}

func (p *pendingClaims) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.classOf))
	for key := range maps.Keys(p.classOf) {
		out = append(out, key)
	}
	return out
}
