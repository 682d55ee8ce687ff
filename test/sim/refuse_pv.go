package sim

import (
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tether-csi/tether/pkg/provisioner/records"
)

// PV creates refused for a while (refuse-pv, issue 49): a validating
// webhook that denies PVs, or an API server whose etcd is out, for longer
// than records.SaveGrace; then it stops. Every component's PV create fails
// meanwhile (the actors' writes go to the API directly). The library, with
// CreateProvisionedPVLimiter as cmd/provisioner sets it, keeps a PV it
// could not save in memory and retries its create for ever, whatever
// became of the claim (library.go); checkSavedPV then sees whether a PV
// lands naming a volume deleted meanwhile.

// refusingPVs reports whether PV creates are refused now.
func (w *World) refusingPVs() bool { return w.now.Before(w.adm.refuseUntil) }

// startRefusingPVs refuses every PV create for SaveGrace and 1 to 120 s
// more, as a webhook's denial or an etcd outage.
func (w *World) startRefusingPVs() string {
	d := records.SaveGrace + time.Duration(1+w.rng.Intn(120))*time.Second
	w.adm.refuseUntil = w.now.Add(d)
	w.adm.refuseHow = pick(w, []string{"webhook", "etcd"})
	w.adm.refusals++
	return fmt.Sprintf("admin: every PV create is refused for %s (%s)", d, w.adm.refuseHow)
}

// refusePV is the refusal of one PV create by a component, or nil.
func (w *World) refusePV(who string, action k8stesting.Action) error {
	if !w.refusingPVs() {
		return nil
	}
	w.adm.refused++
	w.tracef("  api refuses create persistentvolumes %s (%s): %s", nameOf(action), who, w.adm.refuseHow)
	if w.adm.refuseHow == "webhook" {
		return apierrors.NewForbidden(w.api.gr(rVolumes), nameOf(action),
			errors.New(`admission webhook "pv-policy.example.com" denied the request`))
	}
	return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
}
