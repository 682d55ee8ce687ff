package upgrade

import (
	"context"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tether-csi/tether/test/cluster"
)

// snapClass is the VolumeSnapshotClass of the local driver (deletion
// policy Delete: a VolumeSnapshot deleted deletes the driver's snapshot).
const snapClass = "slow"

// snapshots are a case's VolumeSnapshots: snapshot i is snapName(of[i])
// of the claim of[i], made with the claims (so while the claim is being
// provisioned) and deleted with them.
type snapshots struct {
	e  *env
	sc snapclientset.Interface
	of []int
}

func snapName(claim int) string { return fmt.Sprintf("snap-%04d", claim) }

// startSnapshots starts the snapshot-controller (with the CRDs) and the
// csi-snapshotter on the socket of the first node's driver, and makes the
// VolumeSnapshotClass. Not the slow socket: csi-snapshotter's first
// connection gives up on a server preface that takes a second, and it
// exits ("Lost connection to CSI driver, exiting"). Both retry as the
// provisioners do, not from 1 s up to 5 minutes (a snapshot taken before
// its source is bound fails until it is), and at the provisioners' pace of
// API writes, not 5 a second.
func (e *env) startSnapshots() snapclientset.Interface {
	e.t.Helper()
	args := []string{"--retry-interval-start=200ms", "--retry-interval-max=5s", "--kube-api-qps=100", "--kube-api-burst=200",
		fmt.Sprintf("--worker-threads=%d", workers)}
	e.c.StartSnapshotController(e.t, args...)
	e.c.StartSnapshotter(e.t, "local", e.drivers[0].socket, args...)
	sc, err := snapclientset.NewForConfig(e.c.Config)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := sc.SnapshotV1().VolumeSnapshotClasses().Create(e.t.Context(), &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: snapClass},
		Driver: cluster.LocalDriver, DeletionPolicy: snapv1.VolumeSnapshotContentDelete}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return sc
}

// mixed is n claims, of each 8: two sources (0, 4) of a VolumeSnapshot
// each, two restored from those snapshots (3 from 0's, 7 from 4's), two
// plain (2, 6), and on the mock a source (1) and its clone (5). Snapshots,
// restores and clones are made at once with every claim: a restore waits,
// protected, for its snapshot, which waits for its source to bind, and a
// clone for its source to bind.
func (e *env) mixed(n int, sc snapclientset.Interface) workload {
	s := &snapshots{e: e, sc: sc}
	for i := 3; i < n; i += 4 {
		s.of = append(s.of, i-3)
	}
	return workload{n: n, snaps: s, claim: func(i int) *corev1.PersistentVolumeClaim {
		c := claim(i)
		switch i % 8 {
		case 3, 7:
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: snapName(i - 3)}
		case 1:
			c.Spec.StorageClassName = ptr.To(mockClass)
		case 5:
			c.Spec.StorageClassName = ptr.To(mockClass)
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: claim(i - 4).Name}
		}
		return c
	}}
}

func (s *snapshots) create() {
	s.e.t.Helper()
	sc := snapClass
	for _, i := range s.of {
		source := claim(i).Name
		if _, err := s.sc.SnapshotV1().VolumeSnapshots(namespace).Create(s.e.t.Context(), &snapv1.VolumeSnapshot{
			ObjectMeta: metav1.ObjectMeta{Name: snapName(i), Namespace: namespace},
			Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: &sc,
				Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &source}},
		}, metav1.CreateOptions{}); err != nil {
			s.e.t.Fatalf("create snapshot: %v", err)
		}
	}
}

// waitReady waits until every snapshot is ready to use.
func (s *snapshots) waitReady(timeout time.Duration) {
	s.e.t.Helper()
	s.e.poll(fmt.Sprintf("all %d snapshots ready", len(s.of)), timeout, func(ctx context.Context) (bool, error) {
		list, err := s.sc.SnapshotV1().VolumeSnapshots(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, v := range list.Items {
			if v.Status != nil && ptr.Deref(v.Status.ReadyToUse, false) {
				ready++
			}
		}
		return ready == len(s.of), nil
	})
}

func (s *snapshots) delete() {
	s.e.t.Helper()
	for _, i := range s.of {
		if err := s.sc.SnapshotV1().VolumeSnapshots(namespace).Delete(s.e.t.Context(), snapName(i), metav1.DeleteOptions{}); err != nil {
			s.e.t.Fatalf("delete snapshot: %v", err)
		}
	}
}

// left lists the VolumeSnapshots and VolumeSnapshotContents left, with
// their finalizers.
func (s *snapshots) left() []string {
	ctx := s.e.t.Context()
	var left []string
	snaps, err := s.sc.SnapshotV1().VolumeSnapshots(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	for _, v := range snaps.Items {
		left = append(left, fmt.Sprintf("VolumeSnapshot %s (finalizers %v)", v.Name, v.Finalizers))
	}
	contents, err := s.sc.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	for _, v := range contents.Items {
		left = append(left, fmt.Sprintf("VolumeSnapshotContent %s (finalizers %v)", v.Name, v.Finalizers))
	}
	return left
}

// stuck counts the VolumeSnapshots and contents left, a test error.
func (s *snapshots) stuck() int {
	s.e.t.Helper()
	left := s.left()
	if len(left) > 0 {
		s.e.t.Errorf("%d VolumeSnapshots and contents left stuck: %v", len(left), firstOf(left))
	}
	return len(left)
}
