package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// TestBinderRestartUnbindsNothing binds pairs, restarts the binder, waits
// until the new process has synced every claim and volume, and checks that
// it wrote nothing: every object keeps its resourceVersion.
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
	// The new process syncs every claim (a no-op "bind" check) and every
	// volume at start; wait until its metrics say so.
	eventually(t, "restarted binder synced everything", func(ctx context.Context) (bool, error) {
		m := scrape(addr)
		return m["claim-bind"] >= pairs && m["volume-bound"] >= pairs, nil
	})
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
