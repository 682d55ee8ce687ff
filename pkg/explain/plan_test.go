package explain

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/tether-csi/tether/pkg/binder"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name  string
		claim *v1.PersistentVolumeClaim
		want  ReadPlan
	}{
		{name: "bound: its volume only", claim: newClaim("c", "manual", "1Gi", bound("pv-1")), want: ReadPlan{NamedVolume: "pv-1"}},
		{name: "names its volume", claim: newClaim("c", "manual", "1Gi", volumeName("pv-x")), want: ReadPlan{NamedVolume: "pv-x"}},
		{name: "terminating: its pods", claim: newClaim("c", "manual", "1Gi", bound("pv-1"), deleting("kubernetes.io/pvc-protection")),
			want: ReadPlan{NamedVolume: "pv-1", Pods: true}},
		{name: "unbound: everything", claim: newClaim("c", "topo", "1Gi", selectedNode("node-1")),
			want: ReadPlan{AllVolumes: true, Pods: true, Events: true, Provisioning: true, SelectedNode: "node-1"}},
	}
	for _, tt := range tests {
		if got := Plan(tt.claim); got != tt.want {
			t.Errorf("%s: Plan = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestLeaseNames(t *testing.T) {
	classes := []*storagev1.StorageClass{class("fast", driver, false, false), class("topo", driver, true, false),
		class("manual", "kubernetes.io/no-provisioner", false, false), class("ebs", "kubernetes.io/aws-ebs", false, false)}
	nodes := []*storagev1.CSINode{csiNode("node-c"), csiNode("node-a"), csiNode("node-d"), csiNode("node-b"),
		{Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "other"}}}}}
	tests := []struct {
		name         string
		claim        *v1.PersistentVolumeClaim
		classesKnown bool
		want         []string
	}{
		{name: "central, and the first nodes of the driver", claim: newClaim("c", "fast", "1Gi"), classesKnown: true,
			want: []string{"disk-csi-example-com", "disk-csi-example-com-node-a", "disk-csi-example-com-node-b", "disk-csi-example-com-node-c"}},
		{name: "the selected node's", claim: newClaim("c", "topo", "1Gi", selectedNode("node-z")), classesKnown: true,
			want: []string{"disk-csi-example-com", "disk-csi-example-com-node-z"}},
		{name: "no provisioner", claim: newClaim("c", "manual", "1Gi"), classesKnown: true},
		{name: "bound", claim: newClaim("c", "fast", "1Gi", bound("pv-1")), classesKnown: true},
		{name: "a migrated class: its CSI driver's", claim: newClaim("c", "ebs", "1Gi", selectedNode("n")), classesKnown: true,
			want: []string{"ebs-csi-aws-com", "ebs-csi-aws-com-n"}},
		{name: "classes unreadable: the annotated provisioner's", claim: newClaim("c", "fast", "1Gi", annotated(), selectedNode("n")),
			want: []string{"disk-csi-example-com", "disk-csi-example-com-n"}},
	}
	for _, tt := range tests {
		var cls []*storagev1.StorageClass
		if tt.classesKnown {
			cls = classes
		}
		if got := LeaseNames(tt.claim, cls, tt.classesKnown, nodes); !slices.Equal(got, tt.want) {
			t.Errorf("%s: LeaseNames = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		e    Explanation
		want int
	}{
		{Explanation{Phase: "Bound"}, ExitBound},
		{Explanation{Phase: "Pending", Cause: &Cause{Reason: "TooSmall"}}, ExitNotBound},
		{Explanation{Phase: "Lost", Cause: &Cause{Reason: CauseLost}}, ExitNotBound},
		{Explanation{Phase: "Terminating", Cause: &Cause{Reason: CauseTerminating}}, ExitNotBound},
		{Explanation{Phase: "Bound", Cause: &Cause{Reason: CauseBinderNotActed}}, ExitNotBound},
		{Explanation{Phase: "Pending", Cause: &Cause{Reason: CauseUnknown}}, ExitCannotTell},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.e); got != tt.want {
			t.Errorf("ExitCode(%s, %+v) = %d, want %d", tt.e.Phase, tt.e.Cause, got, tt.want)
		}
	}
	if ExitCodeRows(nil) != ExitBound || ExitCodeRows([]Row{{}}) != ExitNotBound {
		t.Error("ExitCodeRows")
	}
}

