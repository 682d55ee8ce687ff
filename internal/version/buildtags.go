package version

// BuildTags are the build tags every tether binary is built with: by make
// build (the Makefile's BUILD_TAGS, held equal by internal/release's
// tests), by the release's images (internal/release.BuildBinary) and by the
// tests' builds (test/cluster.BuildBinary), so that what is measured is what
// ships.
//
// grpcnotrace leaves out gRPC's request tracing (golang.org/x/net/trace and
// its /debug/requests pages, which tether never serves). Its html/template
// calls methods by reflection, and a binary that may do so keeps every
// exported method of every type it holds (for the provisioner, the typed
// clients of every API group of client-go among them). Without it the
// provisioner is 36 MB rather than 57, and each node's provisioner maps that
// much less.
const BuildTags = "grpcnotrace"
