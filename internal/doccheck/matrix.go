package doccheck

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// kubeVersion is a Kubernetes release as the docs write it.
var kubeVersion = regexp.MustCompile(`\bv1\.\d+\.\d+(-[0-9A-Za-z.]+)?\b`)

// MatrixVersions reads KUBE_MATRIX, the versions make test-versions runs,
// from hack/tools/versions.env's text.
func MatrixVersions(versionsEnv string) ([]string, error) {
	for _, line := range strings.Split(versionsEnv, "\n") {
		if v, ok := strings.CutPrefix(line, "KUBE_MATRIX="); ok {
			fields := strings.Fields(strings.Trim(strings.TrimSpace(v), `"`))
			if len(fields) == 0 {
				return nil, fmt.Errorf("versions.env: KUBE_MATRIX is empty")
			}
			return fields, nil
		}
	}
	return nil, fmt.Errorf("versions.env: no KUBE_MATRIX")
}

// CheckMatrix holds what the docs say was tested to what was run: the
// rows of docs/testing.md's table from make test-versions (those that
// begin "| v1.") are of versions of the matrix, and passed; the README's
// Kubernetes row (its "tested" cell) names exactly those versions and the
// pinned one, which make test runs. A pre-release outside the matrix
// (v1.38.0-beta.0) may have rows, passed or not: make test-versions reports
// it and does not block on it, and it is not a tested version.
func CheckMatrix(readme, testing string, matrix []string, pinned string) []string {
	var problems []string
	run := map[string]bool{pinned: true}
	for i, line := range strings.Split(testing, "\n") {
		if !strings.HasPrefix(line, "| v1.") {
			continue
		}
		cells := strings.Split(line, "|")
		v := kubeVersion.FindString(cells[1])
		if strings.Contains(v, "-") && !slices.Contains(matrix, v) {
			continue // a pre-release, reported
		}
		if !slices.Contains(matrix, v) {
			problems = append(problems, fmt.Sprintf("docs/testing.md:%d: %s is not in KUBE_MATRIX", i+1, v))
			continue
		}
		if len(cells) < 4 || strings.TrimSpace(cells[3]) != "pass" {
			problems = append(problems, fmt.Sprintf("docs/testing.md:%d: %s did not pass", i+1, v))
			continue
		}
		run[v] = true
	}
	want := slices.Sorted(maps.Keys(run))
	found := false
	for i, line := range strings.Split(readme, "\n") {
		if !strings.HasPrefix(line, "| Kubernetes |") {
			continue
		}
		found = true
		cells := strings.Split(line, "|")
		var got []string
		if len(cells) > 2 {
			got = kubeVersion.FindAllString(cells[2], -1)
		}
		slices.Sort(got)
		got = slices.Compact(got)
		if !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("README.md:%d: tested Kubernetes %v, but docs/testing.md's matrix table and make test ran %v", i+1, got, want))
		}
		break
	}
	if !found {
		problems = append(problems, "README.md: no \"| Kubernetes |\" row in the compatibility table")
	}
	return problems
}
