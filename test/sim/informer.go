package sim

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/pkg/provisioner/scope"
)

// informer stands for a SharedIndexInformer: its store is an indexer that
// the simulator fills only when the scheduler delivers an object. As in
// client-go, the store is ahead of the handlers: each handler has a
// listener whose notifications the scheduler hands over one at a time, in
// order, later. A registration has synced once its listener has handed
// over every object of the first list. Methods tether does not use are
// left to the nil embedded interface (they would panic).
type informer struct {
	cache.SharedIndexInformer
	indexer   cache.Indexer
	listeners []*listener
	// wrapNext, when set, wraps the next handler registered (once).
	wrapNext func(cache.ResourceEventHandler) cache.ResourceEventHandler
}

// listener is one handler's notifications not yet handed over.
type listener struct {
	handler cache.ResourceEventHandler
	fifo    []notification
	// initial counts the first list's objects not yet handed over.
	initial int
	listed  bool
}

// notification is one call of a handler.
type notification struct {
	old, obj any // obj nil: a deletion of old
	initial  bool
}

func (l *listener) HasSynced() bool                     { return l.listed && l.initial == 0 }
func (l *listener) HasSyncedChecker() cache.DoneChecker { return nil }

// next hands over the oldest notification and says what it was.
func (l *listener) next() string {
	n := l.fifo[0]
	l.fifo = l.fifo[1:]
	if n.initial {
		l.initial--
	}
	switch {
	case n.obj == nil:
		l.handler.OnDelete(n.old)
		return "delete " + keyOf(n.old)
	case n.old == nil:
		l.handler.OnAdd(n.obj, n.initial)
		return "add " + keyOf(n.obj)
	default:
		l.handler.OnUpdate(n.old, n.obj)
		return "update " + keyOf(n.obj)
	}
}

func keyOf(obj any) string {
	k, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return k
}

