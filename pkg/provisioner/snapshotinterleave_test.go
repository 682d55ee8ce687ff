package provisioner

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// snapWant is the outcome of a restore scenario, beside the env's want.
type snapWant struct {
	want
	// protected: apps/snap still carries the restore finalizer.
	protected bool
	// snapGone: apps/snap is gone from the API server.
	snapGone bool
}

// lastSnapshotSource is the snapshot handle of the driver's last
// CreateVolume, "" for none.
func (s *snapEnv) lastSnapshotSource() string {
	s.driver.mu.Lock()
	defer s.driver.mu.Unlock()
	if len(s.driver.creates) == 0 {
		return ""
	}
	return s.driver.creates[len(s.driver.creates)-1].GetVolumeContentSource().GetSnapshot().GetSnapshotId()
}

// mustRestore provisions the restore claim and checks that CreateVolume
// was given the snapshot's handle and the snapshot is protected.
func (s *snapEnv) mustRestore() *v1.PersistentVolume {
	s.t.Helper()
	pv := s.mustProvision()
	if got := s.lastSnapshotSource(); got != testHandle {
		s.t.Fatalf("CreateVolume's snapshot source %q, want %s", got, testHandle)
	}
	return pv
}

// failsWith provisions the claim and wants an error containing msg, no
// CreateVolume, no record and an unprotected snapshot.
func (s *snapEnv) failsWith(msg string) {
	s.t.Helper()
	_, _, err := s.provision(s.cachedClaim(testClaim))
	if err == nil || !strings.Contains(err.Error(), msg) {
		s.t.Fatalf("Provision: %v, want an error with %q", err, msg)
	}
	if s.driver.createCount() != 0 {
		s.t.Errorf("%d CreateVolume calls for a refused restore", s.driver.createCount())
	}
	if s.protected() {
		s.t.Error("a refused restore protected the snapshot")
	}
}

