package cluster

import "context"

// T is what the package needs of a test: *testing.T and *testing.B have
// it, and so does the demo's runner (hack/demo), which is not a test.
type T interface {
	Context() context.Context
	Helper()
	Cleanup(func())
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Failed() bool
	TempDir() string
	Name() string
}
