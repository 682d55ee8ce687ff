package provisioner

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/records"
)

// The regression tests of issue 24, one per way the landed code broke the
// promise; each failed on that code (commit bfc0ec5).

// forge puts a record on a claim as a namespace user can: the finalizer
// and annotations naming any volume and source.
func forge(volume, source, snapshot string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		inflight.Record(c, driverNm, volume)
		if source != "" {
			c.Annotations[inflight.AnnSource] = source
		}
		if snapshot != "" {
			c.Annotations[inflight.AnnSnapshot] = snapshot
		}
	}
}

// Defect 1: a forged record made the clean-up repeat CreateVolume for any
// name and delete what it got back.
func TestForgedRecordCostsNoOtherVolume(t *testing.T) {
	e := newEnv(t)
	// Another cluster's volume, or a Retain disk whose PV an admin deleted.
	if _, err := e.driver.CreateVolume(e.ctx, &csi.CreateVolumeRequest{Name: "pvc-victim"}); err != nil {
		t.Fatal(err)
	}
	e.createClaim(newClaim(forge("pvc-victim", "h-pvc-victim", "")))
	e.deleteClaim(testClaim)
	e.refresh()
	e.settle(testClaim)
	if slices.Contains(e.driver.deletes, "h-pvc-victim") {
		t.Errorf("DeleteVolume reached the forged record's volume: deletes %v", e.driver.deletes)
	}
	for _, req := range e.driver.creates[1:] {
		if req.Name == "pvc-victim" || req.GetVolumeContentSource() != nil {
			t.Errorf("the clean-up's CreateVolume followed the forged record: name %s, source %v", req.Name, req.GetVolumeContentSource())
		}
	}
	// At worst it cost its author their own claim's name: nothing is left.
	e.check(want{volumes: []string{"pvc-victim"}, gone: true})
}

// Defect 1, the source: a forged in-flight-source made the clean-up clone
// another tenant's volume. The clean-up takes the source the claim names,
// checked as for provisioning.
func TestForgedSourceClonesNothingElse(t *testing.T) {
	e := newEnv(t, cloning())
	e.createClaim(newClaim(forge(testVolume, "h-other-tenant", "h-other-snapshot"),
		func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "missing"}
		}))
	e.deleteClaim(testClaim)
	e.refresh()
	e.settle(testClaim)
	for _, req := range e.driver.creates {
		if src := req.GetVolumeContentSource(); src != nil {
			t.Errorf("the clean-up's CreateVolume cloned %v", src)
		}
	}
	e.check(want{gone: true})
}

// Defect 3: AlreadyExists on a retried CreateVolume (the request changed
// after a timed-out first call) dropped the record although a volume of
// that name exists.
func TestAlreadyExistsOnRetryKeepsRecord(t *testing.T) {
	e := newEnv(t)
	e.createClaim(newClaim())
	e.driver.fail, e.driver.made = timeoutErr, true
	if _, state, _ := e.provision(e.cachedClaim(testClaim)); state != controller.ProvisioningInBackground {
		t.Fatalf("first call: state %v", state)
	}
	e.refresh()
	e.driver.fail, e.driver.made = status.Error(codes.AlreadyExists, "a volume of that name with other parameters"), false
	if _, _, err := e.provision(e.cachedClaim(testClaim)); err == nil {
		t.Fatal("the retry succeeded")
	}
	e.check(want{volumes: []string{testVolume}, record: true})
	// Deleted now, the volume cannot be found (the driver will not say its
	// handle): the claim goes, and the volume is reported, never silently.
	e.deleteClaim(testClaim)
	e.refresh()
	e.settle(testClaim)
	e.check(want{volumes: []string{testVolume}, gone: true, event: ReasonVolumeCleanupAbandoned})
}