func TestRows(t *testing.T) {
	t1, t2 := now.Add(-time.Hour), now.Add(-time.Minute)
	rows := []Row{
		{Namespace: "b", Name: "x", Since: &t2, Cause: &Cause{Reason: "TooSmall"}},
		{Namespace: "a", Name: "y", Since: &t2, Cause: &Cause{Reason: CauseNoProvisioner}},
		{Namespace: "a", Name: "z", Since: &t1, Cause: &Cause{Reason: CauseNoProvisioner}},
	}
	SortRows(rows)
	var order []string
	for _, r := range rows {
		order = append(order, r.Namespace+"/"+r.Name)
	}
	if got := strings.Join(order, " "); got != "a/z a/y b/x" {
		t.Errorf("order %s", got)
	}
	if got := RowsSummary(rows); got != "3 claims wait: 2 NoProvisioner, 1 TooSmall" {
		t.Errorf("summary %q", got)
	}
	if !Waiting(newClaim("c", "m", "1Gi")) || Waiting(newClaim("c", "m", "1Gi", bound("pv"))) ||
		Waiting(newClaim("c", "m", "1Gi", deleting("f"))) {
		t.Error("Waiting")
	}
}

func TestCounts(t *testing.T) {
	cands := []Candidate{
		{Volume: "a", Capacity: "10Gi", Reason: string(binder.MismatchClaimed)},
		{Volume: "b", Capacity: "10Gi", Reason: string(binder.MismatchClaimed)},
		{Volume: "c", Capacity: "1Gi", Reason: string(binder.MismatchSize)},
		{Volume: "d", Capacity: "4Gi", Reason: string(binder.MismatchSize)},
		{Volume: "e", Capacity: "20Gi", Reason: string(binder.MismatchAccessModes)},
		{Volume: "f", Capacity: "8Gi", Reason: string(binder.MismatchAccessModes)},
		{Volume: "g", Capacity: "9Gi", Reason: string(binder.MismatchSelector)},
		{Volume: "h", Capacity: "30Gi", Match: true},
	}
	if got := CountsText(countReasons(cands)); got != "2 too small, 2 lacking an access mode, 2 claimed by other claims, 1 match, 1 outside the claim's selector" {
		t.Errorf("CountsText = %q", got)
	}
	var best []string
	for _, c := range bestCandidates(cands) {
		best = append(best, c.Volume)
	}
	// The match, then the nearest misses: Selector is checked after
	// TooSmall; among TooSmall the largest.
	if got := strings.Join(best, " "); got != "h g d" {
		t.Errorf("best candidates %s, want h g d", got)
	}
	for _, r := range Causes() {
		if _, ok := phrases[r]; !ok && rank(r) >= 0 && r != ReasonMatch {
			t.Errorf("reason %s has no phrase", r)
		}
	}
}

// TestManyVolumes: on a class of 2,000 volumes, 1,990 claimed by others,
// the cause is about the free ones and the explanation names the nearest
// few and the counts.
func TestManyVolumes(t *testing.T) {
	manual := class("manual", "kubernetes.io/no-provisioner", false, false)
	var pvs []*v1.PersistentVolume
	for i := range 1990 {
		pvs = append(pvs, newPV(fmt.Sprintf("pv-%04d", i), "manual", "10Gi", pvClaimRef("other", fmt.Sprintf("c-%d", i))))
	}
	for i := 1; i <= 10; i++ {
		pvs = append(pvs, newPV(fmt.Sprintf("free-%02d", i), "manual", fmt.Sprintf("%dGi", i)))
	}
	start := time.Now()
	e := Explain(Input{Now: now, Claim: newClaim("c", "manual", "20Gi"), Classes: []*storagev1.StorageClass{manual}, Volumes: pvs})
	t.Logf("Explain on 2,000 volumes: %v", time.Since(start))
	if e.Cause == nil || e.Cause.Reason != string(binder.MismatchSize) {
		t.Fatalf("cause %+v, want TooSmall", e.Cause)
	}
	for _, w := range []string{"10 of its 2000 are passed over for TooSmall, the nearest free-10", "all 2000: 1990 claimed by other claims, 10 too small"} {
		if !strings.Contains(e.Cause.Message, w) {
			t.Errorf("%q not in %q", w, e.Cause.Message)
		}
	}
	if len(e.BestCandidates) != BestCandidatesShown || e.BestCandidates[0].Volume != "free-10" {
		t.Errorf("best candidates %+v", e.BestCandidates)
	}
	if len(e.ReasonCounts) != 2 || e.ReasonCounts[0] != (ReasonCount{Reason: string(binder.MismatchClaimed), Count: 1990}) {
		t.Errorf("counts %+v", e.ReasonCounts)
	}
}

// TestEveryCauseIsDocumented: docs/why.md names each cause the code can
// give, and no cause the code cannot.
func TestEveryCauseIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/why.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	for _, c := range Causes() {
		if !documented[c] {
			t.Errorf("cause %s is not in docs/why.md's table of causes", c)
		}
		delete(documented, c)
	}
	for c := range documented {
		t.Errorf("docs/why.md documents cause %s, which the code does not give", c)
	}
}
