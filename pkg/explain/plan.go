package explain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/binder"
)

// ReadPlan is what an explanation of one claim reads besides the claim, the
// StorageClasses and the binders' Leases, so that a bound claim costs a few
// gets and only an unbound one lists the volumes.
type ReadPlan struct {
	// AllVolumes: the claim is matched against every PV. Else only
	// NamedVolume (spec.volumeName), if any, is read.
	AllVolumes  bool
	NamedVolume string
	// Pods of the claim's namespace (who uses the claim).
	Pods bool
	// Events about the claim (and the FailedScheduling of its pods).
	Events bool
	// Provisioning: CSINodes, CSIStorageCapacities and the provisioner's
	// Leases (LeaseNames).
	Provisioning bool
	// SelectedNode is the node to get, "" for none.
	SelectedNode string
}

// Plan is what explaining the claim needs read.
func Plan(c *v1.PersistentVolumeClaim) ReadPlan {
	p := ReadPlan{NamedVolume: c.Spec.VolumeName}
	switch {
	case c.DeletionTimestamp != nil:
		p.Pods = true // who holds the claim
	case binder.BindCompleted(c), c.Spec.VolumeName != "":
	default:
		p = ReadPlan{AllVolumes: true, Pods: true, Events: true, Provisioning: true,
			SelectedNode: c.Annotations[storagehelpers.AnnSelectedNode]}
	}
	return p
}

// Exit statuses of kubectl tether why.
const (
	// ExitBound: the claim is Bound (with -A: no claim waits).
	ExitBound = 0
	// ExitNotBound: the claim is not Bound; the cause is printed.
	ExitNotBound = 1
	// ExitCannotTell: bad arguments, the claim could not be read, or the
	// cause is CannotTell.
	ExitCannotTell = 2
)

// ExitCode is the exit status for an explanation.
func ExitCode(e Explanation) int {
	switch {
	case e.Cause != nil && e.Cause.Reason == CauseUnknown:
		return ExitCannotTell
	case e.Phase == string(v1.ClaimBound) && e.Cause == nil:
		return ExitBound
	}
	return ExitNotBound
}

// Waiting reports whether a claim belongs in the table of claims that
// wait: it is Pending or Lost, and not being deleted.
func Waiting(c *v1.PersistentVolumeClaim) bool {
	return c.DeletionTimestamp == nil && c.Status.Phase != v1.ClaimBound
}

// Row is one waiting claim of the -A table.
type Row struct {
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Phase     string     `json:"phase"`
	Class     string     `json:"storageClass"`
	Request   string     `json:"request,omitempty"`
	Since     *time.Time `json:"since,omitempty"`
	Cause     *Cause     `json:"cause,omitempty"`
}

// RowOf is an explanation as a table row.
func RowOf(c *v1.PersistentVolumeClaim, e Explanation) Row {
	return Row{Namespace: c.Namespace, Name: c.Name, Phase: e.Phase, Class: e.StorageClass, Request: e.Request,
		Since: e.Since, Cause: e.Cause}
}

// SortRows puts the rows in the table's order: by cause, then the oldest
// first, then by namespace and name.
func SortRows(rows []Row) {
	slices.SortStableFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(causeReason(a), causeReason(b)), compareTimes(a.Since, b.Since),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

func causeReason(r Row) string {
	if r.Cause == nil {
		return ""
	}
	return r.Cause.Reason
}

func compareTimes(a, b *time.Time) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return a.Compare(*b)
}

// RowsSummary counts the rows by cause, the most common first: "5 claims
// wait: 3 NoProvisioner, 2 TooSmall".
func RowsSummary(rows []Row) string {
	n := map[string]int{}
	for _, r := range rows {
		n[causeReason(r)]++
	}
	var causes []string
	for c := range n {
		causes = append(causes, c)
	}
	slices.SortFunc(causes, func(a, b string) int { return cmp.Or(cmp.Compare(n[b], n[a]), cmp.Compare(a, b)) })
	parts := make([]string, 0, len(causes))
	for _, c := range causes {
		parts = append(parts, fmt.Sprintf("%d %s", n[c], cmp.Or(c, "no cause")))
	}
	claims := "claims wait"
	if len(rows) == 1 {
		claims = "claim waits"
	}
	return fmt.Sprintf("%d %s: %s", len(rows), claims, strings.Join(parts, ", "))
}

// ExitCodeRows is the exit status of -A: 0 when no claim waits, else 1.
func ExitCodeRows(rows []Row) int {
	if len(rows) == 0 {
		return ExitBound
	}
	return ExitNotBound
}

// UsesClaim reports whether the pod uses the claim (directly, or as its
// generic ephemeral volume).
func UsesClaim(pod *v1.Pod, claim string) bool { return usesClaim(pod, claim) }
