// Package monitoring tests what an SRE loads and reads: the metrics that
// tether's binaries serve against docs/metrics.md (monitoring_test.go,
// docs_test.go); the alerting rules of deploy/monitoring with promtool,
// their PrometheusRule components and their runbooks in docs/runbooks.md
// (rules_test.go, runbooks_test.go); the Grafana dashboard's queries
// (dashboard_test.go); and the rules and the dashboard on a real
// Prometheus that scrapes a binder and provisioners on a test control
// plane (monitoring_test.go, prometheus_test.go).
package monitoring

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tether-csi/tether/test/cluster"
)

// inMakeTest reports whether promtool and prometheus must be there: in CI
// and under `make test` (which exports TETHER_RUN_ID, after `make tools`
// installed Debian's prometheus package through hack/node-debs.sh).
func inMakeTest() bool {
	return os.Getenv("CI") != "" || os.Getenv("TETHER_RUN_ID") != ""
}

// needTool returns the path of promtool or prometheus. Outside CI and
// `make test` a missing one skips the test, saying how to install it;
// inside, it fails it.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, missing := lookTool(name)
	if missing == "" {
		return path
	}
	if inMakeTest() {
		t.Fatal(missing)
	}
	t.Skip(missing)
	return ""
}

// lookTool returns the path of promtool or prometheus, or why there is
// none.
func lookTool(name string) (path, missing string) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Sprintf("%s is not installed: it comes with Debian's prometheus package (apt-get install --no-install-recommends prometheus; make tools installs it through hack/node-debs.sh)", name)
	}
	return path, ""
}

// repoFile is a path in the repository.
func repoFile(t *testing.T, parts ...string) string {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, parts...)...)
}
