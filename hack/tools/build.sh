#!/usr/bin/env bash
# Builds the pinned tools that tests run against into one cache folder.
# Usage: hack/tools/build.sh [BIN_DIR [SET]]   (default: .cache/tools/bin, all)
# SET is all (make tools: every tool), demo (make demo: the ones the demo
# runs, etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, and kubelet when run as root, since only root gets real nodes)
# or kind (make e2e-kind: kind and kubectl).
# A tool already present is not built again; delete it to rebuild. Each
# build says how long it took.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/.cache/tools/bin}
set=${2:-all}
case $set in
  all) only="" ;;
  demo) only="etcd kube-apiserver kube-controller-manager kube-scheduler kubectl"
        [ "$(id -u)" = 0 ] && only+=" kubelet" ;;
  kind) only="kind kubectl" ;;
  *) echo "hack/tools/build.sh: unknown set $set (all, demo or kind)" >&2; exit 2 ;;
esac
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

# The tools module must agree with versions.env.
check_mod() {
  local mod=$1 want=$2 got
  got=$(awk -v m="$mod" '$1==m && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
  if [ "$got" != "$want" ]; then
    echo "hack/tools/go.mod requires $mod $got, but versions.env says $want" >&2; exit 1
  fi
}
check_mod k8s.io/kubernetes "$KUBERNETES_VERSION"
check_mod go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
check_mod sigs.k8s.io/kind "$KIND_VERSION"
if grep -E '^\s+k8s.io/[a-z0-9-]+ => ' "$here/go.mod" | grep -v " $STAGING_VERSION\$" >&2; then
  echo "hack/tools/go.mod: the staging replaces above are not at $STAGING_VERSION" >&2; exit 1
fi

# missing: whether one of the named tools is in the set and not built yet.
missing() {
  for t in "$@"; do
    [ -z "$only" ] || [[ " $only " == *" $t "* ]] || continue
    [ -x "$bin/$t" ] || return 0
  done
  return 1
}
# took: how long the build since the last mark took (bash's SECONDS).
mark() { started=$SECONDS; }
took() { local s=$((SECONDS - started)); printf '   took %dm%02ds\n' $((s / 60)) $((s % 60)); }

# kind, for make e2e-kind (test/kind runs it against a docker engine).
if missing kind; then
  mark
  echo ">> building kind $KIND_VERSION (about 10 s)"
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$bin/kind" sigs.k8s.io/kind)
  took
fi

k8s_tools=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
if missing "${k8s_tools[@]}" etcd; then
  mark
  echo ">> building etcd $ETCD_VERSION and ${k8s_tools[*]} from k8s.io/kubernetes $KUBERNETES_VERSION"
  echo "   (the first build takes about 10 minutes on 2 cores; later runs reuse $bin)"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  (cd "$here" && GOBIN="$tmp" go install -trimpath \
      go.etcd.io/etcd/server/v3 \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
  mv "$tmp/server" "$bin/etcd"   # go names the etcd server module's binary "server"
  for t in "${k8s_tools[@]}"; do mv "$tmp/$t" "$bin/$t"; done
  took
fi

# kubelet, for the real nodes of test/cluster (containerd, runc and the CNI
# plugins come from Debian). Built alone so that an existing cache gains it
# without rebuilding the rest; the version flags make the node report it.
if missing kubelet; then
  mark
  echo ">> building kubelet $KUBERNETES_VERSION (about 3 minutes cold, 30 s with the other tools' build cache)"
  minor=${KUBERNETES_VERSION#v*.}; minor=${minor%%.*}
  vpkg=k8s.io/component-base/version
  (cd "$here" && go build -trimpath -o "$bin/kubelet" \
      -ldflags "-X $vpkg.gitVersion=$KUBERNETES_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor" \
      k8s.io/kubernetes/cmd/kubelet)
  took
fi

# Builds one main package inside a copy of its own module, so that the
# module's own go.mod (and replace lines) decide every dependency version.
# (`go install pkg@version` would do the same, but it asks the proxy for the
# module's version list, which the proxy here refuses for some modules.)
# Extra arguments go to go build (-ldflags ...).
build_in_module() {
  local mod=$1 version=$2 pkg=$3 out=$4 src work
  shift 4
  src=$(go mod download -json "$mod@$version" | awk -F'"' '/"Dir"/ {print $4}')
  [ -n "$src" ] || { echo "cannot download $mod@$version" >&2; return 1; }
  work=$(mktemp -d)
  cp -r "$src/." "$work/"; chmod -R u+w "$work"
  (cd "$work" && GOFLAGS=-mod=mod go build -trimpath "$@" -o "$bin/$out" "./$pkg")
  rm -rf "$work"
}

# Helm, in its own module: it requires the Kubernetes v0.37 modules, this
# module pins v0.36. The flags are those of Helm's own Makefile: its
# version, and the Kubernetes version its client modules are (what helm
# template and helm lint assume of the cluster).
if missing helm; then
  mark
  echo ">> building helm $HELM_VERSION (about 2 minutes on 2 cores)"
  helm_mod=helm.sh/helm/v3
  kminor=$(go mod download -json "$helm_mod@$HELM_VERSION" | awk -F'"' '/"GoMod"/ {print $4}' |
    xargs awk '$1=="k8s.io/client-go" {split($2, v, "."); print v[2]; exit}')
  [ -n "$kminor" ] || { echo "cannot read k8s.io/client-go's version from $helm_mod@$HELM_VERSION's go.mod" >&2; exit 1; }
  CGO_ENABLED=0 build_in_module "$helm_mod" "$HELM_VERSION" cmd/helm helm -ldflags "-s -w
    -X $helm_mod/internal/version.version=$HELM_VERSION -X $helm_mod/internal/version.metadata=
    -X $helm_mod/pkg/lint/rules.k8sVersionMajor=1 -X $helm_mod/pkg/lint/rules.k8sVersionMinor=$kminor
    -X $helm_mod/pkg/chartutil.k8sVersionMajor=1 -X $helm_mod/pkg/chartutil.k8sVersionMinor=$kminor"
  took
fi

if missing csi-sanity; then
  mark
  echo ">> building csi-sanity $CSI_SANITY_VERSION"
  build_in_module github.com/kubernetes-csi/csi-test/v5 "$CSI_SANITY_VERSION" cmd/csi-sanity csi-sanity
  took
fi

if missing mock-driver; then
  mark
  echo ">> building the csi-test mock driver $MOCK_DRIVER_VERSION"
  build_in_module github.com/kubernetes-csi/csi-test/v4 "$MOCK_DRIVER_VERSION" cmd/mock-driver mock-driver
  took
fi

if missing csi-provisioner; then
  mark
  echo ">> building the upstream external-provisioner $EXTERNAL_PROVISIONER_VERSION (comparison only)"
  # Static: make conformance also runs it in a node's pod, from an image
  # that holds nothing but the binary.
  CGO_ENABLED=0 build_in_module github.com/kubernetes-csi/external-provisioner/v6 "$EXTERNAL_PROVISIONER_VERSION" cmd/csi-provisioner csi-provisioner
  took
fi

# Kubernetes' e2e suite (make conformance runs its External Storage tests
# against the local driver) and agnhost, the test image its storage tests
# run; test/cluster packs agnhost into a local image under the suite's
# reference. agnhost is static: the image holds nothing but busybox.
if missing e2e.test; then
  mark
  echo ">> building e2e.test from k8s.io/kubernetes $KUBERNETES_VERSION (about 10 minutes cold on 2 cores)"
  (cd "$here" && go test -c -trimpath -o "$bin/e2e.test" k8s.io/kubernetes/test/e2e)
  took
fi
if missing agnhost; then
  mark
  echo ">> building agnhost from k8s.io/kubernetes $KUBERNETES_VERSION"
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$bin/agnhost" k8s.io/kubernetes/test/images/agnhost)
  took
fi

# The VolumeSnapshot stack, for restores: the snapshot-controller and the
# csi-snapshotter sidecar (static: the real nodes run the sidecar from an
# image that holds nothing but the binary), and the snapshot CRDs from the
# client module of the same release, copied into $bin/snapshot-crds.
# The release's go.mod replaces its client module with ./client, which the
# module download does not hold: the same client release comes from the
# proxy instead.
if missing snapshot-controller csi-snapshotter; then
  mark
  echo ">> building snapshot-controller and csi-snapshotter $EXTERNAL_SNAPSHOTTER_VERSION"
  snap_mod=github.com/kubernetes-csi/external-snapshotter
  snap_src=$(go mod download -json "$snap_mod/v8@$EXTERNAL_SNAPSHOTTER_VERSION" | awk -F'"' '/"Dir"/ {print $4}')
  [ -n "$snap_src" ] || { echo "cannot download $snap_mod/v8@$EXTERNAL_SNAPSHOTTER_VERSION" >&2; exit 1; }
  snap_work=$(mktemp -d)
  cp -r "$snap_src/." "$snap_work/"; chmod -R u+w "$snap_work"
  (cd "$snap_work" &&
    go mod edit -replace="$snap_mod/client/v8=$snap_mod/client/v8@$EXTERNAL_SNAPSHOTTER_VERSION" &&
    for t in snapshot-controller csi-snapshotter; do
      CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$bin/$t" "./cmd/$t"
    done)
  rm -rf "$snap_work"
  took
fi
if [ -z "$only" ] && [ ! -f "$bin/snapshot-crds/snapshot.storage.k8s.io_volumesnapshots.yaml" ]; then
  echo ">> copying the VolumeSnapshot CRDs $EXTERNAL_SNAPSHOTTER_VERSION"
  crd_src=$(go mod download -json "github.com/kubernetes-csi/external-snapshotter/client/v8@$EXTERNAL_SNAPSHOTTER_VERSION" | awk -F'"' '/"Dir"/ {print $4}')
  [ -n "$crd_src" ] || { echo "cannot download the snapshot client module" >&2; exit 1; }
  mkdir -p "$bin/snapshot-crds"
  for k in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
    install -m 0644 "$crd_src/config/crd/snapshot.storage.k8s.io_$k.yaml" "$bin/snapshot-crds/"
  done
fi

if [ -n "$only" ]; then echo ">> the $set set's tools ready in $bin: $only"; else echo ">> tools ready in $bin"; fi
