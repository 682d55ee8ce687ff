#!/usr/bin/env bash
# Builds a release twice and wants the same bytes: every image archive, the
# kubectl-tether binaries, tether.yaml and the notes (CI runs this after
# make test). The first build checks what make release checks: a semver
# version, every binary's --version, no :latest and digests in tether.yaml;
# it also wants the alert rules and the Grafana dashboard in the release.
set -euo pipefail
cd "$(dirname "$0")/.."
# By default, a pre-release of the version CHANGELOG.md's Unreleased
# section names ("## Unreleased (v0.1.0)" gives v0.1.0-ci.1).
next=$(sed -nE 's/^## Unreleased \((v[0-9]+\.[0-9]+\.[0-9]+)\).*/\1/p' CHANGELOG.md | head -1)
version=${1:-${next:?CHANGELOG.md has no "## Unreleased (vX.Y.Z)" heading}-ci.1}
out="_out/release/$version"
make --no-print-directory release VERSION="$version" >/dev/null
first=$(mktemp)
trap 'rm -f "$first"' EXIT
cp "$out/SHA256SUMS" "$first"
make --no-print-directory release VERSION="$version" >/dev/null
if ! diff -u "$first" "$out/SHA256SUMS"; then
  echo "release-check: two builds of $version from the same tree differ" >&2
  exit 1
fi
(cd "$out" && sha256sum -c --quiet SHA256SUMS)
for f in tether-provisioner-alerts.yaml tether-binder-alerts.yaml tether-dashboard.json; do
  if ! grep -q " $f\$" "$out/SHA256SUMS"; then
    echo "release-check: $version has no $f" >&2
    exit 1
  fi
done
if grep -nE 'image: .*:latest' "$out/tether.yaml" || grep -rnE 'newTag: *latest|image: .*:latest' deploy/; then
  echo "release-check: tether.yaml or deploy/ names :latest" >&2
  exit 1
fi
echo "release-check: $version built twice, the same $(wc -l <"$out/SHA256SUMS") files; tether.yaml pinned"
