package sweep

import (
	"fmt"
	"path"

	v1 "k8s.io/api/core/v1"
	csitrans "k8s.io/csi-translation-lib"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/migration"
)

// What the sweep remembers, for as long as the process lives. Nothing in
// the CSI API says whether a volume was ever kept: a PV patched to Retain
// and then deleted leaves no trace, and the ownership mark is written
// once, at creation. So the sweep watches every PV its informer shows (an
// admin's object: no tenant can make one up; the PVs of its driver, and
// in node-deployment mode of its node, when the caches keep only those:
// package scope) and remembers every volume any of them named, and
// whether with Retain; and it remembers which volumes its first listings
// of the backend already held, whose past it did not see. It deletes
// neither kind.

// baselineListings is how many complete listings of the backend a volume
// must have been absent from, in a row, before it is taken for one made
// since (and how many a volume made since must be absent from before it
// is forgotten). ListVolumes pages need not be consistent (the CSI spec
// says so), so one listing may miss a volume that exists; two in a row
// must miss it.
const baselineListings = 2

// pvMemory is every volume any PV named while this process watched: by
// PV name, by handle for this driver (of CSI PVs and of in-tree PVs
// translated to CSI), and by the handle's last path element (a disk name
// in a handle such as projects/p/zones/z/disks/<name>). It is never
// pruned: a PV gone from the API is exactly what it is for.
type pvMemory struct {
	driver string
	keys   map[string]PVHistory
	// unreadable is the in-tree PVs of the plugin migrated to driver
	// that could not be translated, with why.
	unreadable map[string]string
}

func newPVMemory(driver string) *pvMemory {
	return &pvMemory{driver: driver, keys: map[string]PVHistory{}, unreadable: map[string]string{}}
}

// note remembers what pv names. It changes only m.
func (m *pvMemory) note(logger klog.Logger, pv *v1.PersistentVolume) {
	h := PVNamed
	if pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		h = PVRetained
	}
	keys, err := volumeKeys(logger, pv, m.driver)
	if err != nil {
		m.unreadable[pv.Name] = err.Error()
	}
	for _, k := range keys {
		m.keys[k] = max(m.keys[k], h)
	}
}

// of is the history of the volume of ID id and name name.
func (m *pvMemory) of(id, name string) PVHistory {
	h := m.keys[id]
	if name != "" {
		h = max(h, m.keys[name])
	}
	return h
}

// unreadableOne names one unreadable PV and why, "" for none.
func (m *pvMemory) unreadableOne() string {
	for name, why := range m.unreadable {
		return fmt.Sprintf("PV %s: %s", name, why)
	}
	return ""
}

var translator = csitrans.New()

// volumeKeys is what a PV names: its own name, and, when it is a volume of
// driver (a CSI PV of driver, or an in-tree PV of the plugin migrated to
// driver, translated as the CSI migration does), its handle and the
// handle's last path element. err says that pv is an in-tree PV of the
// plugin migrated to driver whose translation failed: it names a volume of
// driver, but which one is unknown. It is pure.
func volumeKeys(logger klog.Logger, pv *v1.PersistentVolume, driver string) ([]string, error) {
	keys := []string{pv.Name}
	src := pv.Spec.CSI
	if src == nil && translator.IsPVMigratable(pv) {
		plugin, _ := translator.GetInTreePluginNameFromSpec(pv, nil)
		if to, ok := migration.CSIDriverFor(plugin); !ok || to != driver {
			return keys, nil
		}
		csiPV, err := migration.ToCSI(logger, pv)
		if err != nil || csiPV.Spec.CSI == nil {
			return keys, fmt.Errorf("its %s source cannot be translated for %s: %v", plugin, driver, err)
		}
		src = csiPV.Spec.CSI
	}
	if src == nil || src.Driver != driver || src.VolumeHandle == "" {
		return keys, nil
	}
	keys = append(keys, src.VolumeHandle)
	if base := path.Base(src.VolumeHandle); base != src.VolumeHandle && base != "/" && base != "." {
		keys = append(keys, base)
	}
	return keys, nil
}

// listingMemory is which volumes (of our names) the backend listed while
// this process watched, and whether each was first listed after
// baselineListings complete listings in a row without it.
type listingMemory struct {
	complete int // complete listings so far
	volumes  map[string]*listedState
}

type listedState struct {
	born    bool
	missing int // complete listings in a row without it
}

// note takes in a complete listing (volume IDs). A volume first listed in
// one of the first baselineListings listings is not born: it was there
// before. A born volume is forgotten once absent from baselineListings
// listings in a row (it was deleted; if it comes back it is new); a volume
// that was there before is never forgotten. It changes only m.
func (m *listingMemory) note(ids map[string]listed) {
	for id := range ids {
		st, ok := m.volumes[id]
		if !ok {
			st = &listedState{born: m.complete >= baselineListings}
			m.volumes[id] = st
		}
		st.missing = 0
	}
	for id, st := range m.volumes {
		if _, ok := ids[id]; ok {
			continue
		}
		if st.missing++; st.born && st.missing >= baselineListings {
			delete(m.volumes, id)
		}
	}
	m.complete++
}

// born reports whether the volume of id was made while this process
// listed the backend.
func (m *listingMemory) born(id string) bool {
	st, ok := m.volumes[id]
	return ok && st.born
}

// listed is a listed volume of our names.
type listed struct {
	name string
	mark Ownership
}
