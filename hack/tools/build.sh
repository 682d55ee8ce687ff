#!/usr/bin/env bash
# Builds the pinned tools that tests run against into one cache folder.
# Usage: hack/tools/build.sh [BIN_DIR]   (default: .cache/tools/bin)
# A tool already present is not built again; delete it to rebuild.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/.cache/tools/bin}
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
if grep -E '^\s+k8s.io/[a-z0-9-]+ => ' "$here/go.mod" | grep -v " $STAGING_VERSION\$" >&2; then
  echo "hack/tools/go.mod: the staging replaces above are not at $STAGING_VERSION" >&2; exit 1
fi

missing() { for t in "$@"; do [ -x "$bin/$t" ] || return 0; done; return 1; }

k8s_tools=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
if missing "${k8s_tools[@]}" etcd; then
  echo ">> building etcd $ETCD_VERSION and ${k8s_tools[*]} from k8s.io/kubernetes $KUBERNETES_VERSION"
  echo "   (the first build takes about 10 minutes on 2 cores; later runs reuse $bin)"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  (cd "$here" && GOBIN="$tmp" go install -trimpath \
      go.etcd.io/etcd/server/v3 \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
  mv "$tmp/server" "$bin/etcd"   # go names the etcd server module's binary "server"
  for t in "${k8s_tools[@]}"; do mv "$tmp/$t" "$bin/$t"; done
fi

if missing csi-sanity; then
  echo ">> building csi-sanity $CSI_SANITY_VERSION"
  GOBIN="$bin" GOFLAGS=-mod=mod go install -trimpath "github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity@$CSI_SANITY_VERSION"
fi

if missing mock-driver; then
  echo ">> building the csi-test mock driver $MOCK_DRIVER_VERSION"
  GOBIN="$bin" GOFLAGS=-mod=mod go install -trimpath "github.com/kubernetes-csi/csi-test/v4/cmd/mock-driver@$MOCK_DRIVER_VERSION"
fi

if missing csi-provisioner; then
  echo ">> building the upstream external-provisioner $EXTERNAL_PROVISIONER_VERSION (comparison only)"
  # Its go.mod has replace lines, so `go install pkg@version` refuses it: build
  # inside a copy of its own module so that its replaces apply.
  mod=github.com/kubernetes-csi/external-provisioner/v6
  src=$(go mod download -json "$mod@$EXTERNAL_PROVISIONER_VERSION" | awk -F'"' '/"Dir"/ {print $4}')
  work=$(mktemp -d)
  cp -r "$src/." "$work/"; chmod -R u+w "$work"
  (cd "$work" && GOFLAGS=-mod=mod go build -trimpath -o "$bin/csi-provisioner" ./cmd/csi-provisioner)
  rm -rf "$work"
fi

echo ">> tools ready in $bin"
