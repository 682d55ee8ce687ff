package sim

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tether-csi/tether/pkg/provisioner/scope"
)

// A node-mode provisioner of the current release lists its claims and PVs
// behind the watch on its first listing after a start (scope.Keeper.Behind):
// its informers sync at once with empty stores, the watch runs from the
// listing's resourceVersion, and the listing's objects (the API's state at
// that version) reach the cache later, one at a time, through
// Keeper.Backfill, in any order with the watch's events. The scheduler
// takes one object of a listing per move (behindOptions); the move that
// takes its last object, or finds it empty, ends it (Keeper.CaughtUp). A
// full listing of the resource (relistResource) replaces it, and a restart
// of the process drops it with the process's caches.

// behindResources are the resources a node-mode provisioner of the current
// release lists behind the watch when it starts.
var behindResources = []string{rClaims, rVolumes}

// listBehind starts resource r's listing behind the watch, of objs (the
// API's objects now, in key order): the store stays empty and the watch
// takes objs for what exists at the listing's version (known), so that
// their later versions reach the keeper as modified or deleted.
func (c *caches) listBehind(r string, objs []runtime.Object) {
	c.keepers[r].Behind()
	known := make(map[string]runtime.Object, len(objs))
	for _, obj := range objs {
		known[keyOf(obj)] = obj
	}
	c.known[r] = known
	if c.backfill == nil {
		c.backfill = map[string][]runtime.Object{}
	}
	c.backfill[r] = objs
	c.w.scoped["listings behind the watch started"]++
}

// backfillNext takes the next object of resource r's listing behind the
// watch to the keeper: kept, the store adds it and the handlers are told
// of an add, as deliver does; skipped, nothing reaches the cache (and a
// PV the keeper does not keep is one its reclaimer never acts on, as in
// fill; one the watch told of since never reached the process at this
// version). With the listing's last object taken (or none left), the
// listing has caught up. It says what it did.
func (c *caches) backfillNext(r string) string {
	objs := c.backfill[r]
	out := "of its " + kindName(r) + "s ends"
	if len(objs) > 0 {
		obj := objs[0]
		objs = objs[1:]
		c.backfill[r] = objs
		key := keyOf(obj)
		out = "reaches " + kindName(r) + " " + key
		// The watch has told of the key since the listing's version
		// when it delivered another version (or the deletion) of it.
		told := c.known[r][key] != obj
		if told {
			c.w.scoped["objects a listing behind the watch reached after the watch told of them"]++
		}
		switch c.keepers[r].Backfill(obj) {
		case scope.Keep:
			inf := c.inf[r]
			if _, exists, _ := inf.indexer.GetByKey(key); told || exists {
				panic(fmt.Sprintf("sim: a listing behind the watch kept %s %s, of which the watch told since (in the store: %v)", r, key, exists))
			}
			_ = inf.indexer.Add(obj)
			inf.notify(notification{obj: obj})
			c.w.scoped["objects a listing behind the watch added"]++
			out += ": kept"
		default:
			if !told {
				c.w.notePVSeen(c, obj) // dropped: its reclaimer never acts on it
			}
			c.w.scoped["objects a listing behind the watch skipped"]++
			out += ": skipped"
		}
	}
	if len(objs) == 0 {
		c.keepers[r].CaughtUp()
		delete(c.backfill, r)
		c.w.scoped["listings behind the watch caught up"]++
		out += "; caught up"
	}
	return out
}

// dropBackfill ends resource r's listing behind the watch, if any, in
// favour of a full listing (which the keeper took in its place).
func (c *caches) dropBackfill(r string) {
	if _, ok := c.backfill[r]; ok {
		delete(c.backfill, r)
		c.w.scoped["listings behind the watch replaced by a full listing"]++
	}
}

// behindOptions are the steps that take the next object of a provisioner's
// listing behind the watch: one per running process with a listing under
// way, whatever the phase (a settled world has no listing behind).
func (w *World) behindOptions(add func(int, func() string), weight int) {
	for _, p := range w.provs {
		c := p.caches
		if len(c.backfill) == 0 {
			continue
		}
		if p.node != "" && w.loss.down[p.node] {
			continue // its machine is down: the process does not run
		}
		add(weight, func() string {
			r := pick(w, sortedKeys(c.backfill))
			return fmt.Sprintf("the %s's listing behind the watch %s", p.name, c.backfillNext(r))
		})
	}
}

// checkCaughtUp: once the system has settled, no running provisioner has a
// listing behind the watch.
func (w *World) checkCaughtUp() {
	for _, p := range w.provs {
		if p.node != "" && w.loss.down[p.node] {
			continue
		}
		for _, r := range sortedKeys(p.caches.backfill) {
			w.violate("the %s's listing behind the watch of its %ss has not caught up at rest (%d objects left)", p.name, kindName(r), len(p.caches.backfill[r]))
		}
	}
}

// kindName names one object of a resource behind the watch.
func kindName(r string) string {
	if r == rVolumes {
		return "PV"
	}
	return "claim"
}
