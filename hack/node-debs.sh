#!/usr/bin/env bash
# Installs the Debian packages that the tests need when they are missing, so
# that `make test` stays one command on a fresh machine: for the real test
# nodes containerd, runc, the CNI plugins and a static busybox for the test
# images; for test/monitoring prometheus (prometheus and promtool). Needs
# root and apt-get; without them it says what to install and goes on (the
# tests that need them then fail with the same message).
# Usage: hack/node-debs.sh [demo|kind]: with demo, only the real nodes' packages
# (make demo runs no prometheus); with kind, what make e2e-kind needs to build
# tether's kind node image and its stand-in images (mmdebstrap, busybox)
# and for a private docker engine (jq for its runc wrapper; Debian's
# docker.io where no dockerd is installed).
#
# No service of these packages starts: while apt-get runs, a policy-rc.d
# (unless the machine has one) denies every start, so that no system
# prometheus (or containerd) is left running.
set -euo pipefail
debs="containerd runc containernetworking-plugins busybox-static"
who="the tests"
case ${1:-} in
  "") debs+=" prometheus" ;;
  demo) who="the demo's real nodes" ;;
  kind) debs="mmdebstrap busybox-static jq"; who="make e2e-kind"
        # A private engine's dockerd, only where no dockerd is installed at
        # all (docker.io would replace a docker-ce).
        command -v dockerd >/dev/null || debs+=" docker.io" ;;
  *) echo "hack/node-debs.sh: unknown argument $1 (none, demo or kind)" >&2; exit 2 ;;
esac
missing=$(for d in $debs; do dpkg -s "$d" >/dev/null 2>&1 || echo "$d"; done)
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo ">> installing Debian packages for $who:" $missing
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# hack/node-debs.sh: no service starts while it installs packages\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
  echo "hack/node-debs.sh: $who need: apt-get install -y --no-install-recommends" $missing >&2
fi