func newInformer() *informer {
	return &informer{indexer: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
}

func (i *informer) GetStore() cache.Store                                           { return i.indexer }
func (i *informer) GetIndexer() cache.Indexer                                       { return i.indexer }
func (i *informer) HasSynced() bool                                                 { return true }
func (i *informer) AddIndexers(ix cache.Indexers) error                             { return i.indexer.AddIndexers(ix) }
func (i *informer) IsStopped() bool                                                 { return false }
func (i *informer) LastSyncResourceVersion() string                                 { return "" }
func (i *informer) SetTransform(cache.TransformFunc) error                          { return nil }
func (i *informer) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error { return nil }
func (i *informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	if i.wrapNext != nil {
		h, i.wrapNext = i.wrapNext(h), nil
	}
	l := &listener{handler: h}
	i.listeners = append(i.listeners, l)
	return l, nil
}
func (i *informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, _ time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}
func (i *informer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, _ cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}

// notify queues a notification for every handler.
func (i *informer) notify(n notification) {
	for _, l := range i.listeners {
		if n.initial {
			l.initial++
		}
		l.fifo = append(l.fifo, n)
	}
}

// caches are one process's informers, one per resource, with the keys
// whose latest version the process has not seen yet.
type caches struct {
	w       *World
	inf     map[string]*informer
	pending map[string]map[string]bool
	// release is the process's: what it reads of an object (releases.go).
	release release
	// keepers, per resource, say what of it the process keeps (a tether
	// provisioner's claims and PVs: package scope); known is the version
	// of each object the keeper was last told of.
	keepers map[string]*scope.Keeper
	known   map[string]map[string]runtime.Object
	// relabel, for a node-mode provisioner of the current release, is its
	// watch of its node's labels (scope_moves.go).
	relabel *relabel
	// behind are the resources (with a keeper) whose first listing runs
	// behind the watch, backfill the objects of each such listing under
	// way not yet taken, in order (behind.go).
	behind   map[string]bool
	backfill map[string][]runtime.Object
}

// keep makes the resource's cache keep what k keeps, as the provisioner's
// scoped informers do (before fill).
func (c *caches) keep(resource string, k *scope.Keeper) {
	if c.keepers == nil {
		c.keepers, c.known = map[string]*scope.Keeper{}, map[string]map[string]runtime.Object{}
	}
	c.keepers[resource], c.known[resource] = k, map[string]runtime.Object{}
}

func newCaches(w *World, resources ...string) *caches {
	c := &caches{w: w, inf: map[string]*informer{}, pending: map[string]map[string]bool{}}
	for _, r := range resources {
		c.inf[r] = newInformer()
		c.pending[r] = map[string]bool{}
	}
	return c
}

// fill delivers every object of the API at once, as an informer's list
// does on start: the stores have them all, and the handlers get them
// later, one notification at a time. A resource listed behind the watch
// (behind) starts its listing instead, its store empty: the handlers sync
// at once, and its objects come later (behind.go).
func (c *caches) fill() {
	for _, r := range sortedKeys(c.inf) {
		inf := c.inf[r]
		objs := c.list(r)
		if c.behind[r] {
			c.listBehind(r, objs)
		} else {
			kept := c.relist(r, objs)
			for i, obj := range objs {
				if !kept[i] {
					c.w.notePVSeen(c, obj) // dropped: its reclaimer never acts on it
					continue
				}
				_ = inf.indexer.Add(obj)
				inf.notify(notification{obj: obj, initial: true})
			}
		}
		for _, l := range inf.listeners {
			l.listed = true
		}
		clear(c.pending[r])
	}
	c.relabel.listed(c)
}

// list is the API's objects of a resource now, as the process reads them,
// in key order.
func (c *caches) list(r string) []runtime.Object {
	var objs []runtime.Object
	for _, k := range c.w.api.keys(r) {
		if cur := c.w.api.peek(r, k); cur != nil {
			objs = append(objs, c.release.view(cur.DeepCopyObject()))
		}
	}
	return objs
}

// relistResource lists one resource again, as a reflector does after its
// watch expired: the store gets what the keeper keeps of the listing (an
// update for what it held, an add for what is new) and loses the rest (a
// deletion), and the handlers are told as client-go's Replace tells them.
// It replaces a listing behind the watch under way.
func (c *caches) relistResource(r string) (kept, dropped int) {
	inf := c.inf[r]
	objs := c.list(r)
	keep := c.relist(r, objs)
	c.dropBackfill(r)
	listed := map[string]bool{}
	for i, obj := range objs {
		if !keep[i] {
			continue
		}
		key := keyOf(obj)
		listed[key] = true
		kept++
		if old, exists, _ := inf.indexer.GetByKey(key); exists {
			_ = inf.indexer.Update(obj)
			inf.notify(notification{old: old, obj: obj})
		} else {
			_ = inf.indexer.Add(obj)
			inf.notify(notification{obj: obj})
		}
	}
	for _, key := range inf.indexer.ListKeys() {
		if listed[key] {
			continue
		}
		if old, exists, _ := inf.indexer.GetByKey(key); exists {
			_ = inf.indexer.Delete(old)
			inf.notify(notification{old: old})
			dropped++
		}
	}
	clear(c.pending[r])
	return kept, dropped
}

func (c *caches) changed(resource, key string) {
	if p, ok := c.pending[resource]; ok {
		p[key] = true
	}
}

// deliver brings one object of the store up to the API's version, and
// queues the handlers' notifications.
func (c *caches) deliver(resource, key string) {
	delete(c.pending[resource], key)
	inf := c.inf[resource]
	cur := c.w.api.peek(resource, key)
	old, exists, _ := inf.indexer.GetByKey(key)
	var obj runtime.Object
	if cur != nil {
		obj = c.release.view(cur.DeepCopyObject())
	}
	if resource == rNodes {
		c.relabel.delivered(key, obj)
	}
	switch c.observe(resource, key, obj) {
	case scope.Skip:
		c.w.notePVSeen(c, obj) // dropped: its reclaimer never acts on it
		c.w.scoped[resource+" deliveries a provisioner skipped (not kept whole)"]++
		return
	case scope.Forget:
		if cur != nil {
			c.w.notePVSeen(c, obj)
			c.w.scoped[resource+" a provisioner stopped keeping, alive"]++
		}
		cur = nil
	}
	switch {
	case cur != nil:
		if exists {
			_ = inf.indexer.Update(obj)
			inf.notify(notification{old: old, obj: obj})
		} else {
			_ = inf.indexer.Add(obj)
			inf.notify(notification{obj: obj})
		}
	case exists:
		_ = inf.indexer.Delete(old)
		inf.notify(notification{old: old})
	}
}

// waiting lists the listeners with notifications to hand over, with the
// resource of each.
func (c *caches) waiting() (out []waitingListener) {
	for _, r := range sortedKeys(c.inf) {
		for i, l := range c.inf[r].listeners {
			if len(l.fifo) > 0 {
				out = append(out, waitingListener{r, i, l})
			}
		}
	}
	return out
}

type waitingListener struct {
	resource string
	index    int
	l        *listener
}

// pendingKeys lists resource/key pairs not yet delivered, sorted.
func (c *caches) pendingKeys() [][2]string {
	var out [][2]string
	for _, r := range sortedKeys(c.pending) {
		ks := make([]string, 0, len(c.pending[r]))
		for k := range c.pending[r] {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			out = append(out, [2]string{r, k})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var _ runtime.Object = nil

// relist tells the resource's keeper of a whole listing and says which
// objects to keep (all, for a resource without one).
func (c *caches) relist(resource string, objs []runtime.Object) []bool {
	k := c.keepers[resource]
	if k == nil {
		kept := make([]bool, len(objs))
		for i := range kept {
			kept[i] = true
		}
		return kept
	}
	known := map[string]runtime.Object{}
	for _, obj := range objs {
		known[keyOf(obj)] = obj
	}
	c.known[resource] = known
	return k.Relist(objs)
}

// observe tells the resource's keeper of an object's new version (obj nil:
// it is gone) as the watch would, and says what the cache does with it
// (always Keep for a resource without a keeper). An object replaced under
// its key since the last delivery is told of as deleted, then added.
func (c *caches) observe(resource, key string, obj runtime.Object) scope.Action {
	k := c.keepers[resource]
	if k == nil {
		return scope.Keep
	}
	known := c.known[resource]
	before, seen := known[key]
	switch {
	case obj == nil && !seen:
		return scope.Skip
	case obj == nil:
		delete(known, key)
		return k.Deleted(before)
	case seen && uidOf(before) == uidOf(obj):
		known[key] = obj
		return k.Modified(obj)
	}
	gone := scope.Skip
	if seen {
		gone = k.Deleted(before)
	}
	known[key] = obj
	if k.Added(obj) == scope.Keep {
		return scope.Keep
	}
	return gone
}

func uidOf(obj runtime.Object) types.UID {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetUID()
}
