package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/test/cluster"
)

// What deleting volumes costs (issue 25, part 8), beside a driver that has
// no PUBLISH_UNPUBLISH_VOLUME but whose CSIDriver leaves attachRequired at
// its default, so that the attach/detach controller keeps VolumeAttachments
// for its volumes (made here by the test, and deleted a while after the
// claims): DeleteVolume calls per volume, the time from Released to PV
// gone, and Warning events; and five clones of one source made at once.
// The same scenario runs against external-provisioner v6.4.0 with KCM's
// binder, for the figures beside tether's.

const (
	costVolumes = 30
	costDriver  = "cost.csi.tether.dev"
	costClones  = 5
)

// deleteCost is what one run measured.
type deleteCost struct {
	volumes int
	// calls[n] is how many volumes got n DeleteVolume calls.
	calls map[int]int
	// latencies are the times from Released to PV gone.
	latencies []time.Duration
	// goneBeforeDetach: every PV was gone before the detach.
	goneBeforeDetach bool
	// warnings counts Warning events (with their repeats) by reason;
	// volumeDelete the Normal VolumeDelete events of waits for detach.
	warnings     map[string]int
	volumeDelete int
	// cloneConflicts: Warning ProvisioningFailed events of the clones
	// that name a conflict.
	cloneConflicts, cloneWarnings int
}

func (d deleteCost) maxCalls() int { return slices.Max(slices.Collect(maps.Keys(d.calls))) }

func (d deleteCost) percentile(p float64) time.Duration {
	s := slices.Clone(d.latencies)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

func (d deleteCost) String() string {
	return fmt.Sprintf("%d volumes; DeleteVolume calls per volume (calls: volumes) %v; Released to PV gone p50 %s, max %s; "+
		"all gone before the detach %v; Warning events %v; Normal VolumeDelete %d; clones: %d Warning ProvisioningFailed, %d of them conflicts",
		d.volumes, d.calls, d.percentile(0.5).Round(time.Millisecond), d.percentile(1).Round(time.Millisecond),
		d.goneBeforeDetach, d.warnings, d.volumeDelete, d.cloneWarnings, d.cloneConflicts)
}

// costStack starts a control plane with KCM's protection controllers, the
// mock driver (mockArgs) behind a counting proxy, and tether's provisioner
// and binder, or (upstream) external-provisioner v6.4.0 and KCM's binder.
func costStack(t *testing.T, upstream bool, epArgs []string, mockArgs ...string) (*cluster.Cluster, *countingProxy) {
	t.Helper()
	controllers := protectionControllers
	if upstream {
		controllers = append([]string{"persistentvolume-binder-controller"}, protectionControllers...)
	}
	c := cluster.Start(t, cluster.Options{Controllers: controllers})
	mock := startMock(t, c, costDriver, "", mockArgs...)
	proxy := startCountingProxy(t, mock.Socket)
	// attachRequired left at its default (true).
	mustCreate(t, c.Client.StorageV1().CSIDrivers().Create, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: costDriver}})
	if upstream {
		ep, err := cluster.Tool("csi-provisioner")
		if err != nil {
			t.Skip(err)
		}
		c.Run(t, cluster.ProcessOptions{Name: "external-provisioner", Path: ep,
			Args: append([]string{"--kubeconfig=" + c.Kubeconfig, "--csi-address=" + proxy.Socket, "--leader-election=false", "-v=3"}, epArgs...)})
	} else {
		startProvisioner(t, c, "cost", proxy.Socket)
		startBinder(t, c)
	}
	createCSIClass(t, c, "cost", costDriver, "Delete", storagev1.VolumeBindingImmediate)
	return c, proxy
}

