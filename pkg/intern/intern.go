package intern

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Interner hands out one shared copy of each value. Each of its tables is
// bounded: once it holds Limit values it starts again empty, so values
// that never repeat (a claim's own annotations) cost at most a bounded
// table and never leak; the copies handed out before stay shared. Safe for
// concurrent use.
type Interner struct {
	mu         sync.Mutex
	strs       table[string]
	lists      table[v1.ResourceList]
	modes      table[[]v1.PersistentVolumeAccessMode]
	stringMaps table[map[string]string]
	stringList table[[]string]
	affinities table[*v1.VolumeNodeAffinity]
	strPtrs    table[*string]
	modePtrs   table[*v1.PersistentVolumeMode]
}

// Limit bounds each table.
const Limit = 1 << 12

type table[T any] struct{ m map[string]T }

// get returns the value kept under key, or keeps v under it.
func (t *table[T]) get(key string, v T) T {
	if got, ok := t.m[key]; ok {
		return got
	}
	if t.m == nil || len(t.m) >= Limit {
		t.m = make(map[string]T)
	}
	t.m[key] = v
	return v
}

// Str shares a string.
func (in *Interner) Str(s string) string {
	if s == "" {
		return ""
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.strs.get(s, s)
}

// StrPtr shares a pointer to a string.
func (in *Interner) StrPtr(p *string) *string {
	if p == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.strPtrs.get(*p, p)
}

// ModePtr shares a pointer to a volume mode.
func (in *Interner) ModePtr(p *v1.PersistentVolumeMode) *v1.PersistentVolumeMode {
	if p == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.modePtrs.get(string(*p), p)
}

// Resources shares a ResourceList by its entries (name and canonical
// quantity).
func (in *Interner) Resources(l v1.ResourceList) v1.ResourceList {
	if l == nil {
		return nil
	}
	var b strings.Builder
	for _, name := range slices.Sorted(keys(l)) {
		q := l[v1.ResourceName(name)]
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(0)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.lists.get(b.String(), l)
}

// AccessModes shares a list of access modes (in its order).
func (in *Interner) AccessModes(m []v1.PersistentVolumeAccessMode) []v1.PersistentVolumeAccessMode {
	if m == nil {
		return nil
	}
	var b strings.Builder
	for _, mode := range m {
		b.WriteString(string(mode))
		b.WriteByte(0)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.modes.get(b.String(), m)
}

// StringMap shares a map of strings (labels, annotations, attributes).
func (in *Interner) StringMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	var b strings.Builder
	for _, k := range slices.Sorted(keys(m)) {
		field(&b, k)
		field(&b, m[k])
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stringMaps.get(b.String(), m)
}

// Strings shares a list of strings (in its order).
func (in *Interner) Strings(l []string) []string {
	if l == nil {
		return nil
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(l)))
	for _, s := range l {
		field(&b, s)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stringList.get(b.String(), l)
}

// Affinity shares a node affinity by its JSON form: the volumes of one
// node or one zone hold the same.
func (in *Interner) Affinity(a *v1.VolumeNodeAffinity) *v1.VolumeNodeAffinity {
	if a == nil {
		return nil
	}
	key, err := json.Marshal(a)
	if err != nil {
		return a
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.affinities.get(string(key), a)
}

// Meta shares the values of an object's metadata that many objects hold
// alike, in place.
func (in *Interner) Meta(m *metav1.ObjectMeta) {
	m.Namespace = in.Str(m.Namespace)
	m.Labels = in.StringMap(m.Labels)
	m.Annotations = in.StringMap(m.Annotations)
	m.Finalizers = in.Strings(m.Finalizers)
}

// Claim shares a claim's common values, in place, and returns it.
func (in *Interner) Claim(c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	in.Meta(&c.ObjectMeta)
	s, st := &c.Spec, &c.Status
	s.AccessModes = in.AccessModes(s.AccessModes)
	s.Resources.Requests = in.Resources(s.Resources.Requests)
	s.Resources.Limits = in.Resources(s.Resources.Limits)
	s.StorageClassName = in.StrPtr(s.StorageClassName)
	s.VolumeMode = in.ModePtr(s.VolumeMode)
	st.Phase = v1.PersistentVolumeClaimPhase(in.Str(string(st.Phase)))
	st.AccessModes = in.AccessModes(st.AccessModes)
	st.Capacity = in.Resources(st.Capacity)
	st.AllocatedResources = in.Resources(st.AllocatedResources)
	return c
}

// Volume shares a PV's common values, in place, and returns it.
func (in *Interner) Volume(pv *v1.PersistentVolume) *v1.PersistentVolume {
	in.Meta(&pv.ObjectMeta)
	s := &pv.Spec
	s.Capacity = in.Resources(s.Capacity)
	s.AccessModes = in.AccessModes(s.AccessModes)
	if ref := s.ClaimRef; ref != nil {
		ref.Kind, ref.APIVersion, ref.Namespace = in.Str(ref.Kind), in.Str(ref.APIVersion), in.Str(ref.Namespace)
	}
	s.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimPolicy(in.Str(string(s.PersistentVolumeReclaimPolicy)))
	s.StorageClassName = in.Str(s.StorageClassName)
	s.MountOptions = in.Strings(s.MountOptions)
	s.VolumeMode = in.ModePtr(s.VolumeMode)
	s.NodeAffinity = in.Affinity(s.NodeAffinity)
	if csi := s.CSI; csi != nil {
		csi.Driver, csi.FSType = in.Str(csi.Driver), in.Str(csi.FSType)
		csi.VolumeAttributes = in.StringMap(csi.VolumeAttributes)
	}
	pv.Status.Phase = v1.PersistentVolumePhase(in.Str(string(pv.Status.Phase)))
	return pv
}

// field writes a string to a key with its length first, so that no two
// lists of strings make the same key.
func field(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// Transform is an informer transform that shares the values of claims and
// PVs (Claim, Volume) and drops every object's managed fields (no
// controller of tether reads them, and a write without them keeps the
// server's). It changes nothing else, so a cached object written back
// whole loses nothing; it may run twice on one object (client-go's
// watch-list does).
func (in *Interner) Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.PersistentVolumeClaim:
		in.Claim(o)
	case *v1.PersistentVolume:
		in.Volume(o)
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// keys returns an iterator over a map's keys as strings.
func keys[K ~string, V any](m map[K]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(string(k)) {
				return
			}
		}
	}
}
