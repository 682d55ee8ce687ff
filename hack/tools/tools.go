//go:build tools

// Package tools pins the control-plane binaries that tests run against,
// and kind (make e2e-kind).
// Build them with `make tools`; see hack/tools/build.sh. The tools that
// need other versions of the Kubernetes modules (csi-test, the upstream
// external-provisioner and external-snapshotter, helm) are not here:
// build.sh builds each in its own module, at the version versions.env
// names.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/kind"
)
