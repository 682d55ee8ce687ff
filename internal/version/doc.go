// Package version is the one version of a tether build, printed by every
// binary's --version and logged at start-up.
//
// The files:
//   - version.go: String, the version stamped at build time by the
//     linker (-X ...version.version); without one, the module version Go
//     recorded; else "devel" with the VCS revision, and "-dirty" for a
//     tree with local changes.
//   - buildtags.go: BuildTags, the build tags every tether binary is built
//     with (make build, the release's images, the tests' builds), so that
//     what is measured is what ships.
package version
