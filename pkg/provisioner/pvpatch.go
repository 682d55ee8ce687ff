package provisioner

import (
	"github.com/tether-csi/tether/pkg/provisioner/libv8"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// LibraryClient is the clientset to hand the library: PatchFinalizerClient,
// and a PV that the library creates for a claim names in its claimRef the
// version of the claim that Provision wrote (the in-flight record), not
// that of the library's own copy, which predates the write. The binder
// waits until its cache holds that version of the claim before it binds
// (inflight.ClaimBehindVolume); with the older one it would bind from a claim
// that has changed since, and its write would fail with a conflict.
//
// The library's saves of the PVs Provision returns are followed (Saves),
// and those of a volume the in-flight clean-up deletes are fenced first
// (deleteUnsaved): the library retries a refused save for ever, and one
// that landed after the deletion would name a volume that is gone.
//
// Before the library removes the deletion finalizer from a PV (its reclaim
// policy turned Retain, or its deletion), the in-flight record of the
// claim the PV names is settled (Provisioner.dropBeforeRelease): once the
// finalizer is off, the PV may go at any time, and a record that outlived
// it would have the claim's deletion clean up a volume its PV said to keep.
//
// Once Delete's DeleteVolume has succeeded, the library deletes the PV and
// removes its deletion finalizer from its cached copy, which is most often
// older than the deletion (or than kube-controller-manager's pv-protection
// write): that removal is then made from fresh reads, retried on a
// conflict, instead of failing, which would have the library redo the
// whole deletion, DeleteVolume included (see releaseAfterDelete).
func (p *Provisioner) LibraryClient(c kubernetes.Interface) kubernetes.Interface {
	return libv8.Client(c, libv8.Hooks{ClaimVersion: p.handoffs.claimVersion, BeforeRelease: p.dropBeforeRelease,
		VolumeDeleted: p.deleted.has, Released: p.deleted.forget, Cached: p.cachedVolume, Saves: p.saves})
}

// cachedVolume is the cache's copy of a PV, nil if it has none.
func (p *Provisioner) cachedVolume(name string) *v1.PersistentVolume {
	if p.o.Volumes == nil {
		return nil
	}
	pv, err := p.o.Volumes.Get(name)
	if err != nil {
		return nil
	}
	return pv
}

// SavePending reports whether a save of a PV of that name, which Provision
// returned to the library, may still land (libv8.Saves.Pending).
func (p *Provisioner) SavePending(name string) bool { return p.saves.Pending(name) }
