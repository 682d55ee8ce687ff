package release

import (
	"bytes"
	"strings"
	"testing"
)

var testSums = []byte(strings.Repeat("a", 64) + "  tether.yaml\n" + strings.Repeat("b", 64) + "  tether-binder_v0.1.0.spdx.json\n")

func testProvenanceSpec() ProvenanceSpec {
	return ProvenanceSpec{Sums: testSums, Version: "v0.1.0", Revision: strings.Repeat("1", 40), Registry: "ghcr.io/tether-csi",
		Platforms: []string{"linux/amd64", "linux/arm64"}, GoVersion: "go1.26.8", GoMod: []byte("module x\n"), GoSum: []byte(""),
		SourceDateEpoch: created.Unix()}
}

func TestParseSums(t *testing.T) {
	for _, tc := range []struct {
		name, sums string
		want       int
	}{
		{"two", string(testSums), 2},
		{"empty", "", 0},
		{"one space", strings.Repeat("a", 64) + " x\n", -1},
		{"short digest", "abc  x\n", -1},
		{"upper-case hex is hex", strings.Repeat("A", 64) + "  x\n", 1},
		{"no name", strings.Repeat("a", 64) + "  \n", -1},
		{"a name twice", strings.Repeat("a", 64) + "  x\n" + strings.Repeat("b", 64) + "  x\n", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSums([]byte(tc.sums))
			if tc.want < 0 {
				if err == nil {
					t.Errorf("no error, got %v", got)
				}
				return
			}
			if err != nil || len(got) != tc.want {
				t.Errorf("%v, %v; want %d files", got, err, tc.want)
			}
		})
	}
}

func TestProvenanceIsValidAndNamesTheRelease(t *testing.T) {
	a, err := Provenance(testProvenanceSpec())
	if err != nil {
		t.Fatal(err)
	}
	for range 5 { // protojson's whitespace varies; the bytes must not
		b, err := Provenance(testProvenanceSpec())
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("the same spec twice: equal %v, %v\n%s\n%s", bytes.Equal(a, b), err, a, b)
		}
	}
	st, pred, err := ValidateProvenance(a)
	if err != nil {
		t.Fatalf("%v\n%s", err, a)
	}
	if err := CheckSubjects(st, testSums); err != nil {
		t.Error(err)
	}
	var names []string
	for _, s := range st.GetSubject() {
		names = append(names, s.GetName())
	}
	if got := strings.Join(names, " "); got != "SHA256SUMS tether-binder_v0.1.0.spdx.json tether.yaml" {
		t.Errorf("subjects %s", got)
	}
	ext := pred.GetBuildDefinition().GetExternalParameters().AsMap()
	if ext["version"] != "v0.1.0" || ext["command"] != "make release VERSION=v0.1.0 IMAGE_REGISTRY=ghcr.io/tether-csi IMAGE_PLATFORMS=linux/amd64,linux/arm64" {
		t.Errorf("external parameters %v", ext)
	}
	if src, _ := ext["source"].(map[string]any); src == nil || src["digest"].(map[string]any)["gitCommit"] != strings.Repeat("1", 40) {
		t.Errorf("source %v", ext["source"])
	}
	var deps []string
	for _, d := range pred.GetBuildDefinition().GetResolvedDependencies() {
		deps = append(deps, d.GetName())
	}
	if got := strings.Join(deps, " "); got != " go1.26.8 go.mod go.sum" {
		t.Errorf("resolved dependencies %q", got)
	}
	if pred.GetRunDetails().GetBuilder().GetId() != BuilderID || pred.GetBuildDefinition().GetBuildType() != BuildType {
		t.Errorf("builder %v, build type %s", pred.GetRunDetails().GetBuilder(), pred.GetBuildDefinition().GetBuildType())
	}
	if bytes.Contains(a, []byte("startedOn")) || bytes.Contains(a, []byte("finishedOn")) {
		t.Error("the provenance holds the time of its build")
	}
}

func TestValidateProvenanceRefuses(t *testing.T) {
	good, err := Provenance(testProvenanceSpec())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"statement type", `"https://in-toto.io/Statement/v1"`, `"https://in-toto.io/Statement/v2"`},
		{"predicate type", `"https://slsa.dev/provenance/v1"`, `"https://slsa.dev/provenance/v0.2"`},
		{"a short digest", `"sha256": "aaaa`, `"sha256": "aa`},
		{"no build type", `"buildType": "` + BuildType + `"`, `"buildType": ""`},
		{"no builder id", `"id": "` + BuilderID + `"`, `"id": ""`},
		{"an unknown statement field", `"predicateType"`, `"extra": 1, "predicateType"`},
		{"an unknown predicate field", `"buildDefinition"`, `"extra": 1, "buildDefinition"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tc.old, tc.new, 1)
			if bad == string(good) {
				t.Fatalf("%q is not in the statement", tc.old)
			}
			_, _, err := ValidateProvenance([]byte(bad))
			if err == nil {
				t.Fatal("valid")
			}
			t.Log(err)
		})
	}
}

func TestCheckSubjects(t *testing.T) {
	data, err := Provenance(testProvenanceSpec())
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := ValidateProvenance(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sums string
		ok   bool
	}{
		{"the same", string(testSums), true},
		{"a file more", string(testSums) + strings.Repeat("c", 64) + "  RELEASE_NOTES.md\n", false},
		{"a file less", string(testSums[:strings.Index(string(testSums), "\n")+1]), false},
		{"another digest", strings.Replace(string(testSums), "aaaa", "aaab", 1), false},
		{"the same files in another order (SHA256SUMS itself differs)", string(testSums[strings.Index(string(testSums), "\n")+1:]) + string(testSums[:strings.Index(string(testSums), "\n")+1]), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckSubjects(st, []byte(tc.sums)); (err == nil) != tc.ok {
				t.Errorf("%v, want ok=%v", err, tc.ok)
			}
		})
	}
}
