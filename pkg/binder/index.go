package binder

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/btree"
	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// Index holds the newest known version of every PV, grouped for matching:
// unclaimed volumes by class, volumeMode and access-mode set, each group a
// B-tree ordered by capacity then name; claimed ones by the claim they name.
// A claim looks only at the groups of its class and mode whose access modes
// cover its own, and in each group only from its requested size up, so
// matching does not scan every PV, and a volume enters or leaves its group
// in O(log n) (a sorted slice moved n/2 pointers each time: a tenth of the
// binder's CPU at 50,000 volumes).
//
// The index also keeps the versions the binder itself wrote, so a worker
// never decides on an object older than its own last write, and it reserves
// a volume for the claim that is binding it, so two workers never race for
// the same volume.
type Index struct {
	mu       sync.RWMutex
	vols     map[string]*v1.PersistentVolume
	groups   map[groupKey]*group
	byClass  map[string][]*group   // sorted by (len(modes), modes)
	preBound map[claimRef][]string // the claim a claimRef names -> its PVs' names (mostly one)
	reserved map[string]string     // PV name -> claim UID
	dead     tombstones
	byNode   map[string]map[string]struct{} // node name -> PV names (index_node.go)
}

// claimRef is the claim a PV's claimRef names. Its strings are the PV's
// own (no key is built per volume).
type claimRef struct{ namespace, name string }

type groupKey struct {
	class string
	mode  v1.PersistentVolumeMode
	modes string // access modes, sorted and joined
}

type group struct {
	key   groupKey
	modes []v1.PersistentVolumeAccessMode
	vols  *btree.BTreeG[*v1.PersistentVolume] // by capacity, then name
}

// groupDegree is the B-trees' degree: nodes of up to 63 volumes.
const groupDegree = 32

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{
		vols:     map[string]*v1.PersistentVolume{},
		groups:   map[groupKey]*group{},
		byClass:  map[string][]*group{},
		preBound: map[claimRef][]string{},
		reserved: map[string]string{},
		byNode:   map[string]map[string]struct{}{},
	}
}

func keyOf(pv *v1.PersistentVolume) groupKey {
	modes := make([]string, 0, len(pv.Spec.AccessModes))
	for _, m := range pv.Spec.AccessModes {
		if !slices.Contains(modes, string(m)) {
			modes = append(modes, string(m))
		}
	}
	slices.Sort(modes)
	return groupKey{
		class: storagehelpers.GetPersistentVolumeClass(pv),
		mode:  volumeModeOf(pv.Spec.VolumeMode),
		modes: strings.Join(modes, ","),
	}
}

func byCapacityThenName(a, b *v1.PersistentVolume) int {
	ca, cb := a.Spec.Capacity[v1.ResourceStorage], b.Spec.Capacity[v1.ResourceStorage]
	if c := ca.Cmp(cb); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

func lessByCapacityThenName(a, b *v1.PersistentVolume) bool { return byCapacityThenName(a, b) < 0 }

// newer reports whether resource version a is newer than b. Versions are
// etcd revisions; an unparsable one is taken as newer.
func newer(a, b string) bool {
	ia, errA := strconv.ParseUint(a, 10, 64)
	ib, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return ia > ib
}

// replaces reports whether an object at version a replaces the one held at
// version b: when it is newer, or, with sameReplaces, the same version.
func replaces(a, b string, sameReplaces bool) bool {
	return newer(a, b) || (sameReplaces && a == b)
}

// Upsert stores pv, an informer's, unless the index already has a newer
// version; of the same version it keeps pv (see Store.Upsert). It returns
// the version the index now holds.
func (ix *Index) Upsert(pv *v1.PersistentVolume) *v1.PersistentVolume { return ix.put(pv, true) }

// Returned stores pv, which a write or a read of the binder's returned,
// unless the index has the same version or a newer one. pv is slimmed
// first, in place, as the informer's are (slim.go): it is the caller's own
// copy, fresh from the API.
func (ix *Index) Returned(pv *v1.PersistentVolume) *v1.PersistentVolume {
	return ix.put(slimVolume(shared, pv), false)
}

func (ix *Index) put(pv *v1.PersistentVolume, sameReplaces bool) *v1.PersistentVolume {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	old, ok := ix.vols[pv.Name]
	if ok {
		if old == pv || !replaces(pv.ResourceVersion, old.ResourceVersion, sameReplaces) {
			return old
		}
		ix.remove(old)
	} else if ix.dead.buried(pv.Name, pv.ResourceVersion) {
		return pv
	}
	ix.add(pv)
	return pv
}

// Delete forgets a deleted volume; pv is its last state.
func (ix *Index) Delete(pv *v1.PersistentVolume) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rv := pv.ResourceVersion
	if old, ok := ix.vols[pv.Name]; ok && old.UID == pv.UID {
		if newer(old.ResourceVersion, rv) {
			rv = old.ResourceVersion // a relist's last-known state can be older than our own write
		}
		ix.remove(old)
		delete(ix.reserved, pv.Name)
	}
	ix.dead.add(pv.Name, rv)
}

// Get returns the newest known version of a volume.
func (ix *Index) Get(name string) (*v1.PersistentVolume, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	pv, ok := ix.vols[name]
	return pv, ok
}

