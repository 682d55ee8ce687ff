package upgrade

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// previousRef is the previous version until a release tag exists: the
// commit before 61ae2c8, which made the provisioner name its record's
// format (provisioner.tether.dev/in-flight-format: "1"); this one writes
// records without it, as every release so far. TETHER_UPGRADE_FROM names
// another ref.
const previousRef = "a4e5e22f38cdda53a2399dd389a95d2966860234"

// latency is what each CreateVolume and DeleteVolume takes through the
// slow socket (and every other CSI call: the proxy delays all alike).
const latency = 2 * time.Second

// versions builds the previous and the current version.
func versions(t *testing.T) (previous, current Binaries) {
	t.Helper()
	ref := previousRef
	if v := os.Getenv("TETHER_UPGRADE_FROM"); v != "" {
		ref = v
	}
	return BuildRef(t, ref), Current(t)
}

// claimsPerCase is TETHER_UPGRADE_N (make upgrade: 200), 40 without it.
func claimsPerCase(t *testing.T) int {
	t.Helper()
	v := os.Getenv("TETHER_UPGRADE_N")
	if v == "" {
		return 40
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 4 {
		t.Fatalf("TETHER_UPGRADE_N=%q: want a number of claims, 4 or more", v)
	}
	return n
}

func skipUnlessTools(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	if _, err := cluster.ToolsDir(); err != nil {
		t.Skipf("no control plane binaries: %v", err)
	}
}

// summary prints a case's line of figures.
func summary(t *testing.T, name string, r result) {
	t.Helper()
	var more string
	if r.snaps > 0 {
		more += fmt.Sprintf(", snapshots %d (made %d, deleted %d, leaked %d, stuck %d)", r.snaps, r.snapsMade, r.snapsDeleted, r.snapsLeaked, r.snapsStuck)
	}
	if r.perDriver != "" {
		more += ", volumes deleted/made per driver: " + r.perDriver
	}
	t.Logf("upgrade summary: %s: claims %d, volumes made %d, deleted %d, leaked %d, stuck %d, deleted while claims lived %d, records left at all Bound %d (annotated %d)%s, time %s",
		name, r.claims, r.made, r.deleted, r.leaked, r.stuck, r.deletedEarly, r.records, r.annotated, more, r.took.Round(100*time.Millisecond))
}

// Case a: the provisioner upgraded, then rolled back, while claims are in
// flight; the lease passes between two replicas of different versions at
// each change (the new one started beside the old, then the old stopped,
// as a rolling update does). A current binder binds throughout. The claims
// are deleted at the end, and the provisioner upgraded once more while
// their volumes are being deleted.
func TestProvisionerUpgradeRollback(t *testing.T) {
	skipUnlessTools(t)
	prev, cur := versions(t)
	n := claimsPerCase(t)
	e := startEnv(t, cur.Driver, latency)
	tr := e.track()
	e.binder(cur, false)
	old := e.provisioner(prev, true)
	e.waitLeader(old)
	var next *cluster.Process
	r := e.exercise(tr, plain(n), []step{
		{0.25, "upgrade the provisioner " + prev.Version + " -> " + cur.Version, func() {
			next = e.provisioner(cur, true)
			e.stop(old)
			e.waitLeader(next)
		}},
		{0.5, "roll the provisioner back " + cur.Version + " -> " + prev.Version, func() {
			old = e.provisioner(prev, true)
			e.stop(next)
			e.waitLeader(old)
		}},
	}, []step{
		{0.3, "upgrade the provisioner again, mid-deletion", func() {
			next = e.provisioner(cur, true)
			e.stop(old)
			e.waitLeader(next)
		}},
	})
	summary(t, "a provisioner "+prev.Version+"->current->"+prev.Version+" mid-provisioning, ->current mid-deletion", r)
}

// Case b: two binder replicas of different versions with leader election;
// the leader is stopped while claims bind, so that the other version takes
// over, then restarted to stand by, and the other way round. The
// provisioner is the current one.
func TestBinderUpgradeRollback(t *testing.T) {
	skipUnlessTools(t)
	prev, cur := versions(t)
	n := claimsPerCase(t)
	e := startEnv(t, cur.Driver, latency)
	tr := e.track()
	e.provisioner(cur, false)
	old := e.binder(prev, true)
	e.waitLeader(old)
	next := e.binder(cur, true)
	r := e.exercise(tr, plain(n), []step{
		{0.25, "upgrade: stop the leading binder " + prev.Version + ", " + cur.Version + " takes over", func() {
			e.stop(old)
			e.waitLeader(next)
			old = e.binder(prev, true)
		}},
		{0.5, "roll back: stop the leading binder " + cur.Version + ", " + prev.Version + " takes over", func() {
			e.stop(next)
			e.waitLeader(old)
			next = e.binder(cur, true)
		}},
	}, []step{
		{0.3, "upgrade again mid-deletion: stop the leading binder " + prev.Version, func() {
			e.stop(old)
			e.waitLeader(next)
		}},
	})
	summary(t, "b binder "+prev.Version+"->current->"+prev.Version+" mid-binding, ->current mid-deletion", r)
}

// Case c: each program at one version and the other at the other, through
// a whole life of the claims: created, bound, deleted; with restores from
// VolumeSnapshots and clones among them (mixed()), made while their
// sources are, and deleted first, then the snapshots, then their sources,
// without waiting between them. The clones are the mock's (the local
// driver has none), with a provisioner of the same version.
func TestSkew(t *testing.T) {
	skipUnlessTools(t)
	prev, cur := versions(t)
	n := claimsPerCase(t)
	for _, c := range []struct {
		name                string
		binder, provisioner Binaries
	}{
		{"old binder, new provisioner", prev, cur},
		{"new binder, old provisioner", cur, prev},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := startEnv(t, cur.Driver, latency)
			sc := e.startSnapshots()
			e.startMock()
			tr := e.track()
			e.binder(c.binder, false)
			e.provisioner(c.provisioner, false)
			e.mockProvisioner(c.provisioner)
			r := e.exercise(tr, e.mixed(n, sc), nil, nil)
			summary(t, "c binder "+c.binder.Version+", provisioner "+c.provisioner.Version+", a quarter of the claims restores, an eighth clones", r)
		})
	}
}

