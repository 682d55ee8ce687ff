#!/usr/bin/env bash
# Installs the Debian packages that the real test nodes need (containerd,
# runc, the CNI plugins, a static busybox for the test images) when they are
# missing, so that `make test` stays one command on a fresh machine. Needs
# root and apt-get; without them it says what to install and goes on (the
# real-node tests then fail with the same message).
set -euo pipefail
debs="containerd runc containernetworking-plugins busybox-static"
missing=$(for d in $debs; do dpkg -s "$d" >/dev/null 2>&1 || echo "$d"; done)
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo ">> installing Debian packages for the real test nodes:" $missing
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
else
  echo "hack/node-debs.sh: the real test nodes need: apt-get install -y" $missing >&2
fi
