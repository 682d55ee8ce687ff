package conformance

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-csi/tether/test/cluster"
)

var (
	full = flag.Bool("conformance.full", false,
		"run every External Storage test of the driver (make conformance); without it, the short part (make test)")
	stack = flag.String("conformance.stack", stackTether,
		"what binds and provisions: tether (its binder and provisioner), or upstream (KCM's binder and EP "+
			"v6.4.0, the comparison run)")
	focus = flag.String("conformance.focus", "", "a regular expression that narrows the run further (a spec's name)")
)

const (
	stackTether   = "tether"
	stackUpstream = "upstream"
)

// driverName is the local driver's name: the suite names its specs
// "External Storage [Driver: <name>] [Testpattern: ...] <suite> <test>".
const driverName = "local.csi.tether.dev"

// driverFocus selects the driver's specs among the whole e2e suite.
var driverFocus = `External.Storage \[Driver: ` + regexp.QuoteMeta(driverName) + `\]`

// skipped are the driver's specs that need what these machines cannot have,
// each with the reason (docs/conformance.md lists them). Everything else
// the driver declares runs.
var skipped = []struct{ pattern, why string }{
	{`\[Disruptive\]`, "they stop kubelet or reboot a node over SSH; the nodes here are processes on one machine, with no SSH"},
	{`volumeMode should not mount / map unused volumes in a pod`,
		"it looks into the node's kubelet folder from a hostPID pod that enters PID 1's mount namespace; the " +
			"nodes here share the host's PID namespace, so PID 1 is the host's init, whose namespace nsenter may " +
			"not open (Permission denied) and which is not the node's (fails the same with KCM and EP)"},
	{`\[Testpattern: Pre-provisioned Snapshot`,
		"a VolumeSnapshotContent made by hand is taken by no node's csi-snapshotter: with distributed " +
			"snapshotting (a node-local driver) each takes only the contents labelled " +
			"snapshot.storage.kubernetes.io/managed-by with its node, which the snapshot-controller sets on the " +
			"contents it makes and the suite does not set on its own (the same whatever the provisioner)"},
	{`provisioning should provision storage with any volume data source`,
		"it deploys the hello-populator and volume-data-source-validator images of registry.k8s.io/sig-storage, " +
			"which there is no registry to pull from and no source on the Go proxy to build from"},
}

// shortPart is what make test runs: one spec of each main suite, about 2.5
// minutes of specs on 2 cores (5 with the set-up). make conformance runs them all.
var shortPart = []string{
	`\[Testpattern: Dynamic PV \(filesystem volmode\)\] multiVolume \[Slow\] should access to two volumes with the same volume mode and retain data across pod recreation on the same node`,
	`\[Testpattern: Dynamic PV \(default fs\)\] volumes should store data`,
	`\[Testpattern: Dynamic PV \(default fs\)\] subPath should support existing directory`,
	`\[Testpattern: Dynamic PV \(default fs\)\] fsgroupchangepolicy \(Always\)\[LinuxOnly\], pod created with an initial fsgroup, new pod fsgroup applied to volume contents`,
	`\[Testpattern: Generic Ephemeral-volume \(default fs\) \(late-binding\)\] ephemeral should create read/write inline ephemeral volume`,
	`\[Testpattern: Dynamic PV \(delayed binding\)\] topology should provision a volume and schedule a pod with AllowedTopologies`,
	`\[Testpattern: Dynamic PV \(default fs\)\] capacity provides storage capacity information`,
	`\[Testpattern: Dynamic PV \(default fs\)\] read-write-once-pod should block a second pod from using an in-use ReadWriteOncePod volume on the same node`,
}

