package sim

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/tether-csi/tether/pkg/inflight"
)

// Final CreateVolume errors and classes deleted with their claims (issue
// 33, defect 7). The driver supports no block volumes: it refuses every
// request for one with InvalidArgument, having made nothing, as a driver
// refuses a block claim in Kubernetes' volumeMode suite. A tenant's claim
// asks for a block volume now and then (from a hash of its name: no draw
// from the random stream), and a test suite deletes a class with its
// claims (the class-with-claims actor; and in a quarter of the schedules a
// suite's last spec runs before the tear-down, which then deletes every
// class with the claims).
//
// The check: a provisioner process that wrote a claim's record on a claim
// that held none, and made every CreateVolume ever sent for the claim's
// volume, each refused, knows that no volume exists. Its clean-up of that
// claim must not fail (ProvisioningCleanupFailed, which holds the claim and
// its namespace while it retries) nor give a volume up
// (VolumeCleanupAbandoned). A record it did not write from none (a restart,
// a write it saw fail, a forged record) or a call of another process
// (another node, external-provisioner, an earlier leader) lets it do what
// it does without that knowledge.

// WaitInfeasible wires the provisioner's wait for an edit
// (provisioner.WaitInfeasible) into each provisioner process: a refused
// claim is then declined until it or its class changes, or handed back
// after a minute. Off by default: the wait changes which keys are ready,
// and so the random stream that the seeds of the pinned schedules were
// found in; TestSimInfeasibleWait runs schedules with it.
var WaitInfeasible = false

// blockClaim says whether the tenant's claim asks for a block volume: one
// in six, from a hash of the schedule and the claim's name.
func (w *World) blockClaim(name string) bool {
	return mixed("%d/block/%s", w.seed, name)%6 == 0
}

// mixed is a draw from a hash of its arguments, not from the random
// stream: FNV-1a, whose low bits follow the last bytes (two such draws of
// one seed agree), then splitmix64's finalizer, whose every bit depends on
// every bit hashed.
func mixed(format string, args ...any) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, format, args...)
	x := h.Sum64()
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// refusesBlock is the driver's answer to a request for a block volume.
func refusesBlock(req *csi.CreateVolumeRequest) error {
	for _, c := range req.GetVolumeCapabilities() {
		if c.GetBlock() != nil {
			return status.Error(codes.InvalidArgument, "block volumes are not supported")
		}
	}
	return nil
}

// createCall is one CreateVolume the driver answered: the process (its
// driver, one per process) and whether the answer was a refusal, with
// nothing made.
type createCall struct {
	drv     *driver
	refused bool
}

// noteCreate keeps a CreateVolume's answer for the check.
func (w *World) noteCreate(d *driver, name string, err error) {
	refused := status.Code(err) == codes.InvalidArgument
	if refused {
		w.refusedCreates++
	}
	w.creates[name] = append(w.creates[name], createCall{drv: d, refused: refused})
}

// noteRecordWrite keeps which process wrote a claim's record on a claim
// that held none, when it saw the write succeed (seen): any other write
// that adds a record leaves no process knowing every call.
func (w *World) noteRecordWrite(before, after *v1.PersistentVolumeClaim, seen bool) {
	if before == nil || after == nil || inflight.Holds(before) || !inflight.Holds(after) {
		return
	}
	if p := w.caller; p != nil && seen && !p.upstream {
		w.notePreviousRecord()
		w.recordedBy[string(after.UID)] = p
		return
	}
	delete(w.recordedBy, string(after.UID))
}

// checkNoneMadeCleanup runs at a clean-up's ProvisioningCleanupFailed or
// VolumeCleanupAbandoned on a claim.
func (w *World) checkNoneMadeCleanup(c *v1.PersistentVolumeClaim, reason string) {
	p := w.settler
	if p == nil || w.forged[string(c.UID)] || w.recordedBy[string(c.UID)] != p {
		return
	}
	name := ownName(c)
	for _, call := range w.creates[name] {
		if call.drv != p.drv || !call.refused {
			return
		}
	}
	for _, pc := range w.back.pending {
		if strings.HasSuffix(pc.key, "/"+name) {
			return
		}
	}
	w.violate("%s: %s on claim %s/%s, whose every CreateVolume was this process's, under the record it wrote, and was refused (asked %d times): no volume exists",
		w.who, reason, c.Namespace, c.Name, len(w.creates[name]))
}

// classWithClaims is a test suite's tear-down: the claims of a class and
// the class, deleted together. The class stays gone until the admin makes
// it again (or the repair before the tear-down).
func (w *World) classWithClaims() string {
	name := pick(w, []string{classImmediate, classWFFC, classSecret, classRetain})
	n := 0
	for _, c := range w.liveClaims(nil) {
		if c.Spec.StorageClassName != nil && *c.Spec.StorageClassName == name {
			_ = w.api.Delete(rClaims, c.Namespace, c.Name, nil)
			n++
		}
	}
	_ = w.api.Delete(rClasses, "", name, nil)
	w.classesWithClaims++
	return fmt.Sprintf("tenant and admin: delete class %s with its %d claims", name, n)
}

// teardownClasses: in a quarter of the schedules (from a hash of the
// seed) a test suite's last spec runs before the tear-down (suiteSpec),
// and the tear-down deletes every class with the claims.
func (w *World) teardownClasses() bool {
	return mixed("teardown-classes/%d", w.seed)%4 == 0 && !Disabled["class-with-claims"]
}

// suiteSpec is a test suite's last spec, on the settled cluster and the
// provisioners that run now (the hand-back check restarted them, and a
// restart forgets what the calls answered): a namespace of its own, a
// claim of each class, half of them block (from a hash), provisioned or
// refused (a few times: it runs until only retries are left after two
// minutes). The tear-down then deletes them with their classes.
func (w *World) suiteSpec() {
	ns := w.addNamespace()
	var block []string
	for _, class := range []string{classImmediate, classWFFC, classSecret, classRetain} {
		c := w.newClaim(ns, class, "1Gi")
		if mixed("%d/suite-block/%s", w.seed, c.Name)%2 == 0 {
			mode := v1.PersistentVolumeBlock
			c.Spec.VolumeMode = &mode
			block = append(block, c.Name)
		}
		out, err := w.api.Create(c)
		if err != nil {
			panic(err)
		}
		w.claimNS[string(out.(*v1.PersistentVolumeClaim).UID)] = ns
	}
	w.tracef("---- a test suite's last spec in %s: a claim of each class, block %v", ns, block)
	w.settleQuiet(0, 2*time.Minute)
}

// deleteClasses deletes every class (the tear-down's).
func (w *World) deleteClasses() {
	for _, name := range w.api.keys(rClasses) {
		_ = w.api.Delete(rClasses, "", name, nil)
	}
	w.classesWithClaims++
}
