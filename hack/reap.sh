#!/usr/bin/env bash
# Checks that no process started from the tools folder outlived the tests.
# Any left over is killed and reported, and the script exits 1: a test that
# leaks a control-plane process is a bug.
set -u
bin=${1:?usage: reap.sh TOOLS_BIN}
pids=$(pgrep -f "^$bin/" || true)
if [ -z "$pids" ]; then
  echo "reap: no control-plane process left behind"
  exit 0
fi
echo "reap: processes left behind by the tests:" >&2
ps -o pid=,args= -p $pids >&2 || true
kill -9 $pids 2>/dev/null || true
exit 1
