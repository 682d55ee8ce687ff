package integration

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// schedulerMinor is the minor version kube-scheduler reports, or 0 when it
// reports none (a build without version stamps).
func schedulerMinor(t *testing.T) int {
	t.Helper()
	path, err := cluster.Tool("kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		t.Fatalf("kube-scheduler --version: %v", err)
	}
	m := regexp.MustCompile(`v1\.(\d+)\.`).FindSubmatch(out)
	if m == nil {
		return 0
	}
	minor, _ := strconv.Atoi(string(m[1]))
	return minor
}

// TestCapacityScoring: kube-scheduler's StorageCapacityScoring (beta and on
// by default from 1.37, alpha before) reads the CSIStorageCapacity objects
// tether's provisioners publish and sends each WaitForFirstConsumer claim to
// the node with the most room left for it. node-1 is filled to 4Gi free
// first; the next claims of 1Gi all go to node-2 (10Gi free, then 9, 8...),
// one after the other, each pod deleted once its claim is bound so that no
// other score leans on the pods. Without the scoring the scheduler would
// pick between the two nodes at random.
func TestCapacityScoring(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	minor := schedulerMinor(t)
	var gates []string
	if minor < 37 {
		gates = []string{"--feature-gates=StorageCapacityScoring=true"}
	}
	t.Logf("kube-scheduler minor version %d (0: not stamped), extra flags %v", minor, gates)
	c.StartScheduler(t, gates...)
	cluster.StartLocalStack(t, c, cluster.StackOptions{})
	createCSIClass(t, c, "local", localDriver, "Delete", storagev1.VolumeBindingWaitForFirstConsumer)
	cs := c.Client
	pvcs, pods := cs.CoreV1().PersistentVolumeClaims("default"), cs.CoreV1().Pods("default")

	waitCapacity := func(node, want string) {
		t.Helper()
		eventually(t, fmt.Sprintf("%s's capacity %s", node, want), func(ctx context.Context) (bool, error) {
			q := capacityOf(ctx, cs, node)
			return q != nil && q.Cmp(resource.MustParse(want)) == 0, nil
		})
	}
	waitCapacity("node-1", "10Gi")
	waitCapacity("node-2", "10Gi")

	fill := claim("fill", "local", "6Gi")
	fill.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-1"}
	mustCreate(t, pvcs.Create, fill)
	waitClaimBound(t, cs, "fill")
	waitCapacity("node-1", "4Gi")

	zero := int64(0)
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("app-%d", i)
		mustCreate(t, pvcs.Create, claim(name, "local", "1Gi"))
		mustCreate(t, pods.Create, podWithClaim(name, name))
		bound := waitClaimBound(t, cs, name)
		if node := bound.Annotations["volume.kubernetes.io/selected-node"]; node != "node-2" {
			t.Fatalf("claim %s placed on %s with node-1 at 4Gi free and node-2 at %dGi: the scheduler did not score by capacity", name, node, 11-i)
		}
		if err := pods.Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		waitCapacity("node-2", fmt.Sprintf("%dGi", 10-i))
	}
}
