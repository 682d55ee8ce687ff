package benchprov

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"

	"github.com/tether-csi/tether/test/benchkit"
)

const mockTopologyKey, mockTopologyValue = "io.kubernetes.storage.mock/node", "some-mock-node"

// TestBenchWFFC: N pods, each with its own WaitForFirstConsumer claim,
// through the real kube-scheduler onto a fake node where the mock driver
// (with topology) runs; tether's pair and KCM+EP, everything at BENCH_QPS.
func TestBenchWFFC(t *testing.T) {
	if !benchEnabled() {
		t.Skip("set TETHER_BENCH=1 to run the WaitForFirstConsumer bench (make bench-wffc)")
	}
	n := benchkit.Int(t, "BENCH_N", 200, false)
	qps := benchkit.Int(t, "BENCH_QPS", 2000, false)
	pairs := []pair{{name: "tether", qps: qps}, {name: "upstream", qps: qps, upstream: true}}
	// Five rounds: a run of 200 claims lasts a few seconds, and the
	// machine's pace varies by a third from one run to the next.
	rows := runAll(t, "wffc", pairs, 5, func(t *testing.T, p pair, label string, delay time.Duration) row {
		return runWFFC(t, p, n, label, delay)
	})
	report := render(fmt.Sprintf("WaitForFirstConsumer bench: %d pods, each with its own claim, through kube-scheduler onto a fake node with the mock driver", n), rows)
	t.Log("\n" + report)
	fmt.Print(report)
}

func runWFFC(t *testing.T, p pair, n int, label string, delay time.Duration) row {
	c := cluster.Start(t, cluster.Options{EtcdDelay: delay, APIServerArgs: map[string][]string{
		"max-requests-inflight": {"2000"}, "max-mutating-requests-inflight": {"1000"}}})
	bc := benchClients(t, c)
	// The later --kubeconfig wins over the cluster's own.
	c.StartScheduler(t, fmt.Sprintf("--kube-api-qps=%d", p.qps), fmt.Sprintf("--kube-api-burst=%d", 2*p.qps), "--kubeconfig="+bc.kubeconfig)
	if err := cluster.AddFakeNode(t.Context(), c.Client, cluster.FakeNode{Name: "node-1",
		Labels: map[string]string{mockTopologyKey: mockTopologyValue}, Driver: driverName, TopologyKeys: []string{mockTopologyKey}}); err != nil {
		t.Fatal(err)
	}
	binder, prov := startPair(t, c, p, bc, "-enable-topology")
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Provisioner: driverName, VolumeBindingMode: &mode}
	if _, err := c.Client.StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podOf := func(i int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Namespace: "default"}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("claim-%05d", i)}}}}}}
	}
	return measure(t, c, bc, p, n, label, "late", podOf, binder, prov)
}
