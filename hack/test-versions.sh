#!/usr/bin/env bash
# The Kubernetes version matrix (make test-versions): the suites that run
# tether against Kubernetes' own programs, once per control-plane version.
# Usage: hack/test-versions.sh TOOLS_BIN
# Environment:
#   KUBE     the versions, space-separated (default: KUBE_MATRIX of
#            hack/tools/versions.env); a version outside KUBE_MATRIX (a
#            pre-release) is run and reported, and its failures do not fail
#            the run
#   SHORT=1  the short suites (what CI runs) instead of the whole ones:
#            part of each, and no conformance (its e2e suite is a build of
#            10 minutes more per version)
#   SUITES   the suites to run, of: integration node conformance diff
#   OUT      the table (default _artifacts/test-versions.md)
# Each version's programs are built by hack/tools/build-kube.sh into a tools
# folder of their own (kept: a second run builds nothing). The table says,
# per version and suite, what ran, its tests passed and failed, and the time;
# each suite's log is beside it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -eq 1 ] || { echo "usage: $0 TOOLS_BIN" >&2; exit 2; }
base=$1
# shellcheck source=tools/versions.env
. hack/tools/versions.env
versions=${KUBE:-$KUBE_MATRIX}
if [ "${SHORT:-}" = 1 ]; then suites=${SUITES:-integration node diff}
else suites=${SUITES:-integration node conformance diff}; fi
out=${OUT:-_artifacts/test-versions.md}
logs=$(dirname "$out")/test-versions
mkdir -p "$logs"
GO=${GO:-go}

# What each suite runs: the whole suite, or with SHORT=1 the part CI runs.
short_integration='^(TestBinder|TestProvisioner|TestInteropOurProvisionerWithKCMBinder|TestInteropUpstreamProvisionerWithOurBinder|TestMigrationBothWays|TestBinderKeepsWhatItDoesNotRead|TestBinderKeepsFieldsItsClientDoesNotKnow|TestVolumeAttributesClass|TestCapacityScoring)$'
suite_cmd() {
  local suite=$1
  case $suite in
    integration)
      if [ "${SHORT:-}" = 1 ]; then echo "$GO test -count=1 -timeout 60m -v -run '$short_integration' ./test/integration/"
      else echo "$GO test -count=1 -timeout 120m -v ./test/integration/"; fi ;;
    node)
      if [ "${SHORT:-}" = 1 ]; then echo "$GO test -count=1 -timeout 30m -v -run '^TestRealNodes\$' ./test/e2e/"
      else echo "$GO test -count=1 -timeout 60m -v ./test/e2e/"; fi ;;
    conformance)
      # make test's eight specs; the whole External Storage suite is make conformance's.
      echo "$GO test -count=1 -timeout 60m -v -run '^TestExternalStorage\$' ./test/conformance/" ;;
    diff)
      echo "DIFF_SCENARIOS=$([ "${SHORT:-}" = 1 ] && echo 50 || echo 200) DIFF_SEED=1 $GO test -count=1 -timeout 60m -v -run '^TestDifferential\$' ./test/diff/" ;;
    *) echo "hack/test-versions.sh: unknown suite $suite (integration node conformance diff)" >&2; return 2 ;;
  esac
}

in_matrix() { [[ " $KUBE_MATRIX " == *" $1 "* ]]; }

# needs: the version's programs a suite runs.
needs() {
  case $1 in
    integration) echo kube-apiserver kube-controller-manager kube-scheduler kubectl ;;
    node) echo kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet ;;
    conformance) echo kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet e2e.test ;;
    diff) echo kube-apiserver kube-controller-manager ;;
  esac
}

status=0
rows=()
for v in $versions; do
  e2e=; [[ " $suites " == *" conformance "* ]] && e2e=e2e
  bin=$(hack/tools/build-kube.sh "$base" "$v" $e2e | tail -n1)
  built=$?
  if [ $built -ne 0 ] && [ $built -ne 3 ]; then
    rows+=("| $v | build | **FAILED** | | | |")
    in_matrix "$v" && status=1
    continue
  fi
  failed_build=$([ $built -eq 3 ] && { in_matrix "$v" && echo "**FAIL**" || echo "**FAIL** (not blocking)"; })
  if [ $built -eq 3 ]; then
    # Some programs did not build (named above): the suites that need
    # them are not run, the others are.
    in_matrix "$v" && status=1
    wanted="kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet${e2e:+ e2e.test}"
    missing=$(for p in $wanted; do [ -x "$bin/$p" ] || printf '%s ' "$p"; done)
    rows+=("| $v | build | $failed_build: not built: ${missing% } | | | |")
  fi
  reported=$("$bin/kube-apiserver" --version 2>/dev/null | awk '{print $2}')
  for s in $suites; do
    cmd=$(suite_cmd "$s") || exit 2
    lacks=$(for p in $(needs "$s"); do [ -x "$bin/$p" ] || printf '%s ' "$p"; done)
    if [ -n "$lacks" ]; then
      echo ">> $v $s: not run, no ${lacks% }"
      rows+=("| $v ($reported) | $s | not run: no ${lacks% } | | | |")
      continue
    fi
    log=$logs/$v-$s.log
    echo ">> $v $s: $cmd (log $log)"
    started=$SECONDS
    TETHER_TOOLS_BIN=$bin TOOLS_BIN=$bin bash -c "$cmd" >"$log" 2>&1
    rc=$?
    took=$((SECONDS - started))
    passed=$(grep -c '^--- PASS' "$log")
    failed=$(grep -c '^--- FAIL' "$log")
    result=pass
    if [ $rc -ne 0 ]; then
      result="**FAIL**"
      if in_matrix "$v"; then status=1; else result="**FAIL** (not blocking)"; fi
      grep -E '^(--- FAIL|FAIL)' "$log" | head -5 | sed 's/^/   /'
    fi
    echo "   $result: $passed passed, $failed failed, $((took / 60))m$(printf %02d $((took % 60)))s"
    rows+=("| $v ($reported) | $s | $result | $passed | $failed | $((took / 60))m$(printf %02d $((took % 60)))s |")
  done
done

{
  echo "<!-- make test-versions$([ "${SHORT:-}" = 1 ] && echo " SHORT=1"), $(date -u +%Y-%m-%d), $(git rev-parse --short HEAD 2>/dev/null), load $(cut -d' ' -f1-3 /proc/loadavg) -->"
  echo "| Kubernetes | suite | result | tests passed | tests failed | time |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$out"
echo ">> the table, in $out:"
cat "$out"
exit $status
