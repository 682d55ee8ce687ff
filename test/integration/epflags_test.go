package integration

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tether-csi/tether/test/cluster"
)

// runProvisioner runs tether's provisioner as an administrator, with
// exactly args (and env added to the test's environment).
func runProvisioner(t *testing.T, c *cluster.Cluster, name string, args, env []string) *cluster.Process {
	t.Helper()
	path := cluster.BuildBinary(t, "./cmd/provisioner")
	return c.Run(t, cluster.ProcessOptions{Name: "provisioner-" + name, Path: path, Args: args, Env: env})
}

// leaseName is the Lease EP elects its leader on: the driver's name with
// each character but letters, digits and - made - (csi-lib-utils).
func leaseName(driver string) string {
	return regexp.MustCompile(`[^a-zA-Z0-9-]`).ReplaceAllString(driver, "-")
}

// logLines are the lines of a process's output (its stdout and stderr).
func logLines(t *testing.T, p *cluster.Process) []string {
	t.Helper()
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// With EP's --logging-format=json the provisioner writes one JSON object a
// line (component-base's format: ts, msg, v, the logger's name and the
// key/value pairs), at -v's verbosity, and provisions; with
// --leader-election-labels the Lease it holds carries the labels.
func TestProvisionerJSONLogsAndLeaseLabels(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	mock := startMock(t, c, mockName, "")
	prov := runProvisioner(t, c, "json", []string{"--kubeconfig=" + c.Kubeconfig, "--csi-address=" + mock.Socket,
		"--logging-format=json", "-v=2", "--leader-election", "--leader-election-namespace=default",
		"--leader-election-labels=a:b,c:d", "--retry-interval-start=200ms", "--retry-interval-max=2s"}, nil)
	startBinder(t, c)

	createCSIClass(t, c, "json-logs", mockName, "Delete", storagev1.VolumeBindingImmediate)
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("json-logs", "json-logs", "1Gi"))
	pvc := waitClaimBound(t, cs, "json-logs")

	lease, err := cs.CoordinationV1().Leases("default").Get(t.Context(), leaseName(mockName), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Labels["a"] != "b" || lease.Labels["c"] != "d" || len(lease.Labels) != 2 {
		t.Errorf("lease %s labels %v, want a=b and c=d", lease.Name, lease.Labels)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("lease %s has no holder", lease.Name)
	}

	var created, tooVerbose bool
	lines := logLines(t, prov)
	for _, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("not a JSON object: %s", line)
			continue
		}
		if _, ok := entry["msg"].(string); !ok {
			t.Errorf("no msg: %s", line)
		}
		if _, ok := entry["ts"].(float64); !ok {
			t.Errorf("no ts: %s", line)
		}
		if v, ok := entry["v"].(float64); ok && v > 2 {
			tooVerbose = true
		}
		if entry["msg"] == "Volume created" && entry["v"] == float64(2) && entry["volume"] == pvc.Spec.VolumeName {
			created = true
		}
	}
	if len(lines) == 0 {
		t.Fatal("the provisioner wrote nothing")
	}
	if !created {
		t.Errorf("no JSON line at v 2 says volume %s was created", pvc.Spec.VolumeName)
	}
	if tooVerbose {
		t.Error("lines above -v=2 were written")
	}
}

