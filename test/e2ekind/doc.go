// Package e2ekind runs tether on a kind cluster the way CSI developers
// test their sidecars (make e2e-kind): a control plane and two workers
// made by the kind binary, kube-controller-manager without its PV binder,
// tether installed from a release bundle by the README's own commands.
//
//   - cluster_test.go: the cluster: a docker engine (the user's, or a
//     private one here), the node image (tether's, built by test/kindnode,
//     or a public kindest/node by digest), kind create/delete, KEEP=1.
//   - install_test.go: the README's install steps, read from the README.
//   - e2ekind_test.go: the scenarios.
package e2ekind
