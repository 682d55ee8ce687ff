#!/usr/bin/env bash
# Checks that no process started from the tools folder outlived the tests.
# Any left over is killed and reported, and the script exits 1: a test that
# leaks a control-plane process is a bug.
#
# With a run ID (make test exports TETHER_RUN_ID to everything it starts),
# only the processes of that run count: other runs on the same machine (a
# bench, a conformance run, another checkout's tests) are left alone.
set -u
bin=${1:?usage: reap.sh TOOLS_BIN [RUN_ID]}
run=${2:-}
pids=
for pid in $(pgrep -f "^$bin/" || true); do
  if [ -n "$run" ] && ! tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "TETHER_RUN_ID=$run"; then
    continue
  fi
  pids="$pids $pid"
done
if [ -z "$pids" ]; then
  echo "reap: no control-plane process left behind"
  exit 0
fi
echo "reap: processes left behind by the tests:" >&2
ps -o pid=,args= -p $pids >&2 || true
kill -9 $pids 2>/dev/null || true
exit 1
