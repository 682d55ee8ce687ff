package binder

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/pkg/intern"
	"github.com/tether-csi/tether/pkg/server"
)

// The binder caches every claim and every PV of the cluster, and reads a
// few fields of each. slimClaim and slimVolume cut a claim or a PV down,
// in place, to what the binder reads (the informers' transform, and every
// object a write of the binder's returns, go through them), and share the
// values that many objects hold alike (package intern).
//
// What a slim object lacks is never written back. An object the cut took
// nothing from (but its managed fields, which the API server keeps when a
// write carries none) is written as before, by update; one it took
// something from ("cut", see isCut) is written by a merge patch of what
// the binder changed (patch.go), computed between two slim copies and
// guarded by the resourceVersion: an update of it would erase on the
// server every field the cache dropped. Updates stay the common case
// because a patch costs the API server more (it turns the stored object
// into JSON and back: a fifth of its CPU while binding, measured by make
// bench-binder).
//
// Kept of a claim: its metadata but owner references and the annotations
// of other domains than the storage ones (keptAnnotation: kubectl's
// last-applied-configuration goes); spec.accessModes, selector,
// resources.requests, volumeName, storageClassName, volumeMode,
// volumeAttributesClassName; status.phase, accessModes, capacity,
// currentVolumeAttributesClassName. Dropped besides: limits, the data
// source, conditions, allocated resources, modify-volume status. Labels
// are kept though the binder does not read them: a StatefulSet's claims
// share theirs (so they cost nothing shared), and dropping them would
// make every such claim's writes patches.
//
// Of a PV the metadata and spec stay whole (they are mostly shared: a
// provisioner's CSI attributes, the class's mount options); of its status
// only phase and message (reason goes, which cuts the PV;
// lastPhaseTransitionTime goes too, and does not: a write without it keeps
// the server's, or sets a new one when the phase changes).

// shared is the interner of every cache of the process.
var shared = &intern.Interner{}

// slimTransform is the informers' transform for claims and PVs (and the
// managed fields' drop for other objects).
func slimTransform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.PersistentVolumeClaim:
		return slimClaim(shared, o), nil
	case *v1.PersistentVolume:
		return slimVolume(shared, o), nil
	}
	return server.DropManagedFields(obj)
}

// The slim objects carry a mark in place of their managed fields (which
// the API server sends and no controller of tether reads): one entry of a
// manager of this name, whole or cut. The mark survives a deep copy, makes
// a second pass of the transform over the same object free (client-go's
// watch-list runs it on the objects it streams, then again on the list it
// hands over), and never reaches the server: an update drops it first
// (Writer), a patch between two marked copies does not name it, and an
// update that carried it would be refused (an entry without operation is
// invalid) rather than erase what the cache dropped.
const slimManager = "tether-binder-cache"

var (
	wholeMark = []metav1.ManagedFieldsEntry{{Manager: slimManager, Subresource: "whole"}}
	cutMark   = []metav1.ManagedFieldsEntry{{Manager: slimManager, Subresource: "cut"}}
)

func markSlim(m *metav1.ObjectMeta, cut bool) {
	if cut {
		m.ManagedFields = cutMark
	} else {
		m.ManagedFields = wholeMark
	}
}

// isSlim reports whether an object was slimmed.
func isSlim(m *metav1.ObjectMeta) bool {
	return len(m.ManagedFields) == 1 && m.ManagedFields[0].Manager == slimManager
}

// isCut reports whether slimming took from the object something that an
// update would erase: it must be written by patch.
func isCut(m *metav1.ObjectMeta) bool {
	return isSlim(m) && m.ManagedFields[0].Subresource == cutMark[0].Subresource
}

// keptDomains are the annotation domains the binder reads (Kubernetes'
// storage annotations, tether's own); an annotation of another domain is
// dropped from the cache.
var keptDomains = []string{
	"pv.kubernetes.io", "volume.kubernetes.io", "volume.beta.kubernetes.io", "volume.alpha.kubernetes.io",
	"tether.dev",
}

// keptAnnotation reports whether the binder keeps an annotation: its
// domain (before the slash) is one of keptDomains or a subdomain of one.
func keptAnnotation(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range keptDomains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// keptAnnotations returns the annotations the binder keeps: the map itself
// when it keeps all of them, nil for none.
func keptAnnotations(a map[string]string) map[string]string {
	drop := 0
	for k := range a {
		if !keptAnnotation(k) {
			drop++
		}
	}
	switch {
	case drop == 0:
		return a
	case drop == len(a):
		return nil
	}
	out := make(map[string]string, len(a)-drop)
	for k, v := range a {
		if keptAnnotation(k) {
			out[k] = v
		}
	}
	return out
}

// slimClaim cuts a claim down to what the binder reads and shares its
// common values, in place, and returns it. A claim already slimmed is
// returned as it is.
func slimClaim(in *intern.Interner, c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	if isSlim(&c.ObjectMeta) {
		return c
	}
	kept := keptAnnotations(c.Annotations)
	s, st := &c.Spec, &c.Status
	cut := len(kept) != len(c.Annotations) || len(c.OwnerReferences) > 0 ||
		len(s.Resources.Limits) > 0 || s.DataSource != nil || s.DataSourceRef != nil ||
		len(st.Conditions) > 0 || len(st.AllocatedResources) > 0 || len(st.AllocatedResourceStatuses) > 0 ||
		st.ModifyVolumeStatus != nil
	c.Annotations, c.OwnerReferences = kept, nil
	c.Spec = v1.PersistentVolumeClaimSpec{
		AccessModes:               s.AccessModes,
		Selector:                  s.Selector,
		Resources:                 v1.VolumeResourceRequirements{Requests: s.Resources.Requests},
		VolumeName:                s.VolumeName,
		StorageClassName:          s.StorageClassName,
		VolumeMode:                s.VolumeMode,
		VolumeAttributesClassName: s.VolumeAttributesClassName,
	}
	c.Status = v1.PersistentVolumeClaimStatus{
		Phase:                            st.Phase,
		AccessModes:                      st.AccessModes,
		Capacity:                         st.Capacity,
		CurrentVolumeAttributesClassName: st.CurrentVolumeAttributesClassName,
	}
	in.Claim(c)
	markSlim(&c.ObjectMeta, cut)
	return c
}

// slimVolume cuts a PV's status down to what the binder reads and shares
// its common values, in place (its metadata and spec stay whole), and
// returns it. A PV already slimmed is returned as it is.
func slimVolume(in *intern.Interner, pv *v1.PersistentVolume) *v1.PersistentVolume {
	if isSlim(&pv.ObjectMeta) {
		return pv
	}
	cut := pv.Status.Reason != ""
	pv.Status = v1.PersistentVolumeStatus{Phase: pv.Status.Phase, Message: pv.Status.Message}
	in.Volume(pv)
	markSlim(&pv.ObjectMeta, cut)
	return pv
}

// claimInformer and volumeInformer are the factory's informers without its
// namespace index: the binder looks claims and PVs up in its own Store and
// Index, never through the informers' indexes, and the index held every
// key a second time (a set of 100,000 keys under one namespace).
func claimInformer(factory informers.SharedInformerFactory) cache.SharedIndexInformer {
	return factory.InformerFor(&v1.PersistentVolumeClaim{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewPersistentVolumeClaimInformer(client, metav1.NamespaceAll, resync, cache.Indexers{})
	})
}

func volumeInformer(factory informers.SharedInformerFactory) cache.SharedIndexInformer {
	return factory.InformerFor(&v1.PersistentVolume{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewPersistentVolumeInformer(client, resync, cache.Indexers{})
	})
}
