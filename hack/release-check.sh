#!/usr/bin/env bash
# Builds a release twice and wants the same bytes: every image archive, the
# kubectl-tether archives and their krew manifest, tether.yaml,
# tether-production.yaml, the notes, each image's SBOM and the provenance
# (CI runs this after make test). The first build checks what make release
# checks: a semver version, every binary's --version, no :latest and
# digests in both bundles; then that the krew manifest parses and names
# every archive with its SHA-256 (hack/release check-krew), that the alert
# rules and the Grafana dashboard are in the release, that the production
# bundle holds no part of the example driver, that the chart's versions are
# the release's, and that each image's SPDX SBOM and the in-toto provenance
# are there and valid (hack/verify-release). Last, the release workflow's
# steps after its build run on the bundle (TestReleaseWorkflowSteps:
# tether-push to a registry on loopback; cosign, docker and gh recorded).
set -euo pipefail
cd "$(dirname "$0")/.."
# By default, a pre-release of the version CHANGELOG.md's Unreleased
# section names ("## Unreleased (v0.1.0)" gives v0.1.0-ci.1).
next=$(sed -nE 's/^## Unreleased \((v[0-9]+\.[0-9]+\.[0-9]+)\).*/\1/p' CHANGELOG.md | head -1)
version=${1:-${next:?CHANGELOG.md has no "## Unreleased (vX.Y.Z)" heading}-ci.1}
out="_out/release/$version"
make --no-print-directory release VERSION="$version" >/dev/null
first=$(mktemp) firstprov=$(mktemp)
trap 'rm -f "$first" "$firstprov"' EXIT
cp "$out/SHA256SUMS" "$first"
cp "$out/provenance.intoto.json" "$firstprov"
make --no-print-directory release VERSION="$version" >/dev/null
if ! diff -u "$first" "$out/SHA256SUMS" || ! cmp "$firstprov" "$out/provenance.intoto.json"; then
  echo "release-check: two builds of $version from the same tree differ" >&2
  exit 1
fi
(cd "$out" && sha256sum -c --quiet SHA256SUMS)
go run ./hack/release check-krew -dir "$out"
for f in tether-provisioner-alerts.yaml tether-binder-alerts.yaml tether-dashboard.json \
  tether-binder_"$version".spdx.json tether-provisioner_"$version".spdx.json tether-local-driver_"$version".spdx.json; do
  if ! grep -q " $f\$" "$out/SHA256SUMS"; then
    echo "release-check: $version has no $f" >&2
    exit 1
  fi
done
if grep -nE 'image: .*:latest' "$out/tether.yaml" "$out/tether-production.yaml" || grep -rnE 'newTag: *latest|image: .*:latest' deploy/; then
  echo "release-check: tether.yaml, tether-production.yaml or deploy/ names :latest" >&2
  exit 1
fi
# The production bundle: the binder pinned by digest, no part of the example driver.
if ! grep -qE 'image: .*/binder:.*@sha256:' "$out/tether-production.yaml" ||
  grep -nE 'kind: (DaemonSet|CSIDriver|StorageClass)|local-driver|privileged' "$out/tether-production.yaml"; then
  echo "release-check: tether-production.yaml lacks the pinned binder or holds the example driver" >&2
  exit 1
fi
# The chart installs the images of the release its tree becomes.
# So does the library chart for drivers' charts (doccheck holds its image
# template's default tag to CHANGELOG.md).
core=${version%%-*}
for chart in deploy/helm/tether/Chart.yaml deploy/helm/tether-provisioner/Chart.yaml; do
  if ! grep -qx "appVersion: $core" "$chart" || ! grep -qx "version: ${core#v}" "$chart"; then
    echo "release-check: $chart's version and appVersion are not ${core#v} and $core ($version's)" >&2
    exit 1
  fi
done
# The SBOMs validate (SPDX 2.3, tools-golang) and name the archives' binaries;
# the provenance validates (in-toto v1, SLSA provenance v1) and its subjects
# are SHA256SUMS's files and SHA256SUMS.
"${GO:-go}" run ./hack/verify-release "$out"
# .github/workflows/release.yaml's publishing steps, on this bundle, with
# what needs the network or GitHub's OIDC token recorded instead of run.
TETHER_RELEASE_BUNDLE="$PWD/$out" "${GO:-go}" test -count=1 -run '^TestReleaseWorkflowSteps$' ./internal/release/
echo "release-check: $version built twice, the same $(wc -l <"$out/SHA256SUMS") files; tether.yaml and tether-production.yaml pinned; the krew manifest checked; the release workflow's publishing steps ran on it"
