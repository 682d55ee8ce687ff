#!/usr/bin/env bash
# Builds the Kubernetes programs of one version of the version matrix
# (make test-versions) into a tools folder of their own.
# Usage: hack/tools/build-kube.sh BIN_DIR VERSION [e2e]
# BIN_DIR is the tools folder of hack/tools/build.sh (make tools), built
# first; VERSION a k8s.io/kubernetes release (v1.35.4) or pre-release
# (v1.38.0-beta.0). The folder is BIN_DIR/kube-VERSION: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl and kubelet of VERSION
# (and, with e2e, e2e.test and agnhost, which make conformance runs), every
# other tool a link to BIN_DIR's (etcd included: one etcd for every version;
# e2e.test and agnhost never: without e2e the folder has none).
# For the pinned KUBERNETES_VERSION the folder is BIN_DIR itself. The path of
# the folder is the last line printed. A program already there is not built
# again. Exit status 3: some programs could not be built (named on stderr),
# the folder has the others and the links.
set -euo pipefail
trap 'echo "build-kube.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 BIN_DIR VERSION [e2e]" >&2; exit 2; }
base=$(cd "$1" && pwd)
version=$2
with_e2e=${3:-}
# shellcheck source=versions.env
. "$here/versions.env"
if [ "$version" = "$KUBERNETES_VERSION" ]; then
  echo "$base"; exit 0
fi
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.]+)?$ ]] ||
  { echo "build-kube.sh: $version is no Kubernetes version (v1.MINOR.PATCH[-PRE])" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
staging=v0.${version#v1.}
bin=$base/kube-$version
mkdir -p "$bin"

programs=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet)
[ "$with_e2e" = e2e ] && programs+=(e2e.test agnhost)
todo=() failed=()
for p in "${programs[@]}"; do [ -x "$bin/$p" ] || todo+=("$p"); done

if [ ${#todo[@]} -gt 0 ]; then
  started=$SECONDS
  echo ">> building ${todo[*]} of Kubernetes $version into $bin (about 10 minutes cold on 2 cores)" >&2
  # A release that asks for a newer Go is downloaded all the same, with an
  # "Error" beside its files (and a failing status): its go.mod says which.
  gomod=$(go mod download -json "k8s.io/kubernetes@$version" | awk -F'"' '/"GoMod"/ {print $4}') || true
  [ -n "$gomod" ] && [ -f "$gomod" ] || { echo "build-kube.sh: cannot download k8s.io/kubernetes@$version" >&2; exit 1; }
  # A release that asks for a Go newer than this machine's (v1.38: 1.27) is
  # built with the pinned newer toolchain, which the go command fetches.
  need=$(awk '$1=="go" {print $2; exit}' "$gomod")
  have=$(go env GOVERSION); have=${have#go}
  if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | tail -n1)" != "$have" ]; then
    echo "   $version asks for go $need (this machine has $have): GOTOOLCHAIN=$NEWER_GO_TOOLCHAIN" >&2
    export GOTOOLCHAIN=$NEWER_GO_TOOLCHAIN
  fi
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  # A module that requires the release, with each staging module (which the
  # release's go.mod replaces by a folder of its own tree) replaced by its
  # published version, as hack/tools/go.mod does for the pinned release.
  {
    echo "module tether.invalid/kube-tools"
    echo
    awk '$1=="go" {print; exit}' "$gomod"
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    echo "replace ("
    awk -v v="$staging" '$2=="=>" && $3 ~ /^\.\/staging\// {printf "\t%s => %s %s\n", $1, $1, v}' "$gomod"
    echo ")"
  } >"$work/go.mod"
  vpkg=k8s.io/component-base/version
  ldflags="-X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor"
  # A program that does not build (a pre-release may need a module the
  # proxy does not serve) is named at the end; the others are built.
  for p in "${todo[@]}"; do
    case $p in
      e2e.test) (cd "$work" && GOFLAGS=-mod=mod go test -c -trimpath -ldflags "$ldflags" -o "$bin/e2e.test" k8s.io/kubernetes/test/e2e) ;;
      agnhost) (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$bin/agnhost" k8s.io/kubernetes/test/images/agnhost) ;;
      *) (cd "$work" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin/$p" "k8s.io/kubernetes/cmd/$p") ;;
    esac || failed+=("$p")
  done
  s=$((SECONDS - started))
  printf '   took %dm%02ds\n' $((s / 60)) $((s % 60)) >&2
fi

# Every other tool of BIN_DIR, linked; not its Kubernetes programs nor its
# e2e suite, which are of its own version (a program that did not build is
# missing, not the pinned version's).
for f in "$base"/*; do
  name=$(basename "$f")
  case $name in kube-v*|e2e.test|agnhost|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet) continue ;; esac
  if [ -d "$f" ]; then
    # A folder of files (the snapshot CRDs), made here with links to its
    # files: kubectl apply -f does not read a link to a folder.
    [ -L "$bin/$name" ] && rm "$bin/$name"
    mkdir -p "$bin/$name"
    for g in "$f"/*; do [ -e "$bin/$name/$(basename "$g")" ] || ln -s "$g" "$bin/$name/"; done
  elif [ ! -e "$bin/$name" ]; then
    ln -s "$f" "$bin/$name"
  fi
done
echo "$bin"
if [ ${#failed[@]} -gt 0 ]; then
  echo "build-kube.sh: not built: ${failed[*]} (the folder has the rest)" >&2
  exit 3
fi