// EP v6.4.0's own Deployments (deploy/kubernetes/deployment.yaml and
// storage-capacity.yaml) run tether's provisioner with exactly the
// csi-provisioner container's arguments and environment. A test changes
// only what a pod would give it and a test process cannot have: the socket
// path ($(ADDRESS)) is the mock driver's, NAMESPACE and POD_NAME (fieldRefs)
// name a pod created by hand, the port of --http-endpoint=:8080 is a free
// one, and --kubeconfig stands for the in-cluster configuration. Each
// argument has its effect: --csi-address (claims are provisioned through
// that driver), --leader-election (a Lease named as EP names it is held),
// --http-endpoint (metrics and /healthz/leader-election answer on it),
// --enable-capacity with --capacity-ownerref-level=2 (CSIStorageCapacity
// objects owned by the pod's Deployment), and the default -v (no line
// above level 0).
func TestEPManifestsArgsHaveTheirEffect(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	startBinder(t, c)
	// Outside a pod tether's Lease is in kube-system (EP's: default).
	const leaseNamespace = "kube-system"

	t.Run("deployment.yaml", func(t *testing.T) {
		const driver = "deployment.mock.csi.tether.dev"
		_, container := epProvisioner(t, "deployment.yaml")
		mock := startMock(t, c, driver, "")
		args := expandArgs(container, map[string]string{"ADDRESS": mock.Socket})
		want := []string{"--csi-address=" + mock.Socket, "--leader-election", "--http-endpoint=:8080"}
		if !slices.Equal(args, want) {
			t.Fatalf("arguments %q, want %q", args, want)
		}
		_, port, err := net.SplitHostPort(cluster.FreeAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		args[2] = "--http-endpoint=:" + port
		prov := runProvisioner(t, c, "ep-deployment", append(args, "--kubeconfig="+c.Kubeconfig), nil)

		createCSIClass(t, c, "ep-deployment", driver, "Delete", storagev1.VolumeBindingImmediate)
		mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("ep-deployment", "ep-deployment", "1Gi"))
		pvc := waitClaimBound(t, cs, "ep-deployment")
		pv := getPV(t, cs, pvc.Spec.VolumeName)
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driver || !slices.Contains(mock.Volumes(t), pv.Spec.CSI.VolumeHandle) {
			t.Errorf("PV %s is not a volume of the driver on --csi-address: %+v", pv.Name, pv.Spec.CSI)
		}
		checkLease(t, c, leaseNamespace, leaseName(driver))

		for _, path := range []string{"/metrics", "/healthz/leader-election"} {
			eventually(t, path+" answers on --http-endpoint", func(ctx context.Context) (bool, error) {
				body, status := get(ctx, "http://127.0.0.1:"+port+path)
				return status == http.StatusOK && (path != "/metrics" || strings.Contains(body, "csi_sidecar_operations_seconds")), nil
			})
		}
		checkDefaultVerbosity(t, prov)
	})

	t.Run("storage-capacity.yaml", func(t *testing.T) {
		const driver = "capacity.mock.csi.tether.dev"
		dep, container := epProvisioner(t, "storage-capacity.yaml")
		// The objects a pod of this Deployment would have above it: the
		// Deployment itself (no controller acts on it here), a ReplicaSet
		// and the pod, each controlled by the one above.
		dep.Namespace = "default"
		sa := cmp.Or(dep.Spec.Template.Spec.ServiceAccountName, dep.Spec.Template.Spec.DeprecatedServiceAccount)
		mustCreate(t, cs.CoreV1().ServiceAccounts("default").Create, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}})
		dep = mustCreate(t, cs.AppsV1().Deployments("default").Create, dep)
		rs := mustCreate(t, cs.AppsV1().ReplicaSets("default").Create, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: dep.Name + "-5d8f6", Namespace: "default",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: dep.Spec.Selector, Template: dep.Spec.Template},
		})
		pod := mustCreate(t, cs.CoreV1().Pods("default").Create, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: rs.Name + "-x7k2p", Namespace: "default", Labels: dep.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
			Spec: dep.Spec.Template.Spec,
		})
		// A node that runs the driver, in a segment of its own, and a
		// class whose claims wait for their consumer: capacity is
		// published for that class in that segment.
		const zoneKey = "example.com/zone"
		mustCreate(t, cs.CoreV1().Nodes().Create, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ep-capacity-node", Labels: map[string]string{zoneKey: "z1"}}})
		mustCreate(t, cs.StorageV1().CSINodes().Create, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "ep-capacity-node"},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: "ep-capacity-node", TopologyKeys: []string{zoneKey}}}}})
		createCSIClass(t, c, "ep-capacity", driver, "Delete", storagev1.VolumeBindingWaitForFirstConsumer)

		mock := startMock(t, c, driver, "")
		values := map[string]string{"ADDRESS": mock.Socket}
		var env []string
		for _, e := range container.Env {
			switch {
			case e.Name == "NAMESPACE" && e.ValueFrom != nil:
				env = append(env, "NAMESPACE="+pod.Namespace)
			case e.Name == "POD_NAME" && e.ValueFrom != nil:
				env = append(env, "POD_NAME="+pod.Name)
			case e.ValueFrom == nil:
				env = append(env, e.Name+"="+values[e.Name])
			default:
				t.Fatalf("env %s comes from %+v, which the test does not give", e.Name, e.ValueFrom)
			}
		}
		args := expandArgs(container, values)
		want := []string{"--csi-address=" + mock.Socket, "--leader-election", "--enable-capacity", "--capacity-ownerref-level=2"}
		if !slices.Equal(args, want) {
			t.Fatalf("arguments %q, want %q", args, want)
		}
		prov := runProvisioner(t, c, "ep-capacity", append(args, "--kubeconfig="+c.Kubeconfig), env)

		var capacity *storagev1.CSIStorageCapacity
		eventually(t, "a CSIStorageCapacity of the class", func(ctx context.Context) (bool, error) {
			list, err := cs.StorageV1().CSIStorageCapacities("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for i := range list.Items {
				if list.Items[i].StorageClassName == "ep-capacity" {
					capacity = &list.Items[i]
					return true, nil
				}
			}
			return false, nil
		})
		owners := capacity.OwnerReferences
		if len(owners) != 1 || owners[0].Kind != "Deployment" || owners[0].APIVersion != "apps/v1" || owners[0].Name != dep.Name || owners[0].UID != dep.UID {
			t.Errorf("capacity %s owners %+v, want the Deployment %s", capacity.Name, owners, dep.Name)
		}
		if got := capacity.Labels["csi.storage.k8s.io/managed-by"]; got != "external-provisioner" {
			t.Errorf("capacity %s managed-by %q", capacity.Name, got)
		}
		if capacity.NodeTopology == nil || !maps.Equal(capacity.NodeTopology.MatchLabels, map[string]string{zoneKey: "z1"}) {
			t.Errorf("capacity %s topology %+v", capacity.Name, capacity.NodeTopology)
		}
		if capacity.Capacity == nil || capacity.Capacity.IsZero() {
			t.Errorf("capacity %s has no capacity: %v", capacity.Name, capacity.Capacity)
		}
		checkLease(t, c, leaseNamespace, leaseName(driver))
		checkDefaultVerbosity(t, prov)
	})
}

// checkLease waits for the Lease to be held.
func checkLease(t *testing.T, c *cluster.Cluster, namespace, name string) {
	t.Helper()
	eventually(t, "Lease "+namespace+"/"+name+" held", func(ctx context.Context) (bool, error) {
		lease, err := c.Client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})
}

// checkDefaultVerbosity fails t when the process wrote a line at a level
// above 0 (klog's text header does not show the level: a line the
// provisioner writes only at 2 or more stands for them).
func checkDefaultVerbosity(t *testing.T, p *cluster.Process) {
	t.Helper()
	for _, line := range logLines(t, p) {
		if strings.Contains(line, `"Volume created"`) {
			t.Errorf("a line at -v=2 without -v: %s", line)
		}
	}
}

// get is the body and status of a GET, 0 when it fails.
func get(ctx context.Context, url string) (string, int) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode
}
