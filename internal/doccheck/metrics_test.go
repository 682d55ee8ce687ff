package doccheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMetricRefs(t *testing.T) {
	text := "a `tether_binder_pending_claims` row\n" +
		"expr: rate(tether_x_total[5m]) > 0 and tether_y\n" +
		"kubectl-tether_v0.1.0_linux and my_tether_z are not ours\n" +
		"the leader's `tether_binder_*` counters\n"
	want := []Ref{
		{Name: "tether_binder_pending_claims", Line: 1},
		{Name: "tether_x_total", Line: 2},
		{Name: "tether_y", Line: 2},
		{Name: "tether_binder_", Line: 4, Prefix: true},
	}
	if got := MetricRefs(text); !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestCheckMetricRefs(t *testing.T) {
	code := map[string]bool{"tether_a_total": true, "tether_b_seconds": true}
	for _, tc := range []struct {
		name string
		ref  Ref
		want []string
	}{
		{"a name", Ref{Name: "tether_a_total", Line: 1}, nil},
		{"a histogram's bucket", Ref{Name: "tether_b_seconds_bucket", Line: 1}, nil},
		{"a histogram's count", Ref{Name: "tether_b_seconds_count", Line: 1}, nil},
		{"a prefix", Ref{Name: "tether_b_", Line: 1, Prefix: true}, nil},
		{"an unknown name", Ref{Name: "tether_c_total", Line: 3}, []string{"f.md:3: tether_c_total is no metric the code registers"}},
		{"a renamed metric", Ref{Name: "tether_a", Line: 2}, []string{"f.md:2: tether_a is no metric the code registers"}},
		{"an unknown prefix", Ref{Name: "tether_c_", Line: 4, Prefix: true}, []string{"f.md:4: tether_c_ is no metric prefix the code registers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckMetricRefs("f.md", []Ref{tc.ref}, code); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// goSources are the non-test Go files under the repository's dirs.
func goSources(t *testing.T, root string, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, f := range repoFiles(t, root, dirs, ".go") {
		if !strings.HasSuffix(f, "_test.go") {
			out = append(out, filepath.Join(root, f))
		}
	}
	return out
}

// Every tether_ metric named in the docs, the alerts, the dashboards and
// the manifests is one the code registers.
func TestMetricNamesExist(t *testing.T) {
	r := root(t)
	code := codeMetrics(t, r)
	for _, p := range readerFiles(t, r) {
		b, err := os.ReadFile(filepath.Join(r, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range CheckMetricRefs(p, MetricRefs(string(b)), code) {
			t.Error(problem)
		}
	}
}

// codeMetrics are the metrics tether's code registers.
func codeMetrics(t *testing.T, r string) map[string]bool {
	t.Helper()
	code, err := CodeMetrics(goSources(t, r, "cmd", "pkg", "internal"))
	if err != nil {
		t.Fatal(err)
	}
	if len(code) < 5 {
		t.Fatalf("only %d tether_ metrics found in the code: the reading is broken", len(code))
	}
	return code
}
