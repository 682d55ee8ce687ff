package scope

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Action is what a cache does with one version of an object.
type Action int

const (
	// Skip: the object is not kept; nothing of it reaches the cache.
	Skip Action = iota
	// Keep: the object is kept whole (added, or updated).
	Keep
	// Forget: an object kept until now is not any more; the cache removes
	// it, as if it had been deleted.
	Forget
)

func (a Action) String() string {
	return [...]string{"skip", "keep", "forget"}[a]
}

// KeeperOptions say which objects of one resource a Keeper keeps.
type KeeperOptions struct {
	// Hold says whether an object is to be kept whole.
	Hold func(runtime.Object) bool
	// Stay says whether an object kept before stays kept though Hold
	// refuses it now.
	Stay func(runtime.Object) bool
	// Names are the names of an object that Seen holds while the object
	// exists, kept or not. They must not change over its versions.
	Names func(runtime.Object) []string
	// Observe, if set, is told of every version of every object, kept or
	// not, and of every deletion (deleted true), as Observe takes it.
	Observe func(obj runtime.Object, deleted bool)
}

// Keeper decides, one watch event at a time, what of a resource one
// process's cache keeps (Keep, Forget, Skip), and keeps the names of
// everything that exists in Seen. It holds the keys and UIDs of what it
// keeps, and nothing else per object. It is safe for concurrent use; the
// events of one resource must come to it in the order the API server
// sent them.
type Keeper struct {
	o    KeeperOptions
	seen *Seen
	gone *Gone
	mu   sync.Mutex
	held map[string]types.UID
	// During a listing: what was kept before it, and what it keeps so far.
	before, next map[string]types.UID
	nextSeen     []uint64
	nextObjs     int
	// told, while a listing runs behind the watch (Behind): the keys the
	// watch has told of since the listing's resourceVersion, whose
	// versions are newer than the listing's. nil otherwise.
	told map[string]struct{}
}

// NewKeeper returns a Keeper that has seen nothing yet.
func NewKeeper(o KeeperOptions) *Keeper {
	return &Keeper{o: o, seen: NewSeen(), held: map[string]types.UID{}}
}

// Seen holds the names of every object that exists, kept or not.
func (k *Keeper) Seen() *Seen { return k.seen }

// Gone holds the UIDs of the last objects deleted that the Keeper's
// resource remembers (claims: bound ones), nil if it remembers none.
func (k *Keeper) Gone() *Gone { return k.gone }

// Held is how many objects the Keeper keeps.
func (k *Keeper) Held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.held)
}

// Relist takes a complete listing of the resource and returns whether to
// keep each object. An object kept before stays kept if Stay says so (the
// same UID under the same key).
func (k *Keeper) Relist(objs []runtime.Object) []bool {
	k.relistBegin()
	keep := make([]bool, len(objs))
	for i, obj := range objs {
		keep[i] = k.relistOne(obj)
	}
	k.relistDone()
	return keep
}

// relistBegin starts a listing (anew, if one was under way, or in place
// of one behind the watch): until relistDone, Seen answers as before it,
// and Added, Modified and Deleted must not be called.
func (k *Keeper) relistBegin() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.told = nil
	if k.next == nil {
		k.before = k.held
	}
	k.next, k.nextSeen, k.nextObjs = map[string]types.UID{}, nil, 0
}

// relistOne takes the next object of the listing and says whether to keep
// it.
func (k *Keeper) relistOne(obj runtime.Object) bool {
	key, uid, ok := identity(obj)
	if !ok {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.nextSeen = k.seen.hashes(k.nextSeen, k.names(obj))
	k.nextObjs++
	if k.o.Observe != nil {
		k.o.Observe(obj, false)
	}
	if k.o.Hold(obj) || (k.before[key] == uid && k.stay(obj)) {
		k.next[key] = uid
		return true
	}
	return false
}

// listed is how many objects the listing under way has taken so far.
func (k *Keeper) listed() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.nextObjs
}

