// Package kindnode builds tether's kind node image: a Kubernetes node that
// `kind create cluster --image` can boot, assembled on a machine with no
// registry from Debian packages and the pinned Kubernetes release, the
// same bytes for the same commit.
//
//   - node.go: Build, the image's two layers and its config, written as a
//     docker-archive for `docker load`.
//   - rootfs.go: the Debian root filesystems (mmdebstrap), cached by what
//     they are made of.
//   - binaries.go: kubeadm, kubelet, kubectl and the control-plane
//     programs from hack/tools' module, version-stamped; the pause program.
//   - images.go: the control-plane images kubeadm runs, in one archive the
//     node imports into containerd at boot (files/bin/import-images).
//   - layer.go: deterministic tar layers from files.
//   - files/: what the node runs: the entrypoint (kind's contract: cgroups,
//     mounts, the log line kind waits for), systemd units, containerd's
//     configuration and the pod network service.
package kindnode