// TestRestoreInterleavings walks restores from a VolumeSnapshot through the
// races of the provision / record / save / settle / clean-up paths and the
// snapshot protection, one named row each.
func TestRestoreInterleavings(t *testing.T) {
	block := v1.PersistentVolumeBlock
	tests := []struct {
		name       string
		claim      *v1.PersistentVolumeClaim
		allowModes bool // --prevent-volume-mode-conversion=false
		steps      func(s *snapEnv)
		want       snapWant
	}{
		{
			name: "restored, saved, bound: the snapshot is released only once the claim is bound",
			steps: func(s *snapEnv) {
				pv := s.mustRestore()
				if c := s.apiClaim(testClaim); !inflight.Holds(c) || c.Annotations[inflight.AnnSnapshot] != "" {
					s.t.Errorf("the record is %v %v, want one without a snapshot handle", c.Finalizers, c.Annotations)
				}
				s.refresh()
				s.release() // CreateVolume done, PV not saved
				s.savePV(pv)
				s.refresh()
				s.release() // PV saved, claim not bound
				if !s.protected() {
					s.t.Fatal("the snapshot was released before its restored claim was bound")
				}
				s.bindTo(pv)
				s.refresh()
				s.release()
			},
			want: snapWant{want: want{volumes: []string{testVolume}}},
		},
		{
			name: "a restore this cache has not seen (another node's): the snapshot stays protected, on the API server's word",
			steps: func(s *snapEnv) {
				pv := s.mustRestore()
				s.refresh()
				// Another node's provisioner: its claim cache lags behind
				// the restore (simulator, seed 2234).
				if err := s.claims.GetStore().Delete(s.apiClaim(testClaim)); err != nil {
					s.t.Fatal(err)
				}
				s.release()
				if !s.protected() {
					s.t.Fatal("the snapshot was released while a restore its cache had not seen held its record")
				}
				s.savePV(pv)
				s.bindTo(pv)
				s.refresh()
				s.release()
			},
			want: snapWant{want: want{volumes: []string{testVolume}}},
		},
		{
			name: "snapshot deleted while CreateVolume runs: the restore finishes, the snapshot goes once the claim is bound",
			steps: func(s *snapEnv) {
				s.driver.fail, s.driver.made = timeoutErr, true
				s.driver.during = func(*csi.CreateVolumeRequest) {
					s.deleteSnapshot()
					s.refresh()
					s.release()
				}
				if _, state, err := s.provision(s.cachedClaim(testClaim)); err == nil || state != controller.ProvisioningInBackground {
					s.t.Fatalf("Provision: %v %v, want a background state", state, err)
				}
				if !s.protected() {
					s.t.Fatal("the snapshot lost its protection while its restore ran")
				}
				s.driver.fail, s.driver.made, s.driver.during = nil, false, nil
				s.refresh()
				pv := s.mustRestore() // the library's retry: same volume, same snapshot
				s.savePV(pv)
				s.bindTo(pv)
				s.refresh()
				s.release()
			},
			want: snapWant{want: want{volumes: []string{testVolume}}, snapGone: true},
		},
		{
			name: "claim deleted while CreateVolume runs: the clean-up repeats the create from the recorded handle, then the snapshot is released",
			steps: func(s *snapEnv) {
				s.driver.fail, s.driver.made = timeoutErr, true
				s.driver.during = func(*csi.CreateVolumeRequest) { s.deleteClaim(testClaim) }
				s.provision(s.cachedClaim(testClaim))
				s.driver.fail, s.driver.made, s.driver.during = nil, false, nil
				s.deleteSnapshot() // the user deletes the snapshot as well
				s.refresh()
				s.release()
				if !s.protected() {
					s.t.Fatal("the snapshot was released while the deleted claim's volume was unsettled")
				}
				s.restart()
				s.settle(testClaim) // finds the volume again from the recorded handle and deletes it
				if got := s.lastSnapshotSource(); got != testHandle {
					s.t.Errorf("the clean-up's CreateVolume has snapshot %q", got)
				}
				s.refresh()
				s.release()
			},
			want: snapWant{want: want{gone: true}, snapGone: true},
		},
		{
			name: "CreateVolume fails for good: the record stays, the snapshot stays protected while the claim waits, released once the deleted claim is cleaned up",
			steps: func(s *snapEnv) {
				s.driver.fail = status.Error(codes.InvalidArgument, "bad snapshot")
				if _, state, err := s.provision(s.cachedClaim(testClaim)); err == nil || state != controller.ProvisioningFinished {
					s.t.Fatalf("Provision: %v %v, want a final error", state, err)
				}
				s.refresh()
				s.release()
				if !s.protected() {
					s.t.Fatal("released while the claim is still pending")
				}
				s.deleteClaim(testClaim)
				s.refresh()
				s.settle(testClaim) // the repeated CreateVolume fails the same: no volume
				s.refresh()
				s.release()
			},
			want: snapWant{want: want{gone: true}},
		},
		{
			name:  "restore size larger than the request: refused, nothing made",
			claim: newClaim(restoreOf(testSnap), requested("100Mi")),
			steps: func(s *snapEnv) { s.failsWith("less than the restore size") },
		},
		{
			name: "snapshot not ready: refused; taken once ready",
			steps: func(s *snapEnv) {
				s.changeSnapshot(func(snap *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
					snap.Status.ReadyToUse = ptr.To(false)
				})
				s.failsWith("not ready")
				s.changeSnapshot(func(snap *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
					snap.Status.ReadyToUse = ptr.To(true)
				})
				s.mustRestore()
			},
			want: snapWant{want: want{volumes: []string{testVolume}, record: true}, protected: true},
		},
		{
			name: "snapshot of another driver: refused",
			steps: func(s *snapEnv) {
				s.changeSnapshot(func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) { c.Spec.Driver = "other.csi" })
				s.failsWith("belongs to the driver other.csi")
			},
		},
		{
			name:  "Block from a Filesystem snapshot: refused",
			claim: newClaim(restoreOf(testSnap), volumeMode(block)),
			steps: func(s *snapEnv) { s.failsWith(request.AnnAllowVolumeModeChange) },
		},
		{
			name:  "Block from a Filesystem snapshot whose content allows the change: restored",
			claim: newClaim(restoreOf(testSnap), volumeMode(block)),
			steps: func(s *snapEnv) {
				s.changeSnapshot(func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) {
					c.Annotations = map[string]string{request.AnnAllowVolumeModeChange: "true"}
				})
				s.mustRestore()
			},
			want: snapWant{want: want{volumes: []string{testVolume}, record: true}, protected: true},
		},
		{
			name:       "Block from a Filesystem snapshot with --prevent-volume-mode-conversion=false: restored",
			claim:      newClaim(restoreOf(testSnap), volumeMode(block)),
			allowModes: true,
			steps:      func(s *snapEnv) { s.mustRestore() },
			want:       snapWant{want: want{volumes: []string{testVolume}, record: true}, protected: true},
		},
		{
			name: "a new restore from a snapshot being deleted: refused",
			steps: func(s *snapEnv) {
				s.changeSnapshot(func(snap *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
					snap.Finalizers = []string{"snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"}
				})
				s.deleteSnapshot()
				s.failsWith("is being deleted")
			},
		},
		{
			name: "snapshot deleted between the checks and the protection: the write conflicts, no CreateVolume",
			steps: func(s *snapEnv) {
				s.changeSnapshot(func(snap *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
					snap.Finalizers = []string{"snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"}
				})
				once := false
				tracker := s.snapClient.Tracker()
				// The user deletes the snapshot right after it was read
				// (through the tracker: the fake client's lock is held).
				s.snapClient.PrependReactor("get", "volumesnapshotcontents", func(k8stesting.Action) (bool, runtime.Object, error) {
					if once {
						return false, nil, nil
					}
					once = true
					obj, err := tracker.Get(snapshotsGVR, testNS, testSnap)
					if err != nil {
						return true, nil, err
					}
					snap := obj.(*snapv1.VolumeSnapshot).DeepCopy()
					now := metav1.NewTime(s.clock)
					snap.DeletionTimestamp, snap.ResourceVersion = &now, "999"
					return false, nil, tracker.Update(snapshotsGVR, snap, testNS)
				})
				if _, _, err := s.provision(s.cachedClaim(testClaim)); err == nil || !strings.Contains(err.Error(), "protecting snapshot") {
					s.t.Errorf("Provision: %v, want the protection to fail", err)
				}
				if s.driver.createCount() != 0 {
					s.t.Error("CreateVolume for an unprotected restore")
				}
			},
			// The record written before the protection stays until the
			// claim is provisioned or deleted; the driver made nothing.
			want: snapWant{want: want{record: true}},
		},
		{
			name: "a claim without the driver's CREATE_DELETE_SNAPSHOT: refused",
			steps: func(s *snapEnv) {
				s.p.o.Snapshots = false
				s.failsWith("cannot restore snapshots")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSnapEnv(newEnv(t), !tt.allowModes)
			claim := tt.claim
			if claim == nil {
				claim = newClaim(restoreOf(testSnap))
			}
			s.createClaim(claim)
			s.refresh()
			tt.steps(s)
			s.check(tt.want.want)
			if got := s.protected(); got != tt.want.protected {
				t.Errorf("snapshot protected: %v, want %v", got, tt.want.protected)
			}
			if got := s.snapshot() == nil; got != tt.want.snapGone {
				t.Errorf("snapshot gone: %v, want %v", got, tt.want.snapGone)
			}
		})
	}
}
