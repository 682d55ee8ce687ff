package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/pkg/binder"
	"github.com/tether-csi/tether/test/cluster"
)

var foreignWrites = regexp.MustCompile(`(?m)^tether_binder_foreign_binder_writes_total\{kind="([^"]+)",manager="kube-controller-manager"\} (\d+)`)

// scrapeForeign returns the sum of tether_binder_foreign_binder_writes_total
// over kinds, and the lines it read; -1 while the endpoint is not up or the
// binder does not lead (its pv_collector gauges are served only then).
func scrapeForeign(addr string) (int, []string) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !regexp.MustCompile(`(?m)^pv_collector_total_pv_count`).Match(body) {
		return -1, nil
	}
	sum, lines := 0, []string(nil)
	for _, m := range foreignWrites.FindAllStringSubmatch(string(body), -1) {
		n, _ := strconv.Atoi(m[2])
		sum += n
		lines = append(lines, m[0])
	}
	return sum, lines
}

// anotherBinderEvents are the AnotherBinder events of the default
// namespace (the claims', and the PVs', which are cluster-scoped).
func anotherBinderEvents(ctx context.Context, cs kubernetes.Interface) ([]corev1.Event, error) {
	l, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", binder.ReasonAnotherBinder).String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// waitLeading waits until the binder at addr serves its gauges, which it
// does once it leads (a PV must exist for them to show).
func waitLeading(t *testing.T, cs kubernetes.Interface, addr string) {
	t.Helper()
	mustCreate(t, cs.CoreV1().PersistentVolumes().Create, hostPathPV("lead-marker", "lead-marker", "1Gi"))
	eventually(t, "the binder leads", func(context.Context) (bool, error) {
		n, _ := scrapeForeign(addr)
		return n >= 0, nil
	})
}

// TestAnotherBinder runs tether's binder beside kube-controller-manager's
// persistentvolume-binder-controller: both bind the same claims, and
// tether's says so (an AnotherBinder Warning event and
// tether_binder_foreign_binder_writes_total). Alone, after KCM's binder
// bound claims and was stopped first (the documented switch-over, with
// brownfield objects carrying KCM's entries), it says nothing.
func TestAnotherBinder(t *testing.T) {
	t.Run("beside KCM's binder", func(t *testing.T) {
		c := cluster.Start(t, cluster.Options{Controllers: append([]string{"persistentvolume-binder-controller"}, protectionControllers...)})
		cs := c.Client
		addr := cluster.FreeAddr(t)
		startBinder(t, c, "--http-endpoint="+addr)
		waitLeading(t, cs, addr)
		createClass(t, cs, "two", noProvisioner, storagev1.VolumeBindingImmediate, false)
		// Both binders race for each pair; KCM wins some writes. Pairs are
		// added until tether's binder has said so.
		var events []corev1.Event
		var count int
		var lines []string
		pairs := 0
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 2*pollTimeout, true, func(ctx context.Context) (bool, error) {
			if pairs < 40 {
				name := fmt.Sprintf("two-%d", pairs)
				mustCreate(t, cs.CoreV1().PersistentVolumes().Create, hostPathPV(name+"-pv", "two", "1Gi"))
				mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim(name, "two", "1Gi"))
				pairs++
			}
			var err error
			if events, err = anotherBinderEvents(ctx, cs); err != nil {
				return false, nil
			}
			count, lines = scrapeForeign(addr)
			return len(events) > 0 && count > 0, nil
		})
		if err != nil {
			t.Fatalf("after %d pairs: %d AnotherBinder events, foreign writes %d: %v", pairs, len(events), count, err)
		}
		for _, e := range events {
			t.Logf("event %s %s on %s %s: %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
			if e.Type != corev1.EventTypeWarning {
				t.Errorf("event type %s, want Warning", e.Type)
			}
		}
		t.Logf("after %d pairs, metrics: %v", pairs, lines)

		// kubectl tether why says it on a claim that KCM wrote, or whose
		// volume it wrote.
		name := ""
		for _, e := range events {
			switch e.InvolvedObject.Kind {
			case "PersistentVolumeClaim":
				name = e.InvolvedObject.Name
			case "PersistentVolume":
				if pv := getPV(t, cs, e.InvolvedObject.Name); name == "" && pv.Spec.ClaimRef != nil {
					name = pv.Spec.ClaimRef.Name
				}
			}
		}
		if name == "" {
			t.Fatal("no claim to ask about")
		}
		waitClaimBound(t, cs, name)
		out, _ := runWhyCode(t, cluster.BuildBinary(t, "./cmd/kubectl-tether"), c.Kubeconfig, "default/"+name)
		if !strings.Contains(out, "  another binder: kube-controller-manager wrote ") {
			t.Errorf("kubectl tether why %s does not say it:\n%s", name, out)
		}
		t.Logf("kubectl tether why %s:\n%s", name, out)
	})

	t.Run("alone after KCM's binder was stopped", func(t *testing.T) {
		c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
		cs := c.Client
		createClass(t, cs, "one", noProvisioner, storagev1.VolumeBindingImmediate, false)
		// Brownfield: KCM's binder binds these, and is stopped.
		kcm := c.StartControllerManager(t, append([]string{"persistentvolume-binder-controller"}, protectionControllers...))
		for i := range 5 {
			name := fmt.Sprintf("old-%d", i)
			mustCreate(t, cs.CoreV1().PersistentVolumes().Create, hostPathPV(name+"-pv", "one", "1Gi"))
			mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim(name, "one", "1Gi"))
		}
		var released string
		for i := range 5 {
			pvc := waitClaimBound(t, cs, fmt.Sprintf("old-%d", i))
			waitVolumePhase(t, cs, pvc.Spec.VolumeName, corev1.VolumeBound)
			if i == 0 {
				released = pvc.Spec.VolumeName
			}
		}
		kcm.Stop(10 * time.Second)
		// Then tether's binder: it binds new pairs, and writes to the old
		// ones (their Released volumes) as claims go.
		addr := cluster.FreeAddr(t)
		startBinder(t, c, "--http-endpoint="+addr)
		waitLeading(t, cs, addr)
		for i := range 5 {
			name := fmt.Sprintf("new-%d", i)
			mustCreate(t, cs.CoreV1().PersistentVolumes().Create, hostPathPV(name+"-pv", "one", "1Gi"))
			mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim(name, "one", "1Gi"))
		}
		deleteClaim(t, cs, "old-0")
		for i := range 5 {
			waitClaimBound(t, cs, fmt.Sprintf("new-%d", i))
		}
		waitVolumePhase(t, cs, released, corev1.VolumeReleased)
		// Two resyncs (--resync-period=5s) pass over every object.
		deadline := time.Now().Add(11 * time.Second)
		for time.Now().Before(deadline) {
			events, err := anotherBinderEvents(t.Context(), cs)
			if err != nil {
				t.Fatal(err)
			}
			count, lines := scrapeForeign(addr)
			if len(events) > 0 || count != 0 {
				t.Fatalf("alone, it fired: %d events (%v), metrics %v", len(events), events, lines)
			}
			select {
			case <-t.Context().Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
		_, lines := scrapeForeign(addr)
		t.Logf("alone: no AnotherBinder event, metrics: %v", lines)
	})
}
