package monitoring

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/test/cluster"
)

// The test's drivers: the csi-test mock, once working (but for one failed
// DeleteVolume) and once failing every CreateVolume.
const (
	okDriver     = "ok.monitoring.tether.dev"
	brokenDriver = "broken.monitoring.tether.dev"
	brokenNode   = "node-1"
	firingAlert  = "TetherProvisioningFailing"
)

// okHooks fail the ok driver's first DeleteVolume, once.
const okHooks = `globals: |
  deletes = 0;
deleteVolumeStart: |
  deletes = deletes + 1;
  if (deletes == 1) { INTERNAL; } else { OK; };
`

// notScrapedHere are the documented families the test's stack does not
// make appear: each only once something happens that it does not cause.
// Every other documented family must be served.
var notScrapedHere = map[string]string{
	"rest_client_exec_plugin_call_total":          "kubeconfig exec plugins only",
	"rest_client_exec_plugin_policy_call_total":   "kubeconfig exec plugins only",
	"rest_client_request_retries_total":           "a retried API request only",
	"rest_client_transport_ca_reload_total":       "a CA file reloaded only",
	"rest_client_transport_cache_gc_calls_total":  "transport cache collection only",
	"rest_client_dns_resolution_duration_seconds": "API server addresses by name only",
	"leader_election_slowpath_total":              "a Lease renewal on the slow path only",
}

