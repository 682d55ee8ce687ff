package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tether-csi/tether/test/cluster"
)

// TestStorageListsAndWatchesCounted: the cluster's audit log counts each
// user's lists and watches of claims and PVs, which the benches report to
// say whose watches the API server closed.
func TestStorageListsAndWatchesCounted(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	pvcs := c.Client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll)
	for range 2 {
		if _, err := pvcs.List(t.Context(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.Client.CoreV1().PersistentVolumes().Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got map[string]int
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got, err = c.StorageListsAndWatches()
		return count(got, " list persistentvolumeclaims") >= 2 && count(got, " watch persistentvolumes") >= 1, err
	})
	if err != nil {
		t.Fatalf("counts %v: %v", got, err)
	}
	t.Logf("counts %v", got)
}

// count sums the counts whose key ends in suffix.
func count(counts map[string]int, suffix string) int {
	n := 0
	for k, v := range counts {
		if strings.HasSuffix(k, suffix) {
			n += v
		}
	}
	return n
}