// Case d: the example driver's DaemonSet in node-deployment mode
// (deploy/csi/local): on each of three nodes a pod of the local driver and
// a provisioner beside it, claims of a WaitForFirstConsumer class spread
// across the nodes by their selected-node annotation (as the scheduler
// writes it). While the claims are provisioned the DaemonSet is rolled to
// the current version node by node, then back; the claims are deleted, and
// it is rolled once more mid-deletion. Each roll is what a DaemonSet's
// default RollingUpdate does (maxUnavailable 1, maxSurge 0): on one node at
// a time the old pod is stopped (driver and provisioner, SIGTERM then
// SIGKILL after 10 s), the new one started on the same driver folder, and
// the next node as soon as it is Ready: its containers run (the DaemonSet
// has no readiness probe), the provisioner still connecting to its driver. The driver is the current build
// in both pods (it is not what is upgraded); a current binder binds.
func TestNodeDeploymentRoll(t *testing.T) {
	skipUnlessTools(t)
	prev, cur := versions(t)
	n := claimsPerCase(t)
	nodes := []string{"node-1", "node-2", "node-3"}
	e := startNodes(t, cur.Driver, latency, nodes, storagev1.VolumeBindingWaitForFirstConsumer)
	tr := e.track()
	e.binder(cur, false)
	var pods []*pod
	for _, d := range e.drivers {
		pods = append(pods, e.startPod(d, prev, n))
	}
	for _, p := range pods {
		e.waitLog(p.provisioner, "Started provisioner controller")
	}
	w := workload{n: n, claim: func(i int) *corev1.PersistentVolumeClaim {
		c := claim(i)
		c.Annotations = map[string]string{annSelectedNode: nodes[i%len(nodes)]}
		return c
	}}
	r := e.exercise(tr, w, []step{
		{0.15, "roll the DaemonSet " + prev.Version + " -> " + cur.Version + " node by node", func() { e.roll(pods, cur, n, tr) }},
		{0.5, "roll it back " + cur.Version + " -> " + prev.Version + " node by node", func() { e.roll(pods, prev, n, tr) }},
	}, []step{
		{0.2, "roll it again, mid-deletion", func() { e.roll(pods, cur, n, tr) }},
	})
	summary(t, "d DaemonSet of 3 nodes "+prev.Version+"->current->"+prev.Version+" node by node mid-provisioning, ->current mid-deletion", r)
}