// TestMonitoring runs a binder and two provisioners on a control plane:
// one provisioner (leader-elected, centralized) on a working mock driver,
// one in node-deployment mode on a mock whose every CreateVolume fails.
// It checks, on the same stack (without prometheus, outside CI and make
// test, all but the alert):
//   - every metric family the binaries serve is in docs/metrics.md, with
//     its type, labels and component, and every documented one is served;
//   - node mode's /healthz follows the CSI connection;
//   - a real Prometheus scraping them with deploy/monitoring's rules (a
//     test copy with short windows) fires TetherProvisioningFailing;
//   - that Prometheus runs every query of deploy/monitoring/dashboard.json,
//     each naming only metrics the binaries serve.
func TestMonitoring(t *testing.T) {
	docs := readDocMetrics(t)
	rules := allRules(t)
	if !slices.Contains(alertNames(rules), firingAlert) {
		t.Fatalf("deploy/monitoring's rules have no %s", firingAlert)
	}
	// Without prometheus the alert is not tried (and in CI or make test,
	// the test fails now); the rest runs.
	promBin, noProm := lookTool("prometheus")
	if noProm != "" && inMakeTest() {
		t.Fatal(noProm)
	}

	c := cluster.Start(t, cluster.Options{Controllers: []string{"persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller"}})
	cs := c.Client
	ctx := t.Context()
	if err := cluster.AddFakeNode(ctx, cs, cluster.FakeNode{Name: brokenNode, Driver: brokenDriver}); err != nil {
		t.Fatal(err)
	}
	ok := cluster.StartMockDriver(t, c, okDriver, okHooks)
	broken := cluster.StartMockDriver(t, c, brokenDriver, "createVolumeStart: INVALIDARGUMENT\n")

	addrs := map[string]string{"binder": cluster.FreeAddr(t), "provisioner-ok": cluster.FreeAddr(t), "provisioner-broken": cluster.FreeAddr(t)}
	leader := func(prefix string) []string {
		return []string{"--" + prefix + "=true", "--" + prefix + "-lease-duration=4s", "--" + prefix + "-renew-deadline=3s", "--" + prefix + "-retry-period=500ms"}
	}
	binderBin, provBin := cluster.BuildBinary(t, "./cmd/binder"), cluster.BuildBinary(t, "./cmd/provisioner")
	c.Run(t, cluster.ProcessOptions{Name: "binder", Path: binderBin, Args: append([]string{"--kubeconfig=" + c.Kubeconfig,
		"--resync-period=5s", "--leader-elect-resource-namespace=default", "--http-endpoint=" + addrs["binder"], "-v=4"}, leader("leader-elect")...)})
	common := []string{"--kubeconfig=" + c.Kubeconfig, "--retry-interval-start=200ms", "--retry-interval-max=2s", "-v=4"}
	c.Run(t, cluster.ProcessOptions{Name: "provisioner-ok", Path: provBin, Args: append(append([]string{"--csi-address=" + ok.Socket,
		"--leader-election-namespace=default", "--http-endpoint=" + addrs["provisioner-ok"]}, common...), leader("leader-election")...)})
	brokenProv := c.Run(t, cluster.ProcessOptions{Name: "provisioner-broken", Path: provBin, Env: []string{"NODE_NAME=" + brokenNode},
		Args: append([]string{"--csi-address=" + broken.Socket, "--node-deployment", "--leader-election=false",
			"--http-endpoint=" + addrs["provisioner-broken"]}, common...)})

	var prom *prometheus
	if noProm == "" {
		prom = startPrometheus(t, c, promBin, shortRules(rules, "5s", "1m"),
			scrapeJob{"tether-binder", []string{addrs["binder"]}},
			scrapeJob{"tether-provisioner", []string{addrs["provisioner-ok"], addrs["provisioner-broken"]}})
		waitFor(t, "Prometheus scraping the binder and both provisioners", 2*time.Minute, func(ctx context.Context) (bool, error) {
			health, err := prom.targetsUp(ctx)
			if err != nil {
				return false, nil
			}
			n := 0
			for _, h := range health {
				if h == "up" {
					n++
				}
			}
			return n == 3, nil
		})
	}

	// The failing claim: a WaitForFirstConsumer claim placed on the
	// broken driver's node, as the scheduler would.
	createClass(t, cs, "broken", brokenDriver, storagev1.VolumeBindingWaitForFirstConsumer)
	failing := newClaim("failing", "broken")
	failing.Annotations = map[string]string{"volume.kubernetes.io/selected-node": brokenNode}
	mustCreate(t, cs, failing)
	failingSince := time.Now()

	// A claim provisioned, bound, then deleted with its volume; one that
	// stays bound; a PV that no claim wants.
	createClass(t, cs, "ok", okDriver, storagev1.VolumeBindingImmediate)
	mustCreate(t, cs, newClaim("works", "ok"))
	mustCreate(t, cs, newClaim("stays", "ok"))
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, unclaimedPV("unclaimed"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvName := waitBound(t, cs, "works")
	waitBound(t, cs, "stays")
	if err := cs.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "works", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the PV deleted", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return err != nil, nil
	})

	t.Run("alert fires", func(t *testing.T) {
		if prom == nil {
			t.Skip(noProm)
		}
		var fired promAlert
		waitFor(t, firingAlert+" firing", 3*time.Minute, func(ctx context.Context) (bool, error) {
			alerts, err := prom.alerts(ctx)
			if err != nil {
				return false, nil
			}
			for _, a := range alerts {
				if a.Labels["alertname"] == firingAlert && a.State == "firing" {
					fired = a
					return true, nil
				}
			}
			return false, nil
		})
		t.Logf("%s firing %s after the failing claim was made (labels %v, value %s, active since %s)",
			firingAlert, time.Since(failingSince).Round(time.Second), fired.Labels, fired.Value, fired.ActiveAt.Format(time.RFC3339))
		if fired.Labels["class"] != "broken" || fired.Labels["severity"] != "warning" {
			t.Errorf("%s labels %v, want class broken, severity warning", firingAlert, fired.Labels)
		}
		// Nothing else is wrong on this stack.
		alerts, err := prom.alerts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			if a.Labels["alertname"] != firingAlert {
				t.Errorf("alert %s is %s too (labels %v)", a.Labels["alertname"], a.State, a.Labels)
			}
		}
	})

	t.Run("dashboard queries", func(t *testing.T) {
		if prom == nil {
			t.Skip(noProm)
		}
		served := map[string]string{} // family: type
		for proc, addr := range addrs {
			families, err := scrape(t.Context(), addr)
			if err != nil {
				t.Fatalf("%s: %v", proc, err)
			}
			for name, f := range families {
				served[name] = strings.ToLower(f.GetType().String())
			}
		}
		checkDashboardOnPrometheus(t, prom, served)
	})

	t.Run("metrics documented", func(t *testing.T) {
		for name, reason := range notScrapedHere {
			if _, ok := docs[name]; !ok {
				t.Errorf("notScrapedHere names %s (%s), which docs/metrics.md does not list", name, reason)
			}
		}
		seen := map[string]map[string]bool{"binder": {}, "provisioner": {}}
		for proc, addr := range addrs {
			component := strings.SplitN(proc, "-", 2)[0]
			families, err := scrape(t.Context(), addr)
			if err != nil {
				t.Fatalf("%s: %v", proc, err)
			}
			for name := range checkScraped(t, docs, component, families) {
				seen[component][name] = true
			}
		}
		var missing []string
		for name, m := range docs {
			if _, skip := notScrapedHere[name]; skip {
				continue
			}
			for _, component := range m.components {
				if !seen[component][name] {
					missing = append(missing, component+" "+name)
				}
			}
		}
		sort.Strings(missing)
		for _, m := range missing {
			t.Errorf("docs/metrics.md lists %s, which it does not serve here (if it appears only on some event, say so in notScrapedHere)", m)
		}
	})

	t.Run("node mode healthz follows the CSI driver", func(t *testing.T) {
		healthz := "http://" + addrs["provisioner-broken"] + "/healthz"
		expect := func(what string, want int, body string) {
			t.Helper()
			waitFor(t, what, time.Minute, func(ctx context.Context) (bool, error) {
				code, got, err := httpGet(ctx, healthz)
				return err == nil && code == want && strings.Contains(got, body), nil
			})
		}
		expect("/healthz ok with the driver up", http.StatusOK, "ok")
		broken.Proc.Kill()
		expect("/healthz failing on csi with the driver gone", http.StatusServiceUnavailable, "csi:")
		if code, body, err := httpGet(t.Context(), "http://"+addrs["provisioner-broken"]+"/healthz/csi"); err != nil || code != http.StatusServiceUnavailable {
			t.Errorf("/healthz/csi with the driver gone: %d %q %v", code, body, err)
		}
		if err := broken.Proc.Start(); err != nil {
			t.Fatal(err)
		}
		expect("/healthz ok with the driver back", http.StatusOK, "ok")
		if !brokenProv.Running() {
			t.Error("the provisioner exited while its driver was away")
		}
	})
}

func createClass(t *testing.T, cs kubernetes.Interface, name, driver string, mode storagev1.VolumeBindingMode) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: driver, VolumeBindingMode: &mode}
	if _, err := cs.StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func newClaim(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
}

// unclaimedPV is a static PV of a class no claim uses.
func unclaimedPV(name string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              "manual",
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}
}

func mustCreate(t *testing.T, cs kubernetes.Interface, claim *corev1.PersistentVolumeClaim) {
	t.Helper()
	if _, err := cs.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitBound waits for the claim to be Bound and returns its volume's name.
func waitBound(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	var volume string
	waitFor(t, "claim "+name+" Bound", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pvc, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		volume = pvc.Spec.VolumeName
		return pvc.Status.Phase == corev1.ClaimBound, nil
	})
	return volume
}