// measureDeletes makes n claims, attaches their PVs, deletes the claims,
// detaches the PVs detachAfter later, and measures until every PV is gone.
func measureDeletes(t *testing.T, c *cluster.Cluster, proxy *countingProxy, n int, detachAfter time.Duration) deleteCost {
	t.Helper()
	cs := c.Client
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	for i := range n {
		mustCreate(t, pvcs.Create, claim(fmt.Sprintf("cost-%d", i), "cost", "1Gi"))
	}
	var pvNames []string
	for i := range n {
		pvNames = append(pvNames, waitClaimBound(t, cs, fmt.Sprintf("cost-%d", i)).Spec.VolumeName)
	}
	for _, pv := range pvNames {
		mustCreate(t, cs.StorageV1().VolumeAttachments().Create, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-" + pv},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: costDriver, NodeName: "node-1",
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}}})
	}

	// Released and gone, as a watch sees them.
	var mu sync.Mutex
	released, gone := map[string]time.Time{}, map[string]time.Time{}
	factory := informers.NewSharedInformerFactory(cs, 0)
	pvInf := factory.Core().V1().PersistentVolumes().Informer()
	_, _ = pvInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Status.Phase == corev1.VolumeReleased {
				mu.Lock()
				if _, ok := released[pv.Name]; !ok {
					released[pv.Name] = time.Now()
				}
				mu.Unlock()
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pv, ok := obj.(*corev1.PersistentVolume); ok {
				mu.Lock()
				gone[pv.Name] = time.Now()
				mu.Unlock()
			}
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pvInf.HasSynced) {
		t.Fatal("PV informer not synced")
	}

	for i := range n {
		deleteClaim(t, cs, fmt.Sprintf("cost-%d", i))
	}
	detached := make(chan time.Time, 1)
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(detachAfter):
		}
		for _, pv := range pvNames {
			err := cs.StorageV1().VolumeAttachments().Delete(ctx, "va-"+pv, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				t.Errorf("detach %s: %v", pv, err)
			}
		}
		detached <- time.Now()
	}()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*pollTimeout, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(gone) == n, nil
	})
	if err != nil {
		t.Fatalf("%d of %d PVs gone: %v", len(gone), n, err)
	}
	out := deleteCost{volumes: n, calls: map[int]int{}, warnings: map[string]int{}}
	mu.Lock()
	last := time.Time{}
	for _, pv := range pvNames {
		if r, ok := released[pv]; ok {
			out.latencies = append(out.latencies, gone[pv].Sub(r))
		} else {
			t.Errorf("PV %s: no Released phase seen", pv)
		}
		if gone[pv].After(last) {
			last = gone[pv]
		}
	}
	mu.Unlock()
	select {
	case at := <-detached:
		out.goneBeforeDetach = last.Before(at)
	default:
		out.goneBeforeDetach = true
	}
	perVolume := proxy.deleteCalls()
	if len(perVolume) != n {
		t.Errorf("DeleteVolume reached %d volumes, want %d", len(perVolume), n)
	}
	for _, calls := range perVolume {
		out.calls[calls]++
	}
	return out
}

// makeClones makes one source claim and, once it is bound, costClones
// clones of it at once, and waits until every clone is bound.
func makeClones(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	pvcs := c.Client.CoreV1().PersistentVolumeClaims("default")
	mustCreate(t, pvcs.Create, claim("clone-src", "cost", "1Gi"))
	waitClaimBound(t, c.Client, "clone-src")
	for i := range costClones {
		cl := claim(fmt.Sprintf("clone-%d", i), "cost", "1Gi")
		cl.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "clone-src"}
		mustCreate(t, pvcs.Create, cl)
	}
	for i := range costClones {
		waitClaimBound(t, c.Client, fmt.Sprintf("clone-%d", i))
	}
}

