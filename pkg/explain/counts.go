package explain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tether-csi/tether/pkg/binder"
)

// ReasonCount is how many candidates one reason passes over ("Match" for
// those the binder may take).
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// ReasonMatch counts the volumes the binder may take.
const ReasonMatch = "Match"

// BestCandidatesShown is how many of the nearest volumes the explanation
// names.
const BestCandidatesShown = 3

// causeOrder ranks the binder's reasons from the least to the most telling:
// a volume passed over late in the checks is the nearest miss. A volume
// waiting for a node would be taken once one is selected.
var causeOrder = []binder.MismatchReason{binder.MismatchClaimed, binder.MismatchClass,
	binder.MismatchPhase, binder.MismatchDeleting, binder.MismatchVolumeMode, binder.MismatchVAC,
	binder.MismatchAccessModes, binder.MismatchSize, binder.MismatchSelector, binder.MismatchNodeAffinity,
	binder.MismatchNoNode}

// rank is a reason's place in causeOrder; a match ranks above them all.
func rank(reason string) int {
	if reason == "" || reason == ReasonMatch {
		return len(causeOrder)
	}
	return slices.Index(causeOrder, binder.MismatchReason(reason))
}

// phrases say what a reason means of the volumes it passes over, after
// their count ("412 claimed by other claims").
var phrases = map[string]string{
	ReasonMatch:                         "match",
	string(binder.MismatchClaimed):      "claimed by other claims",
	string(binder.MismatchNoNode):       "wait for a selected node",
	string(binder.MismatchClass):        "of another class",
	string(binder.MismatchPhase):        "Released or Failed",
	string(binder.MismatchDeleting):     "being deleted",
	string(binder.MismatchSize):         "too small",
	string(binder.MismatchVolumeMode):   "of the other volume mode",
	string(binder.MismatchVAC):          "of another VolumeAttributesClass",
	string(binder.MismatchAccessModes):  "lacking an access mode",
	string(binder.MismatchSelector):     "outside the claim's selector",
	string(binder.MismatchNodeAffinity): "out of the selected node's reach",
}

// countReasons counts candidates by reason, the most common first, the
// nearer miss on a tie.
func countReasons(cands []Candidate) []ReasonCount {
	n := map[string]int{}
	for _, c := range cands {
		n[reasonOf(c)]++
	}
	out := make([]ReasonCount, 0, len(n))
	for r, k := range n {
		out = append(out, ReasonCount{Reason: r, Count: k})
	}
	slices.SortFunc(out, func(a, b ReasonCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(rank(b.Reason), rank(a.Reason)), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

func reasonOf(c Candidate) string {
	if c.Match {
		return ReasonMatch
	}
	return c.Reason
}

// CountsText says the counts in words: "412 claimed by other claims, 3 too
// small".
func CountsText(counts []ReasonCount) string {
	parts := make([]string, 0, len(counts))
	for _, c := range counts {
		p, ok := phrases[c.Reason]
		if !ok {
			p = c.Reason
		}
		parts = append(parts, fmt.Sprintf("%d %s", c.Count, p))
	}
	return strings.Join(parts, ", ")
}

// bestCandidates are the few nearest volumes: matches first, then by how
// late the binder's checks pass them over; among equals the one nearest the
// request (for TooSmall the largest, else the smallest), then by name.
// Volumes claimed by another claim are no candidates at all.
func bestCandidates(cands []Candidate) []Candidate {
	var out []Candidate
	for _, c := range cands {
		if c.Reason != string(binder.MismatchClaimed) {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		if r := cmp.Compare(rank(reasonOf(b)), rank(reasonOf(a))); r != 0 {
			return r
		}
		qa, qb := parseQ(a.Capacity), parseQ(b.Capacity)
		byCap := qa.Cmp(qb)
		if a.Reason == string(binder.MismatchSize) {
			byCap = -byCap
		}
		return cmp.Or(byCap, cmp.Compare(a.Volume, b.Volume))
	})
	if len(out) > BestCandidatesShown {
		out = out[:BestCandidatesShown]
	}
	return out
}

func parseQ(s string) resource.Quantity {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}
	}
	return q
}

// Causes are every cause an explanation can give: the binder's mismatch
// reasons (a static volume is passed over) and the Cause* constants. No
// candidate is passed over for StorageClass: the candidates are the
// volumes of the claim's class, and those pre-bound to it, whose class the
// binder does not check.
func Causes() []string {
	out := []string{}
	for _, r := range causeOrder {
		if r != binder.MismatchClass {
			out = append(out, string(r))
		}
	}
	return append(out, CauseInvalidClaim, CauseLost, CauseTerminating, CauseVolumeNameMissing, CauseVolumeNameMismatch,
		CauseVolumeNameTaken, CauseBinderNotActed, CauseNoClass, CauseClassNotFound, CauseNoVolumeOfClass,
		CauseWaitForFirstConsumer, CausePodNotScheduled, CauseNoCapacity, CauseNotAnnotated, CauseNoProvisioner,
		CauseNoNodeProvisioner, CauseProvisioningFailed, CauseProvisioning, CauseWaitingForProvisioner, CauseNoBinder,
		CauseNodeLost, CauseReleasedForNodeLoss, CauseUnknown)
}
