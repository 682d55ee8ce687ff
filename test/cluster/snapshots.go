package cluster

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// The VolumeSnapshot stack of external-snapshotter (hack/tools builds it):
// the CRDs, the snapshot-controller (a process, as KCM is) and the
// csi-snapshotter sidecar next to a driver.

// StartSnapshotController installs the VolumeSnapshot CRDs, waits until the
// API server serves them, and runs the snapshot-controller.
func (c *Cluster) StartSnapshotController(t T, extraArgs ...string) *Process {
	t.Helper()
	InstallSnapshotCRDs(t, c)
	path, err := Tool("snapshot-controller")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig=" + c.Kubeconfig, "--leader-election=false", "--v=4"}, extraArgs...)
	return StartProcess(t, ProcessOptions{Name: "snapshot-controller", Path: path, Args: args, Dir: c.Dir})
}

// InstallSnapshotCRDs installs the VolumeSnapshot, VolumeSnapshotContent
// and VolumeSnapshotClass CRDs and waits until they are served.
func InstallSnapshotCRDs(t T, c *Cluster) {
	t.Helper()
	dir, err := Tool("snapshot-crds")
	if err != nil {
		t.Fatal(err)
	}
	c.Kubectl(t, nil, "apply", "-f", dir)
	// Polled, not `kubectl wait --for=condition=Established`: that fails at
	// once on a CRD whose status has no conditions yet (CI, 2026-11-27:
	// ".status.conditions accessor error: <nil>").
	Eventually(t, "the snapshot CRDs served", func(context.Context) (bool, error) {
		list, err := c.Client.Discovery().ServerResourcesForGroupVersion("snapshot.storage.k8s.io/v1")
		if err != nil {
			return false, nil
		}
		served := map[string]bool{}
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
		return served["volumesnapshots"] && served["volumesnapshotcontents"] && served["volumesnapshotclasses"], nil
	})
}

// StartSnapshotter runs the csi-snapshotter sidecar against a driver's
// socket, as the admin (or the kubeconfig in extraArgs).
func (c *Cluster) StartSnapshotter(t T, name, socket string, extraArgs ...string) *Process {
	t.Helper()
	path, err := Tool("csi-snapshotter")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig=" + c.Kubeconfig, "--csi-address=" + socket, "--leader-election=false",
		"--timeout=30s", "--v=4"}, extraArgs...)
	return StartProcess(t, ProcessOptions{Name: "csi-snapshotter-" + name, Path: path, Args: args, Dir: c.Dir})
}

// SnapshotterImage is the csi-snapshotter of the tools cache as a local
// image for real nodes (the upstream image cannot be fetched here).
const SnapshotterImage = "localhost/csi-snapshotter:e2e"

// SnapshotterNodeImage packs the tools cache's csi-snapshotter (static)
// as SnapshotterImage.
func SnapshotterNodeImage(t T) Image {
	t.Helper()
	path, err := Tool("csi-snapshotter")
	if err != nil {
		t.Fatal(err)
	}
	return Image{Ref: SnapshotterImage, Files: map[string]string{"app": path}, Entrypoint: []string{"/app"}}
}

// SnapshotsComponent sets up deploy/csi/snapshots on a cluster of real
// nodes: it starts the snapshot-controller (with the CRDs, distributed
// snapshotting on, so that each node's sidecar gets its node's contents),
// applies the component's RBAC and VolumeSnapshotClass as shipped, and
// returns the component's sidecar patch for DeployCSI with two changes, as
// deployOverlay makes for our own containers: SnapshotterImage, and the
// API server's address (these clusters have no kube-proxy to serve the
// kubernetes Service). Call it before DeployCSI: the provisioner looks for
// the snapshot API when it starts.
func (c *Cluster) SnapshotsComponent(t T) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c.StartSnapshotController(t, "--enable-distributed-snapshotting")
	dir := filepath.Join(root, "deploy", "csi", "snapshots")
	c.Kubectl(t, nil, "apply", "-f", filepath.Join(dir, "rbac-snapshotter.yaml"), "-f", filepath.Join(dir, "snapshotclass.yaml"))
	data, err := os.ReadFile(filepath.Join(dir, "snapshotter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	patch := strings.Replace(string(data), "image: csi-snapshotter", "image: "+SnapshotterImage, 1)
	patch = strings.Replace(patch, "          env:\n", fmt.Sprintf(
		"          env:\n            - {name: KUBERNETES_SERVICE_HOST, value: %q}\n            - {name: KUBERNETES_SERVICE_PORT, value: %q}\n",
		api.Hostname(), api.Port()), 1)
	if !strings.Contains(patch, SnapshotterImage) || !strings.Contains(patch, "KUBERNETES_SERVICE_HOST") {
		t.Fatalf("%s no longer has the csi-snapshotter image or an env list to set", filepath.Join(dir, "snapshotter.yaml"))
	}
	return patch
}
