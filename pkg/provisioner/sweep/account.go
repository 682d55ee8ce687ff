package sweep

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// accounting is what the API says tracks volumes now: volume names (of
// claims, their in-flight records, and PVs) and this driver's PV handles.
type accounting struct {
	names   map[string]string // volume name to what names it
	handles map[string]string // volume ID to the PV
	// claimNames and volumeNames hold the names of the claims and PVs
	// that the caches do not keep whole (Options.ClaimNames, VolumeNames).
	claimNames, volumeNames Names
}

func (a accounting) tracks(id, name string) string {
	if by, ok := a.handles[id]; ok {
		return by
	}
	if by := a.names[name]; by != "" {
		return by
	}
	switch {
	case a.volumeNames != nil && (a.volumeNames.Has(id) || a.volumeNames.Has(name)):
		return "a PV the cache does not keep whole"
	case a.claimNames != nil && a.claimNames.Has(name):
		return "a claim the cache does not keep whole"
	}
	return ""
}

// accountClaims adds what claims account for to a: the volume each claim
// would be provisioned under (while a claim exists, a CreateVolume of that
// name may yet come), and the volume its in-flight record names. It is
// pure.
func (a accounting) accountClaims(claims []*v1.PersistentVolumeClaim, r request.Options) {
	for _, c := range claims {
		by := "claim " + klog.KObj(c).String()
		a.names[request.VolumeName(r.VolumeNamePrefix, string(c.UID), r.VolumeNameUUIDLen)] = by
		if _, name, ok := inflight.Volume(c); ok {
			a.names[name] = by + " (in flight)"
		}
	}
}

// accountVolumes adds what PVs account for to a: every PV's name, and
// what each PV of driver names (volumeKeys: a CSI PV's handle, or an
// in-tree PV's translated to CSI), taken as a handle and as a name. It
// is pure.
func (a accounting) accountVolumes(logger klog.Logger, pvs []*v1.PersistentVolume, driver string) {
	for _, pv := range pvs {
		by := "PV " + pv.Name
		keys, err := volumeKeys(logger, pv, driver)
		if err != nil {
			logger.V(2).Info("A PV of the driver's migrated plugin cannot be translated; no orphan is deleted", "pv", klog.KObj(pv), "err", err)
		}
		a.names[pv.Name] = by
		for _, k := range keys[1:] {
			a.handles[k], a.names[k] = by, by
		}
	}
}

// account reads the caches: claims before PVs. A volume's claim keeps its
// in-flight record until the volume's PV is saved, so a hand-off between
// the two reads shows as the record, or as the PV; read the other way
// round, it could show as neither.
func (s *Sweeper) account(ctx context.Context) (accounting, error) {
	logger := klog.FromContext(ctx)
	a := accounting{names: map[string]string{}, handles: map[string]string{}, claimNames: s.o.ClaimNames, volumeNames: s.o.VolumeNames}
	claims, err := s.o.Claims.List(labels.Everything())
	if err != nil {
		return a, fmt.Errorf("listing claims: %w", err)
	}
	a.accountClaims(claims, s.o.Request)
	if s.hook != nil {
		s.hook()
	}
	pvs, err := s.o.Volumes.List(labels.Everything())
	if err != nil {
		return a, fmt.Errorf("listing PVs: %w", err)
	}
	a.accountVolumes(logger, pvs, s.o.Driver.DriverName())
	logger.V(5).Info("Accounted volumes", "claims", len(claims), "pvs", len(pvs))
	return a, nil
}

// accountedFor re-checks one volume right before its deletion: the caches
// again (claims first), then the PV of its name from the API server. It
// returns what accounts for it, or "" for nothing; a PV this process may
// still save (SavePending) accounts for it too. A claim is not read
// from the API server: there is no reading a claim by UID, and a claim
// that the cache has not shown for MinAge cannot come back (UIDs are not
// reused); a claim that is in the cache accounts for the volume already.
func (s *Sweeper) accountedFor(ctx context.Context, id, name string) string {
	a, err := s.account(ctx)
	if err != nil {
		return "an unreadable cache: " + err.Error()
	}
	if by := a.tracks(id, name); by != "" {
		return by
	}
	if s.o.SavePending != nil && s.o.SavePending(name) {
		return "PV " + name + ", which the library is still saving"
	}
	switch _, err := s.o.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); {
	case err == nil:
		return "PV " + name
	case !apierrors.IsNotFound(err):
		return "an unreadable PV: " + err.Error()
	}
	return ""
}
