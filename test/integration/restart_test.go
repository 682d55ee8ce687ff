package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// TestBinderRestartUnbindsNothing binds pairs, restarts the binder and
// checks that the new process writes nothing to them: every object keeps
// its resourceVersion. The pairs are settled, so the new process queues
// none of them at start (queueFirstLists): its "Binder started" line says
// queued=0, and a new pair, bound by it, shows that its workers run.
func TestBinderRestartUnbindsNothing(t *testing.T) {
	const pairs = 20
	c := cluster.Start(t, cluster.Options{})
	cs := c.Client
	addr := cluster.FreeAddr(t)
	binder := startBinder(t, c, "--http-endpoint="+addr)
	for i := range pairs {
		mustCreate(t, cs.CoreV1().PersistentVolumes().Create, hostPathPV(fmt.Sprintf("pv-%d", i), "", "1Gi"))
		mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim(fmt.Sprintf("claim-%d", i), "", "1Gi"))
	}
	for i := range pairs {
		waitClaimBound(t, cs, fmt.Sprintf("claim-%d", i))
	}
	before := resourceVersions(t, c)

	binder.Stop(pollTimeout)
	if err := binder.Start(); err != nil {
		t.Fatal(err)
	}
	var started string
	eventually(t, "restarted binder started", func(context.Context) (bool, error) {
		log, _ := os.ReadFile(binder.LogPath)
		lines := startedLine.FindAllString(string(log), -1)
		if len(lines) < 2 {
			return false, nil
		}
		started = lines[1]
		return true, nil
	})
	if !strings.Contains(started, " queued=0") {
		t.Errorf("the restarted binder queued settled pairs: %s", started)
	}
	mustCreate(t, cs.CoreV1().PersistentVolumes().Create, hostPathPV("pv-new", "", "1Gi"))
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("claim-new", "", "1Gi"))
	waitClaimBound(t, cs, "claim-new")
	m := scrape(addr)
	t.Logf("the restarted binder's syncs by operation: %v", m)
	if m["claim-bind"] >= pairs {
		t.Errorf("the restarted binder synced %d bound claims, the settled pairs among them", m["claim-bind"])
	}

	after := resourceVersions(t, c)
	for name, rv := range before {
		if after[name] != rv {
			t.Errorf("%s changed across the restart: resourceVersion %s -> %s", name, rv, after[name])
		}
	}
	for i := range pairs {
		if pvc := getClaim(t, cs, fmt.Sprintf("claim-%d", i)); pvc.Spec.VolumeName == "" || pvc.Status.Phase != "Bound" {
			t.Errorf("claim-%d: volume %q phase %s", i, pvc.Spec.VolumeName, pvc.Status.Phase)
		}
	}
}

var startedLine = regexp.MustCompile(`"Binder started".*`)

func resourceVersions(t *testing.T, c *cluster.Cluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	pvs, err := c.Client.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		out["pv/"+pv.Name] = pv.ResourceVersion
	}
	pvcs, err := c.Client.CoreV1().PersistentVolumeClaims("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pvc := range pvcs.Items {
		out["pvc/"+pvc.Name] = pvc.ResourceVersion
	}
	return out
}

var opCount = regexp.MustCompile(`(?m)^tether_binder_operation_duration_seconds_count\{operation="([^"]+)",result="success"\} (\d+)`)

// scrape returns the binder's successful sync counts by operation; empty
// while the endpoint is not up.
func scrape(addr string) map[string]int {
	out := map[string]int{}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, m := range opCount.FindAllStringSubmatch(string(body), -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}
