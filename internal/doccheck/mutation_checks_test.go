package doccheck

import (
	"path/filepath"
	"testing"
)

// Each check of tables, metrics, annotations, versions, flags and event
// words fails on a mutated copy of a real file.
func TestChecksFailOnMutatedFiles(t *testing.T) {
	r := root(t)
	file := func(p string) string { return read(t, filepath.Join(r, p)) }

	t.Run("a sentence inside development.md's make-target table", func(t *testing.T) {
		md := mutate(t, file("docs/development.md"), "| `make unit` |", "Unit tests come next.\n| `make unit` |")
		wantProblem(t, CheckTables("docs/development.md", md), "a line of prose inside a table")
	})
	t.Run("a cell too many in development.md", func(t *testing.T) {
		md := mutate(t, file("docs/development.md"), "| `make unit` | unit tests only", "| `make unit` | x | unit tests only")
		wantProblem(t, CheckTables("docs/development.md", md), "a table row of 3 cells under a header of 2")
	})
	t.Run("a renamed metric in the alerts", func(t *testing.T) {
		y := mutate(t, file("deploy/monitoring/binder-alerts.yaml"), "tether_leader_status", "tether_leader_state")
		wantProblem(t, CheckMetricRefs("deploy/monitoring/binder-alerts.yaml", MetricRefs(y), codeMetrics(t, r)), "tether_leader_state is no metric")
	})
	t.Run("a misspelt annotation in migration.md", func(t *testing.T) {
		md := mutate(t, file("docs/migration.md"), "`pv.kubernetes.io/bind-completed`", "`pv.kubernetes.io/bind-complete`")
		wantProblem(t, CheckAnnotations("docs/migration.md", DocAnnotations(md), codeAnnotations(t, r)), "pv.kubernetes.io/bind-complete is in no constant")
	})
	t.Run("an image tag of another version", func(t *testing.T) {
		y := mutate(t, file("deploy/csi/kustomization.yaml"), "newTag: v0.1.0", "newTag: v0.0.9")
		wantProblem(t, CheckVersions("deploy/csi/kustomization.yaml", VersionRefs(y), "v0.1.0"), "tether v0.0.9, but CHANGELOG.md's first section is v0.1.0")
	})
	t.Run("a misspelt flag in the README", func(t *testing.T) {
		md := mutate(t, file("README.md"), "`--node-loss-grace`", "`--node-loss-grase`")
		wantProblem(t, CheckFlagNames("README.md", md, knownFlags(t, r), foreignFlags), "--node-loss-grase is a flag of no tether program")
	})
	t.Run("a misspelt flag in the local driver's manifest", func(t *testing.T) {
		cs, err := Containers([]byte(mutate(t, file("deploy/csi/local/node-plugin.yaml"), "--root=", "--rot=")))
		if err != nil {
			t.Fatal(err)
		}
		var unknown []string
		for _, c := range cs {
			unknown = append(unknown, UnknownArgs(c.Args, knownFlags(t, r))...)
		}
		wantProblem(t, unknown, "--rot")
	})
	t.Run("a misspelt reason in provisioner.md", func(t *testing.T) {
		md := mutate(t, file("docs/provisioner.md"), "an `OrphanVolume` warning", "an `OrphanVolumeFound` warning")
		reasons, declared := eventSets(t, r)
		wantProblem(t, CheckEventWords("docs/provisioner.md", EventWords(md), reasons, declared, otherEventWords), "OrphanVolumeFound is no event reason")
	})
}
