package cluster

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
	c.Kubectl(t, nil, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/volumesnapshots.snapshot.storage.k8s.io", "crd/volumesnapshotcontents.snapshot.storage.k8s.io",
		"crd/volumesnapshotclasses.snapshot.storage.k8s.io")
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
