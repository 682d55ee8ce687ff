package sim

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// worldMoves are the moves a row of the world's table may name: those of
// writers.go.
func worldMoves() map[string]bool {
	moves := map[string]bool{}
	for _, w := range writers {
		moves[w.move] = true
	}
	return moves
}

// TestWorldCoversTheAPI: every verb a party may perform on a kind the
// binder or the provisioner reads, listed from the API types, has a row of
// the world's table (a move of writers.go, or why it cannot change a
// decision) or of its gaps, and every row is such a verb; each move a row
// names is writers.go's (TestWritersHaveMoves ties those to run.go). The
// gaps are logged.
func TestWorldCoversTheAPI(t *testing.T) {
	verbs, problems := enumerate(apiKinds, whoWrites)
	for _, p := range problems {
		t.Error(p)
	}
	for _, p := range compareTable(verbs, worldTable, worldGaps, worldMoves()) {
		t.Error(p)
	}
	withMoves, reasons := 0, 0
	for _, r := range worldTable {
		if len(r.moves) > 0 {
			withMoves++
		} else {
			reasons++
		}
	}
	t.Logf("%d kinds, %d verbs: %d with moves, %d with reasons, %d gaps", len(apiKinds), len(verbs), withMoves, reasons, len(worldGaps))
	for _, g := range worldGaps {
		t.Logf("%s %s %s: %s", g.party, g.kind, g.verb, g.why)
	}
}

// TestCompareTable: compareTable finds each way a table can be wrong,
// on tables made wrong from the real one.
func TestCompareTable(t *testing.T) {
	verbs, _ := enumerate(apiKinds, whoWrites)
	moves := worldMoves()
	without := func(verb string) []verbRow {
		return slices.DeleteFunc(slices.Clone(worldTable), func(r verbRow) bool {
			return r.party == pAdmin && r.kind == kPV && r.verb == verb
		})
	}
	tests := []struct {
		name       string
		table      []verbRow
		gaps       []verbRow
		moves      map[string]bool
		verbs      []verbKey
		wantSubstr string // "" for no problem
	}{
		{"the real table", worldTable, worldGaps, moves, verbs, ""},
		{"a row removed", without("update spec.claimRef"), worldGaps, moves, verbs,
			"admin PersistentVolume update spec.claimRef: no row"},
		{"a gap removed", worldTable, worldGaps[1:], moves, verbs, "no row"},
		{"a stale row", append(slices.Clone(worldTable), moved(pAdmin, kPV, "update spec.recycler", "retain")), worldGaps, moves, verbs,
			"update spec.recycler: a row of no verb"},
		{"a verb the API no longer has", worldTable, worldGaps, moves,
			slices.DeleteFunc(slices.Clone(verbs), func(k verbKey) bool { return k.verb == "update spec.flocker" }),
			"update spec.flocker: a row of no verb"},
		{"a row twice", append(slices.Clone(worldTable), worldTable[0]), worldGaps, moves, verbs, "two rows"},
		{"neither move nor reason", append(without("update spec.mountOptions"), verbRow{party: pAdmin, kind: kPV, verb: "update spec.mountOptions"}),
			worldGaps, moves, verbs, "neither a move nor a reason"},
		{"a move writers.go lacks", append(without("update spec.claimRef"), moved(pAdmin, kPV, "update spec.claimRef", "rebind-everything")),
			worldGaps, moves, verbs, `move "rebind-everything" is no row of writers.go`},
		{"a GAP in the table", append(without("update spec.mountOptions"), inert(pAdmin, kPV, "update spec.mountOptions", "GAP: maybe")),
			worldGaps, moves, verbs, "a GAP belongs in worldGaps"},
		{"a gap without GAP:", worldTable, append(slices.Clone(worldGaps[1:]), inert(pTenant, kPVC, "update spec.resources", "expansion")),
			moves, verbs, `its reason begins "GAP:"`},
		{"a move taken out of writers.go", worldTable, worldGaps, func() map[string]bool {
			m := worldMoves()
			delete(m, "retain")
			return m
		}(), verbs, `move "retain" is no row of writers.go`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := compareTable(tc.verbs, tc.table, tc.gaps, tc.moves)
			if tc.wantSubstr == "" {
				if len(got) > 0 {
					t.Fatalf("problems %q, want none", got)
				}
				return
			}
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tc.wantSubstr) }) {
				t.Fatalf("problems %q, want one with %q", got, tc.wantSubstr)
			}
		})
	}
}

// TestEnumerate: the verbs come from the types (a field the API adds is
// a verb without a row), and a row of whoWrites the types do not back is
// a problem.
func TestEnumerate(t *testing.T) {
	type pvLike struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			v1.PersistentVolumeSource `json:",inline"`
			Recycler                  string `json:"recycler"`
			Hidden                    string `json:"-"`
		} `json:"spec"`
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	}
	kinds := []apiKind{
		{"Fake", reflect.TypeFor[pvLike](), []string{"Up", "Down"}},
		{"Secret", reflect.TypeFor[v1.Secret](), nil},
	}
	verbs, problems := enumerate(kinds, []writes{
		{"admin", "Fake", true, []string{"update status.phase"}, ""},
		{"tenant", "Secret", false, []string{"delete", "update status.phase", "update spec.data"}, ""},
		{"tenant", "Gone", true, nil, ""},
	})
	var got []string
	for _, k := range verbs {
		got = append(got, k.String())
	}
	for _, want := range []string{"admin Fake create", "admin Fake delete at Up", "admin Fake delete at Down",
		"admin Fake update metadata.finalizers", "admin Fake update spec.csi", "admin Fake update spec.nfs",
		"admin Fake update spec.recycler", "admin Fake update status.phase", "tenant Secret delete"} {
		if !slices.Contains(got, want) {
			t.Errorf("verbs %q lack %q", got, want)
		}
	}
	for _, never := range []string{"admin Fake delete", "admin Fake update spec.-", "admin Fake update spec.", "tenant Secret update status.phase"} {
		if slices.Contains(got, never) {
			t.Errorf("verbs %q have %q", got, never)
		}
	}
	if len(problems) != 3 {
		t.Errorf("problems %q, want 3: Secret's status.phase, spec.data, the kind Gone", problems)
	}
}
