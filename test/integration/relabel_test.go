package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/provisioner/scope"
	"github.com/tether-csi/tether/test/cluster"
)

const relabelDriver = "relabel.csi.tether.dev"

var relistCounter = regexp.MustCompile(`(?m)^tether_provisioner_volume_relists_total (\d+)`)

// relists reads the provisioner's count of PV listings asked for by label
// changes; -1 while the endpoint does not answer.
func relists(addr string) int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := relistCounter.FindSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// allowedRelists is how many listings scope.RelistBackoff lets start in
// d when they are asked for without pause: the most the provisioner may
// have made.
func allowedRelists(d time.Duration) int {
	b := scope.RelistBackoff{Min: 2 * time.Second, Max: 5 * time.Minute}
	start := time.Time{}.Add(time.Hour)
	now, n := start, 0
	for now.Sub(start) <= d {
		now = now.Add(b.Wait(now))
		if now.Sub(start) > d {
			break
		}
		b.Started(now)
		n++
	}
	return n
}

// TestNodeLabelsFlapWithoutRestart (issue 49, defect 5): on a real API
// server, a node-deployment provisioner stays up, the same process, while
// a label of its node that no PV reads changes again and again (it used
// to exit on every change: a crash loop under a flapping label). It lists
// its PVs again no more often than its backoff allows, says so in an
// event on the node, and a Released PV pinned to another rack, which it
// left alone, is deleted once the node is moved to that rack.
func TestNodeLabelsFlapWithoutRestart(t *testing.T) {
	const flaps = 20
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	mock := startMock(t, c, relabelDriver, "")
	mustCreate(t, cs.StorageV1().CSIDrivers().Create, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: relabelDriver}})
	const nodeName, rackKey, flapKey = "relabel-node", "example.com/rack", "example.com/flap"
	mustCreate(t, cs.CoreV1().Nodes().Create, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName,
		Labels: map[string]string{rackKey: "r1", flapKey: "0"}}})
	pv := mustCreate(t, cs.CoreV1().PersistentVolumes().Create, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "relabel-later", Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": relabelDriver}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: relabelDriver, VolumeHandle: "vol-later"}},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "gone", UID: "gone-uid"},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: rackKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"r2"}}},
			}}}},
		},
	})
	pv.Status.Phase = corev1.VolumeReleased
	if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(t.Context(), pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := cluster.FreeAddr(t)
	prov := startProvisionerEnv(t, c, "relabel", mock.Socket, []string{"NODE_NAME=" + nodeName}, "--node-deployment", "--http-endpoint="+addr)
	pid := prov.Pid()
	// Synced: the PV named, not kept (its rack is not this node's).
	eventually(t, "the provisioner's PV cache synced", func(context.Context) (bool, error) {
		got := cached(addr)
		return got != nil && got["names persistentvolumes"] == 2 && got["objects persistentvolumes"] == 0, nil
	})

	relabel := func(key, value string) {
		t.Helper()
		n, err := cs.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels[key] = value
		if _, err := cs.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for i := 1; i <= flaps; i++ {
		relabel(flapKey, fmt.Sprint(i))
	}
	waitEvent(t, cs, "default", nodeName, "NodeLabelsChanged", flapKey)
	eventually(t, "a listing counted", func(context.Context) (bool, error) { return relists(addr) >= 1, nil })
	if n, most := relists(addr), allowedRelists(time.Since(start)); n > most {
		t.Errorf("%d listings after %d label changes in %s: the backoff allows %d", n, flaps, time.Since(start), most)
	}
	if _, err := cs.CoreV1().PersistentVolumes().Get(t.Context(), pv.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("PV %s of another rack: %v; want it left alone", pv.Name, err)
	}

	relabel(rackKey, "r2")
	eventually(t, "PV "+pv.Name+" deleted once its rack is this node's", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// The rack's change has a listing of its own (the one asked for
	// before may have served it already), and an event that names it.
	waitEvent(t, cs, "default", nodeName, "NodeLabelsChanged", rackKey)
	if n, most := relists(addr), allowedRelists(time.Since(start)); n < 2 || n > most {
		t.Errorf("%d listings in all after %s: want 2 to %d", n, time.Since(start), most)
	}
	if !prov.Running() || prov.Pid() != pid {
		t.Errorf("the provisioner: running %v, pid %d (was %d); want the same process up", prov.Running(), prov.Pid(), pid)
	}
}