// Defect 4: the library's queue-store save mode puts its unsaved PV (no
// resourceVersion) in the shared cache; the reconciler took it for saved
// and dropped the record while no PV existed.
func TestLibraryUnsavedPVKeepsRecord(t *testing.T) {
	e := newEnv(t)
	e.createClaim(newClaim())
	pv := e.mustProvision()
	e.refresh()
	// The library's PV create failed; it keeps the PV in its store.
	if err := e.volumes.GetStore().Add(pv.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	e.clock = e.clock.Add(records.BinderGrace + records.SaveGrace)
	e.settle(testClaim)
	e.check(want{volumes: []string{testVolume}, record: true})
}

// Defect 5: in node mode a reschedule after a timed-out CreateVolume
// dropped (ResourceExhausted) or kept and then let another node settle
// the record, and the first node's local volume was tracked by nothing.
func TestRescheduleAfterTimeoutCleansFirstNode(t *testing.T) {
	e := newEnv(t, nodeMode("node-1"), func(o *Options) { o.Topology = true })
	for _, n := range []string{"node-1", "node-2"} {
		if err := e.nodes.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: kv("topology.tether.dev/node", n)}}); err != nil {
			t.Fatal(err)
		}
		if err := e.csiNodes.Add(&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driverNm, NodeID: n, TopologyKeys: []string{"topology.tether.dev/node"}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	e.createClaim(newClaim(claimAnn(storagehelpers.AnnSelectedNode, "node-1")))
	e.driver.fail, e.driver.made = timeoutErr, true
	e.provision(e.cachedClaim(testClaim))
	e.refresh()
	// The retry: the backend is full now (the first volume counts).
	e.driver.fail, e.driver.made = status.Error(codes.ResourceExhausted, "full"), false
	if _, state, err := e.provision(e.cachedClaim(testClaim)); state != controller.ProvisioningReschedule {
		t.Fatalf("retry: state %v (%v), want a reschedule", state, err)
	}
	e.refresh()
	c := e.apiClaim(testClaim)
	if !inflight.Holds(c) || c.Annotations[inflight.AnnNode] != "node-1" {
		t.Fatalf("after the reschedule the record is %v %v, want it kept for node-1", c.Finalizers, c.Annotations)
	}
	// node-2 may not provision until node-1 has cleaned up.
	node2, err := New(func() Options {
		o := e.p.o
		o.Node = &NodeDeployment{NodeName: "node-2", BaseDelay: 1, MaxDelay: 1}
		return o
	}())
	if err != nil {
		t.Fatal(err)
	}
	e.updateClaim(testClaim, func(c *v1.PersistentVolumeClaim) { c.Annotations[storagehelpers.AnnSelectedNode] = "node-2" })
	e.refresh()
	creates := e.driver.createCount()
	if _, _, err := node2.Provision(e.ctx, controller.ProvisionOptions{StorageClass: e.class, PVC: e.cachedClaim(testClaim)}); err == nil ||
		!strings.Contains(err.Error(), "node-1") || e.driver.createCount() != creates {
		t.Fatalf("node-2 provisioned while node-1's record stands: %v", err)
	}
	// node-1's reconciler cleans its volume up and hands the claim on.
	e.driver.fail = nil
	e.settle(testClaim)
	e.check(want{record: false, event: "VolumeInFlightUnused"})
}

// Defect 6: a claim whose class takes the provisioner secret from the
// claim's namespace, deleted with its namespace while its volume is in
// flight: the clean-up needed the secret, gone for good, and claim and
// namespace stayed Terminating for ever.
func TestNamespaceGoneAbandonsCleanUp(t *testing.T) {
	e := newEnv(t)
	e.class.Parameters = kv("csi.storage.k8s.io/provisioner-secret-name", "creds",
		"csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}")
	var reported []string
	e.r.o.Abandoned = func(name, _ string) { reported = append(reported, name) }
	now := metav1.NewTime(e.clock)
	if _, err := e.client.CoreV1().Namespaces().Create(e.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS, DeletionTimestamp: &now},
		Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createClaim(newClaim(forge(testVolume, "", "")))
	e.deleteClaim(testClaim)
	e.refresh()
	e.settle(testClaim)
	e.check(want{gone: true, event: ReasonVolumeCleanupAbandoned})
	if !slices.Equal(reported, []string{testVolume}) {
		t.Errorf("volumes reported to the sweep: %v", reported)
	}
}

