// Package release makes tether's container images and release bundle on a
// machine with no container engine and no registry: static binaries in
// reproducible OCI images (go-containerregistry), one OCI archive per
// component and platform, and the bundle of `make release`. sbom.go
// writes each image's SPDX SBOM from its binaries' build info,
// provenance.go the release's in-toto provenance, and verify.go checks
// both against SHA256SUMS and the archives.
//
// Equal inputs give equal bytes throughout: tar entries sorted, with fixed
// owners and times (the commit's, or SOURCE_DATE_EPOCH), and the SBOMs and
// the provenance hold no time of their own making.
//
// The files:
//   - image.go: Components and Platforms; NewImage (one layer with the
//     static /app, the non-root user NonRoot and a writable /tmp) and
//     NewIndex (a component's multi-platform index, the digest pinned).
//   - build.go: BuildImages (every component for every platform, an
//     archive and an SBOM each, images.json) and BuildBinary (a static,
//     version-stamped binary); CheckVersionFlag.
//   - archive.go: WriteArchive, a component's index as an OCI layout in
//     one tar that containerd imports under its tag and its digest, and
//     ReadArchive, which refuses one that disagrees with its index.
//   - bundle.go: the release's manifests: Bundles, Overlay and Render
//     (kustomize in-process, images pinned by digest), CheckPinned,
//     ReleaseNotes and Notes (the version's CHANGELOG section), WriteSums.
//   - krew.go: the kubectl plugin's archives per platform and their krew
//     manifest (KrewManifest, WritePlugins); krewcheck.go: Validate,
//     ReadKrewManifest and CheckKrewManifest, what krew requires of them.
//   - sbom.go: SBOM, an image's SPDX 2.3 document from its binaries'
//     build info, and ValidateSBOM.
//   - provenance.go: Provenance and WriteProvenance, the release's
//     unsigned in-toto statement with an SLSA v1 predicate, whose subjects
//     are SHA256SUMS and its files; ValidateProvenance, CheckSubjects.
//   - verify.go: VerifyRelease, the digests, SBOMs and provenance of a
//     release folder checked against each other and the archives.
//   - push.go: Push, a bundle's archives uploaded to a registry, the
//     index exactly as archived; Target, ReadBuilt.
//   - tag.go: what Push does with a tag the registry has already: skip it
//     when it names the pinned index, refuse to move it without force.
//   - retarget.go: Retarget, the manifests rewritten to name the images
//     in another registry by the same digests (ManifestsFile,
//     RetargetedFile).
//   - pushcmd.go: PushCommand, the push command line shared by
//     hack/release and cmd/tether-push, and PushPlatforms.
package release