// relistExpect says how many objects the whole listing holds, as its first
// page tells: Seen's next hashes are sized for it once (as many names an
// object as so far, and a little room for the objects created while the
// listing runs) rather than grown, and copied, page after page.
func (k *Keeper) relistExpect(total int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.nextObjs == 0 || total <= k.nextObjs {
		return
	}
	want := len(k.nextSeen) * total / k.nextObjs
	k.nextSeen = slices.Grow(k.nextSeen, want+want/64-len(k.nextSeen))
}

// relistDone ends a listing: what it kept is what the Keeper keeps, and
// Seen holds its names.
func (k *Keeper) relistDone() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held, k.before, k.next = k.next, nil, nil
	k.seen.replace(k.nextSeen)
	k.nextSeen = nil
}

// Behind starts a listing that runs behind the watch, in place of what
// the Keeper kept: the watch from the listing's resourceVersion goes on
// through Added, Modified and Deleted, and the listing's objects come
// through Backfill as they are read, in the order the two arrive; CaughtUp
// ends it. Until then Seen is open (Has answers true), so that no reader
// takes a name for free that the listing has not reached yet. A listing
// through Relist or relistBegin replaces it.
func (k *Keeper) Behind() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held, k.before, k.next = map[string]types.UID{}, nil, nil
	k.told, k.nextSeen, k.nextObjs = map[string]struct{}{}, nil, 0
	k.seen.openUp()
}

// Backfill takes the next object of the listing behind the watch, as it
// was at the listing's resourceVersion, and says whether the cache is to
// add it (Keep) or not (Skip): not if the watch has told of its key since,
// as its word is newer, nor if no listing is behind.
func (k *Keeper) Backfill(obj runtime.Object) Action {
	key, uid, ok := identity(obj)
	if !ok {
		return Skip
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.told == nil {
		return Skip
	}
	k.nextSeen = k.seen.hashes(k.nextSeen, k.names(obj))
	k.nextObjs++
	if _, newer := k.told[key]; newer {
		return Skip
	}
	if k.o.Observe != nil {
		k.o.Observe(obj, false)
	}
	if k.o.Hold(obj) {
		k.held[key] = uid
		return Keep
	}
	return Skip
}

// CaughtUp ends the listing behind the watch: every object of it has come
// through Backfill, and Seen holds every name again. It does nothing when
// no listing is behind.
func (k *Keeper) CaughtUp() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.told == nil {
		return
	}
	k.told = nil
	k.seen.settle(k.nextSeen)
	k.nextSeen = nil
}

// Added takes a new object (created since the listing).
func (k *Keeper) Added(obj runtime.Object) Action { return k.observe(obj, true) }

// Modified takes a new version of an object.
func (k *Keeper) Modified(obj runtime.Object) Action { return k.observe(obj, false) }

func (k *Keeper) observe(obj runtime.Object, added bool) Action {
	key, uid, ok := identity(obj)
	if !ok {
		return Skip
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.told != nil {
		k.told[key] = struct{}{}
	}
	if added {
		k.seen.add(k.names(obj), +1)
	}
	if k.o.Observe != nil {
		k.o.Observe(obj, false)
	}
	prior, was := k.held[key]
	if k.o.Hold(obj) || (was && prior == uid && k.stay(obj)) {
		k.held[key] = uid
		return Keep
	}
	if was {
		delete(k.held, key)
		return Forget
	}
	return Skip
}

// Deleted takes an object's deletion: Forget if it was kept, else Skip.
func (k *Keeper) Deleted(obj runtime.Object) Action {
	key, uid, ok := identity(obj)
	if !ok {
		return Skip
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.told != nil {
		k.told[key] = struct{}{}
	}
	k.seen.add(k.names(obj), -1)
	if k.o.Observe != nil {
		k.o.Observe(obj, true)
	}
	if prior, was := k.held[key]; was && prior == uid {
		delete(k.held, key)
		return Forget
	}
	return Skip
}

func (k *Keeper) names(obj runtime.Object) []string {
	if k.o.Names == nil {
		return nil
	}
	return k.o.Names(obj)
}

func (k *Keeper) stay(obj runtime.Object) bool {
	return k.o.Stay != nil && k.o.Stay(obj)
}

func identity(obj runtime.Object) (string, types.UID, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", "", false
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return "", "", false
	}
	return key, m.GetUID(), true
}