// Defect 6, the usual case: the namespace (and its secret) is deleted
// while the claim's CreateVolume runs in this process: the clean-up uses
// the secret that CreateVolume was given, and nothing is left.
func TestNamespaceGoneCleansUpWithTheSecretItUsed(t *testing.T) {
	e := newEnv(t)
	e.class.Parameters = kv("csi.storage.k8s.io/provisioner-secret-name", "creds",
		"csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}")
	if _, err := e.client.CoreV1().Secrets(testNS).Create(e.ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "creds"},
		Data: map[string][]byte{"token": []byte("t")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createClaim(newClaim())
	e.driver.fail, e.driver.made = timeoutErr, true
	e.provision(e.cachedClaim(testClaim))
	e.driver.fail, e.driver.made = nil, false
	// The namespace goes: its secret first, then the claim waits for us.
	if err := e.client.CoreV1().Secrets(testNS).Delete(e.ctx, "creds", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.deleteClaim(testClaim)
	e.refresh()
	e.settle(testClaim)
	e.check(want{gone: true})
	if last := e.driver.creates[len(e.driver.creates)-1]; last.Secrets["token"] != "t" {
		t.Errorf("the clean-up's CreateVolume had secrets %v", last.Secrets)
	}
}

// Defect 6, without the right to read namespaces: the clean-up retries,
// then gives up after abandonGrace; the claim never stays for ever.
func TestMissingSecretAbandonsAfterGrace(t *testing.T) {
	e := newEnv(t)
	e.class.Parameters = kv("csi.storage.k8s.io/provisioner-secret-name", "creds",
		"csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}")
	e.createClaim(newClaim(forge(testVolume, "", "")))
	e.updateClaim(testClaim, func(c *v1.PersistentVolumeClaim) {}) // (the namespace object exists: not found means absent)
	if _, err := e.client.CoreV1().Namespaces().Create(e.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.deleteClaim(testClaim)
	e.refresh()
	if err := e.r.Reconcile(e.ctx, testNS+"/"+testClaim); err == nil {
		t.Fatal("the clean-up went on without its secret")
	}
	e.clock = e.clock.Add(abandonGrace)
	e.settle(testClaim)
	e.check(want{gone: true, event: ReasonVolumeCleanupAbandoned})
}

// Defect 7: a claim bound to a volume other than its own kept its record
// for its whole life, so --hand-back never exited 0. Its own volume is
// now cleaned up as soon as the bind is known.
func TestHandBackCleansClaimBoundElsewhere(t *testing.T) {
	e := newEnv(t)
	e.createClaim(newClaim())
	e.savePV(recycled())
	e.driver.fail, e.driver.made = timeoutErr, true
	e.driver.during = func(*csi.CreateVolumeRequest) { e.bindTo(recycled()) }
	e.provision(e.cachedClaim(testClaim))
	e.driver.fail, e.driver.during = nil, nil
	e.refresh()
	left, err := e.r.HandBack(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("hand-back left %v", left)
	}
	e.check(want{})
}

// A claim a binder bound to its own volume whose PV is gone (Lost, or its
// Retain PV deleted by an admin to keep the disk), given a record by its
// user and deleted: its PV was saved once, so nothing is deleted.
func TestRecordOnLostClaimNeverDeletes(t *testing.T) {
	e := newEnv(t)
	if _, err := e.driver.CreateVolume(e.ctx, &csi.CreateVolumeRequest{Name: testVolume}); err != nil {
		t.Fatal(err)
	}
	e.createClaim(newClaim(forge(testVolume, "", ""), claimAnn(storagehelpers.AnnBindCompleted, "yes"), func(c *v1.PersistentVolumeClaim) {
		c.Spec.VolumeName, c.Status.Phase = testVolume, v1.ClaimLost
	}))
	e.deleteClaim(testClaim)
	e.refresh()
	e.settle(testClaim)
	e.check(want{volumes: []string{testVolume}, gone: true})
}

// Found by the simulator (seed 112): the library deletes a Released PV's
// volume from its cache, where the PV still says Delete after an admin
// patched it to Retain to keep the disk. Delete decides on the API
// server's copy.
func TestDeleteKeepsDiskPatchedToRetain(t *testing.T) {
	e := newEnv(t)
	e.createClaim(newClaim())
	pv := e.mustProvision()
	e.savePV(pv)
	cached := e.apiPV(pv.Name) // as the library's cache has it: Delete
	saved := cached.DeepCopy()
	saved.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
	if _, err := e.client.CoreV1().PersistentVolumes().Update(e.ctx, saved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := e.p.Delete(e.ctx, cached)
	var ignored *controller.IgnoredError
	if !errors.As(err, &ignored) {
		t.Errorf("Delete of a PV now Retain: %v, want it ignored", err)
	}
	if got := e.driver.volumes(); !slices.Equal(got, []string{testVolume}) {
		t.Errorf("driver volumes %v: the kept disk was deleted", got)
	}
}

// Found by TestDeleteWaitsForDetach on a real API server: the library
// deleted a PV's volume, deleted the PV and removed its deletion
// finalizer, but another finalizer keeps the PV, and a second sync from
// a cache that still has the finalizer would delete the volume again.
// Delete decides on the API server's copy.
func TestDeleteOnceThoughTheCacheLags(t *testing.T) {
	e := newEnv(t)
	e.createClaim(newClaim())
	pv := e.mustProvision()
	e.savePV(pv)
	cached := e.apiPV(pv.Name) // as the library's cache still has it
	if !slices.Contains(cached.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) {
		t.Fatalf("the saved PV has no deletion finalizer: %v", cached.Finalizers)
	}
	saved := cached.DeepCopy()
	now := metav1.Now()
	saved.DeletionTimestamp = &now
	saved.Finalizers = []string{"kubernetes.io/pv-protection"}
	if _, err := e.client.CoreV1().PersistentVolumes().Update(e.ctx, saved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := e.p.Delete(e.ctx, cached)
	var ignored *controller.IgnoredError
	if !errors.As(err, &ignored) {
		t.Errorf("Delete of a PV whose deletion finalizer is off: %v, want it ignored", err)
	}
	if got := e.driver.volumes(); !slices.Equal(got, []string{testVolume}) {
		t.Errorf("driver volumes %v: DeleteVolume was called", got)
	}
}

func (e *env) apiPV(name string) *v1.PersistentVolume {
	e.t.Helper()
	pv, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return pv
}

// Found by the simulator (seed 926290 of the 1,000,000-schedule run): an
// admin patches a freshly saved PV to Retain and deletes it before the
// reconciler or the binder has seen it; the claim still holds its record,
// and its deletion had the clean-up find the volume again and delete the
// disk the PV said to keep. The library's removal of the deletion
// finalizer, which the Retain patch brings, now settles the record first.
func TestRetainedPVDeletedBeforeSettleKeepsVolume(t *testing.T) {
	e := newEnv(t)
	e.createClaim(newClaim())
	pv := e.mustProvision()
	e.savePV(pv)
	pv = e.apiPV(pv.Name)
	pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
	pv, err := e.client.CoreV1().PersistentVolumes().Update(e.ctx, pv, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The library's syncVolume: a Retain PV loses the deletion finalizer.
	pv.Finalizers = slices.DeleteFunc(pv.Finalizers, func(f string) bool { return f == storagehelpers.PVDeletionProtectionFinalizer })
	if _, err := e.p.LibraryClient(e.client).CoreV1().PersistentVolumes().Update(e.ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().PersistentVolumes().Delete(e.ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.deleteClaim(testClaim)
	e.refresh()
	e.clock = e.clock.Add(records.SaveGrace + time.Second)
	e.settle(testClaim)
	e.check(want{volumes: []string{testVolume}, gone: true})
}

// A claim whose provisioning or clean-up is under way keeps the PV's
// finalizer: the library retries once the claim is free.
func TestReleaseWaitsForBusyClaim(t *testing.T) {
	e := newEnv(t)
	claim := e.createClaim(newClaim())
	pv := e.mustProvision()
	e.savePV(pv)
	pv = e.apiPV(pv.Name)
	pv.Finalizers = nil
	unlock := e.p.locks.Lock(string(claim.UID))
	if _, err := e.p.LibraryClient(e.client).CoreV1().PersistentVolumes().Update(e.ctx, pv, metav1.UpdateOptions{}); err == nil {
		t.Error("the finalizer went while the claim was busy")
	}
	unlock()
	if _, err := e.p.LibraryClient(e.client).CoreV1().PersistentVolumes().Update(e.ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.apiClaim(testClaim); inflight.Holds(got) {
		t.Error("the claim kept its record after its PV's finalizer went")
	}
}