// countEvents adds the events about claims and volumes to d: Warnings by
// reason (with their repeats), Normal VolumeDelete, and the clones'
// Warnings. Events about other objects are the control plane's own (the
// apiserver's Service IP repair may warn ClusterIPNotAllocated about the
// default kubernetes Service while it starts) and are not counted.
func countEvents(t *testing.T, c *cluster.Cluster, d *deleteCost) {
	t.Helper()
	list, err := c.Client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if k := e.InvolvedObject.Kind; k != "PersistentVolumeClaim" && k != "PersistentVolume" {
			continue
		}
		n := max(int(e.Count), 1)
		switch {
		case e.Type == corev1.EventTypeWarning:
			d.warnings[e.Reason] += n
			if strings.HasPrefix(e.InvolvedObject.Name, "clone-") && e.Reason == "ProvisioningFailed" {
				d.cloneWarnings += n
				if strings.Contains(e.Message, "the object has been modified") || strings.Contains(strings.ToLower(e.Message), "conflict") {
					d.cloneConflicts += n
				}
			}
		case e.Reason == provisioner.ReasonVolumeDelete:
			d.volumeDelete += n
		}
	}
}

// TestDeleteCost: beside a driver without PUBLISH_UNPUBLISH_VOLUME, an
// attached volume is deleted at once (as external-provisioner does), with
// one DeleteVolume and no Warning; five clones of one source make no
// conflict Warning. The same run against external-provisioner v6.4.0 and
// KCM's binder gives the figures to compare: with EP's own client rate
// (5 queries a second, bursts of 10), and with tether's (1000, 2000).
func TestDeleteCost(t *testing.T) {
	const detachAfter = 10 * time.Second
	var results []string
	for _, stack := range []struct {
		name     string
		upstream bool
		epArgs   []string
	}{
		{name: "tether"},
		{name: "external-provisioner v6.4.0 and KCM", upstream: true},
		{name: "external-provisioner v6.4.0 at tether's client rate, and KCM", upstream: true,
			epArgs: []string{"--kube-api-qps=1000", "--kube-api-burst=2000"}},
	} {
		name, upstream := stack.name, stack.upstream
		t.Run(name, func(t *testing.T) {
			c, proxy := costStack(t, upstream, stack.epArgs, "-disable-attach")
			d := measureDeletes(t, c, proxy, costVolumes, detachAfter)
			makeClones(t, c)
			countEvents(t, c, &d)
			t.Logf("%s: %s", name, d)
			results = append(results, name+": "+d.String())
			if upstream {
				return
			}
			if d.maxCalls() > 1 {
				t.Errorf("a volume got %d DeleteVolume calls, want 1 each", d.maxCalls())
			}
			if !d.goneBeforeDetach {
				t.Error("attachments held the deletion back, with a driver without PUBLISH_UNPUBLISH_VOLUME")
			}
			if len(d.warnings) > 0 {
				t.Errorf("Warning events %v, want none", d.warnings)
			}
			if d.cloneWarnings > 0 {
				t.Errorf("%d Warning ProvisioningFailed on the clones (%d conflicts), want none", d.cloneWarnings, d.cloneConflicts)
			}
		})
	}
	for _, r := range results {
		t.Log(r)
	}
}

// TestDeleteWaitsForDetach: beside a driver with PUBLISH_UNPUBLISH_VOLUME,
// a PV's volume is deleted once it is detached, with one DeleteVolume, a
// Normal VolumeDelete event and no Warning while it waits.
func TestDeleteWaitsForDetach(t *testing.T) {
	const n, detachAfter = 10, 3 * time.Second
	c, proxy := costStack(t, false, nil)
	d := measureDeletes(t, c, proxy, n, detachAfter)
	countEvents(t, c, &d)
	t.Logf("tether, PUBLISH_UNPUBLISH_VOLUME: %s", d)
	if d.maxCalls() > 1 {
		t.Errorf("a volume got %d DeleteVolume calls, want 1 each", d.maxCalls())
	}
	if d.goneBeforeDetach {
		t.Error("PVs were deleted while attached")
	}
	if d.volumeDelete == 0 {
		t.Error("no Normal VolumeDelete event for the waits")
	}
	if len(d.warnings) > 0 {
		t.Errorf("Warning events %v, want none", d.warnings)
	}
}
