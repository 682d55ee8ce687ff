#!/usr/bin/env bash
# make mutate: mutation testing of tether's decision code (hack/mutate).
# Usage: hack/mutate.sh [TOOLS_BIN]; MUTATE_WORKERS (default 2), MUTATE_PKG
# (comma-separated package folders, default all) and MUTATE_TIMEOUT_COEFFICIENT
# (default 10) pass through.
# Gremlins, pinned in hack/tools/versions.env, is installed into TOOLS_BIN
# as a binary of its own version; it never enters tether's go.mod.
# A mutant whose tests run past the coefficient times the package's
# coverage run (make mutate's own runs: at least 10 minutes) counts as
# killed and is listed as timed out, since the tests did not pass with it;
# the coefficient is large because a warm build cache makes the coverage
# run short while each mutant rebuilds and relinks. One that does not
# compile counts nowhere (see hack/mutate/report.go and recheck.go).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${1:-$root/.cache/tools/bin}
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)
# shellcheck source=tools/versions.env
. "$here/tools/versions.env"

gremlins=$bin/gremlins-$GREMLINS_VERSION
if [ ! -x "$gremlins" ]; then
  echo ">> installing gremlins $GREMLINS_VERSION (about a minute)"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && GOFLAGS= GOBIN="$tmp" go install "github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION")
  mv "$tmp/gremlins" "$gremlins"
fi

cd "$root"
exec go run ./hack/mutate -gremlins "$gremlins" -workers "${MUTATE_WORKERS:-2}" \
  -timeout-coefficient "${MUTATE_TIMEOUT_COEFFICIENT:-10}" -only "${MUTATE_PKG:-}"
