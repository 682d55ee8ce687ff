package doccheck

import (
	"fmt"
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

// CheckMatrix holds what the docs say was tested to the matrix: the
// README's Kubernetes row (its "tested" cell) names exactly the matrix's
// versions, and docs/testing.md's table from make test-versions (the rows
// that begin "| v1.") has a row for each of them, every one passed.
func CheckMatrix(readme, testing string, matrix []string) []string {
	var problems []string
	found := false
	for i, line := range strings.Split(readme, "\n") {
		if !strings.HasPrefix(line, "| Kubernetes |") {
			continue
		}
		found = true
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			problems = append(problems, fmt.Sprintf("README.md:%d: the Kubernetes row has no tested cell", i+1))
			break
		}
		got := kubeVersion.FindAllString(cells[2], -1)
		slices.Sort(got)
		got = slices.Compact(got)
		want := slices.Sorted(slices.Values(matrix))
		if !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("README.md:%d: tested Kubernetes %v, but make test-versions runs %v (KUBE_MATRIX)", i+1, got, want))
		}
		break
	}
	if !found {
		problems = append(problems, "README.md: no \"| Kubernetes |\" row in the compatibility table")
	}
	rows := map[string][]string{}
	for i, line := range strings.Split(testing, "\n") {
		if !strings.HasPrefix(line, "| v1.") {
			continue
		}
		cells := strings.Split(line, "|")
		v := kubeVersion.FindString(cells[1])
		rows[v] = append(rows[v], line)
		if len(cells) > 3 && !strings.Contains(cells[3], "pass") {
			problems = append(problems, fmt.Sprintf("docs/testing.md:%d: %s did not pass: %s", i+1, v, strings.TrimSpace(cells[3])))
		}
	}
	for _, v := range matrix {
		if len(rows[v]) == 0 {
			problems = append(problems, fmt.Sprintf("docs/testing.md: no row of make test-versions' table for %s", v))
		}
	}
	return problems
}
