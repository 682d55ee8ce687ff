// Package doccheck checks what the documentation, the manifests, the
// alerts and the dashboards tell a reader against the repository. Each
// check is a pure function over text (or over Go files it parses) that
// returns its problems as "path:line: what"; its tests run it on the
// repository's own files in `make test`, and show it failing on a
// mutated copy of a real one.
//
//   - links.go: every relative link and anchor of the Markdown resolves,
//     by GitHub's anchor rules (and ProseLines, the lines outside fenced
//     code blocks, which the other checks read).
//   - events.go: the events lists of docs/binder.md and
//     docs/provisioner.md against the reasons the code records
//     (CodeReasons, Deps), and every reason-like word on a line of any
//     document that speaks of events (EventWords, DeclaredNames).
//   - rbac.go: docs/deploy.md's RBAC tables against deploy/csi's rules
//     and EP's rbac.yaml.
//   - demo.go: the times of make demo the README and
//     docs/development.md give against the Makefile's.
//   - tables.go: every Markdown table renders as written.
//   - metrics.go: every tether_ metric the docs, rules, dashboards and
//     manifests name is one the code registers.
//   - names.go: every *.kubernetes.io/ and tether.dev annotation, label,
//     finalizer or taint the docs name in code spans is a constant of the
//     code (CodeStrings).
//   - version.go: every place that gives tether's version gives
//     CHANGELOG.md's (ChangelogVersion, VersionRefs).
//   - matrix.go: the README's tested Kubernetes versions against what
//     docs/testing.md's make test-versions table shows passed, and the
//     pinned version (MatrixVersions, CheckMatrix).
//   - controllers.go: every kube-controller-manager --controllers value
//     that turns KCM's binder off is the one that works on kubeadm and
//     kind (KubeadmControllers, CheckControllers).
//   - install.go: the README's install section turns KCM's binder off
//     before its first kubectl apply, names the production manifest, and
//     gives each checksum line for macOS too (CheckInstall).
//   - flags.go: every flag the docs name in code spans is one a tether
//     program registers (CodeFlags) or another program's; the values and
//     defaults of the binder's and the provisioner's flags in prose are
//     internal/flagdoc's (CheckProse, from cmd/*/flags_test.go).
//   - manifests.go: the containers of deploy/ and examples/ (Containers,
//     ManifestContainers): their args name flags a tether program
//     registers (UnknownArgs), and cmd/binder, cmd/provisioner and
//     examples/local-driver parse their own containers' args with their
//     own flag sets.
package doccheck