// TestExternalStorage starts a control plane with two real nodes, deploys
// deploy/csi on them (or, with -conformance.stack=upstream, the same with
// KCM's binder and EP in place of tether's), and runs the suite's specs for
// the local driver with e2e.test. The JUnit report and the suite's log go
// to _artifacts/conformance-<stack>/; the counts are printed and any failed
// spec fails the test.
func TestExternalStorage(t *testing.T) {
	if *stack != stackTether && *stack != stackUpstream {
		t.Fatalf("-conformance.stack=%q: want %s or %s", *stack, stackTether, stackUpstream)
	}
	e2e, err := cluster.Tool("e2e.test")
	if err != nil {
		t.Fatal(err)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cluster.CheckRealNodeHost(t)
	artifacts := filepath.Join(root, "_artifacts", "conformance-"+*stack)
	if dir := os.Getenv("TETHER_ARTIFACTS"); dir != "" {
		artifacts = filepath.Join(dir, "conformance-"+*stack)
	}
	if err := os.RemoveAll(artifacts); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	c := startCluster(t, *stack)
	t.Logf("cluster with 2 real nodes and the %s stack ready in %s", *stack, time.Since(start).Round(time.Second))

	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--provider=local",
		"--repo-root=" + root,
		"--storage.testdriver=" + filepath.Join(root, "test", "conformance", "local-driver.yaml"),
		"--report-dir=" + artifacts,
		"--ginkgo.focus=" + focusExpr(*full, *focus),
		"--ginkgo.skip=" + skipExpr(),
		"--ginkgo.timeout=4h",
		"--ginkgo.no-color",
		"--ginkgo.v",
	}
	logPath := filepath.Join(artifacts, "e2e.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Hour+5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2e, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = artifacts, log, log
	t.Logf("running %s %s\n(log: %s)", e2e, strings.Join(args, " "), logPath)
	runStart := time.Now()
	runErr := cmd.Run()
	t.Logf("e2e.test ran %s (%v)", time.Since(runStart).Round(time.Second), runErr)

	report, err := os.Open(filepath.Join(artifacts, "junit_01.xml"))
	if err != nil {
		t.Fatalf("no JUnit report (e2e.test: %v); the end of its log:\n%s", runErr, cluster.Tail(logPath, 40))
	}
	defer report.Close()
	counts, err := countReport(report, "[Driver: "+driverName+"]")
	if err != nil {
		t.Fatal(err)
	}
	summary := fmt.Sprintf("External Storage, stack %s, %s:\n%s", *stack, runName(*full, *focus), counts)
	t.Log(summary)
	if err := os.WriteFile(filepath.Join(artifacts, "counts.txt"), []byte(summary), 0o644); err != nil {
		t.Error(err)
	}
	switch {
	case counts.Failed > 0:
		t.Errorf("%d of the driver's specs failed (log: %s)", counts.Failed, logPath)
	case counts.Ran == 0:
		t.Errorf("no spec of the driver ran (e2e.test: %v; log: %s)", runErr, logPath)
	case runErr != nil:
		t.Errorf("e2e.test: %v, with no failed spec (log: %s):\n%s", runErr, logPath, cluster.Tail(logPath, 20))
	}
}

// focusExpr selects the driver's specs: all of them, the short part, or
// those that match the user's expression. (ginkgo ORs repeated --focus
// flags, so the driver's prefix is part of one expression.)
func focusExpr(full bool, user string) string {
	switch {
	case user != "":
		return driverFocus + ".*(" + user + ")"
	case full:
		return driverFocus
	}
	return driverFocus + ".*(" + strings.Join(shortPart, "|") + ")"
}

// runName says which specs a run selected, for its summary.
func runName(full bool, user string) string {
	switch {
	case user != "":
		return "focus " + user
	case full:
		return "full"
	}
	return "short part"
}

// skipExpr joins the skipped patterns.
func skipExpr() string {
	var p []string
	for _, s := range skipped {
		p = append(p, s.pattern)
	}
	return strings.Join(p, "|")
}

// startCluster starts the control plane, two real nodes with the test
// images, and the stack's deployment with deploy/csi/snapshots.
func startCluster(t *testing.T, stack string) *cluster.Cluster {
	t.Helper()
	controllers := []string{"*", "-persistentvolume-binder-controller"}
	var patches []string
	images := append(cluster.NodeImages(t), cluster.SnapshotterNodeImage(t))
	images = append(images, cluster.E2EImages(t, images)...)
	if stack == stackUpstream {
		controllers = []string{"*"} // KCM's PV binder
		patches = slices.Clone(cluster.UpstreamPatches)
		images = append(images, cluster.UpstreamImages(t)...)
	}
	c := cluster.Start(t, cluster.Options{RealNodes: true, Scheduler: true, Controllers: controllers})
	// deploy/csi/snapshots, before DeployCSI: the provisioner looks for the
	// snapshot API when it starts.
	patches = append(patches, c.SnapshotsComponent(t))
	nodes := map[string]*cluster.RealNode{}
	for _, name := range []string{"node-1", "node-2"} {
		nodes[name] = c.StartRealNode(t, name, images)
	}
	c.DeployCSI(t, slices.Sorted(maps.Keys(nodes)), patches...)
	return c
}