// List returns every volume, in no order.
func (ix *Index) List() []*v1.PersistentVolume {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]*v1.PersistentVolume, 0, len(ix.vols))
	for _, pv := range ix.vols {
		out = append(out, pv)
	}
	return out
}

// Len is the number of volumes.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.vols)
}

func (ix *Index) add(pv *v1.PersistentVolume) {
	ix.vols[pv.Name] = pv
	ix.fileByNode(pv, true)
	if ref := pv.Spec.ClaimRef; ref != nil {
		// A claimed volume is found through its claim, never by a search.
		ck := claimRef{ref.Namespace, ref.Name}
		if !slices.Contains(ix.preBound[ck], pv.Name) {
			ix.preBound[ck] = append(ix.preBound[ck], pv.Name)
		}
		return
	}
	k := keyOf(pv)
	g, ok := ix.groups[k]
	if !ok {
		// The group's modes without duplicates: a volume may list a mode
		// twice, and the count orders the groups.
		var modes []v1.PersistentVolumeAccessMode
		for _, m := range pv.Spec.AccessModes {
			if !slices.Contains(modes, m) {
				modes = append(modes, m)
			}
		}
		g = &group{key: k, modes: modes, vols: btree.NewG(groupDegree, lessByCapacityThenName)}
		ix.groups[k] = g
		list := append(ix.byClass[k.class], g)
		slices.SortFunc(list, func(a, b *group) int {
			if c := cmp.Compare(len(a.modes), len(b.modes)); c != 0 {
				return c
			}
			return cmp.Compare(a.key.modes+string(a.key.mode), b.key.modes+string(b.key.mode))
		})
		ix.byClass[k.class] = list
	}
	g.vols.ReplaceOrInsert(pv)
}

func (ix *Index) remove(pv *v1.PersistentVolume) {
	delete(ix.vols, pv.Name)
	ix.fileByNode(pv, false)
	if ref := pv.Spec.ClaimRef; ref != nil {
		ck := claimRef{ref.Namespace, ref.Name}
		if names := slices.DeleteFunc(ix.preBound[ck], func(n string) bool { return n == pv.Name }); len(names) > 0 {
			ix.preBound[ck] = names
		} else {
			delete(ix.preBound, ck)
		}
		return
	}
	k := keyOf(pv)
	g, ok := ix.groups[k]
	if !ok {
		return
	}
	g.vols.Delete(pv)
	if g.vols.Len() == 0 {
		delete(ix.groups, k)
		ix.byClass[k.class] = slices.DeleteFunc(ix.byClass[k.class], func(x *group) bool { return x == g })
		if len(ix.byClass[k.class]) == 0 {
			delete(ix.byClass, k.class)
		}
	}
}

// MatchQuery is one claim's search.
type MatchQuery struct {
	Needs ClaimNeeds
	// NodeLabels, when not nil, are the selected node's labels: a volume
	// whose node affinity excludes them is no match.
	NodeLabels map[string]string
	// DelayBinding is set for WaitForFirstConsumer classes: with no node,
	// only a volume pre-bound to the claim is taken.
	DelayBinding bool
}

// Reserve finds the best volume for a claim and reserves it for the claim,
// atomically, so that no other claim is offered it until Release. It
// returns nil when nothing matches.
//
// Order: a volume pre-bound to the claim wins outright (smallest name first
// if several). Otherwise, as in kube-controller-manager, the groups with the
// fewest access modes come first, so that a ReadWriteMany volume is not
// spent on a ReadWriteOnce claim while a ReadWriteOnce one fits; within a
// group the smallest volume that fits wins, ties broken by name.
func (ix *Index) Reserve(q MatchQuery) *v1.PersistentVolume {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	pv := ix.match(q)
	if pv != nil {
		ix.reserved[pv.Name] = q.Needs.UID
	}
	return pv
}

// Release ends a reservation made by Reserve for this claim UID.
func (ix *Index) Release(pvName, claimUID string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.reserved[pvName] == claimUID {
		delete(ix.reserved, pvName)
	}
}

func (ix *Index) free(pvName, claimUID string) bool {
	owner, taken := ix.reserved[pvName]
	return !taken || owner == claimUID
}

func (ix *Index) match(q MatchQuery) *v1.PersistentVolume {
	n := q.Needs
	var best *v1.PersistentVolume
	for _, name := range ix.preBound[claimRef{n.Namespace, n.Name}] {
		pv := ix.vols[name]
		if !PreBoundTo(pv, n) || !ix.free(name, n.UID) || fits(pv, n, q.NodeLabels) != nil {
			continue
		}
		if best == nil || pv.Name < best.Name {
			best = pv
		}
	}
	if best != nil || (q.DelayBinding && q.NodeLabels == nil) {
		return best
	}
	probe := &v1.PersistentVolume{}
	probe.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: n.Request}
	for _, g := range ix.byClass[n.Class] {
		if g.key.mode != n.Mode || !hasAllModes(g.modes, n.AccessModes) {
			continue
		}
		// The probe has no name: it sorts before every volume of its size.
		g.vols.AscendGreaterOrEqual(probe, func(pv *v1.PersistentVolume) bool {
			if ix.free(pv.Name, n.UID) && candidate(pv, n, q.NodeLabels) {
				best = pv
				return false
			}
			return true
		})
		if best != nil {
			return best
		}
	}
	return nil
}
