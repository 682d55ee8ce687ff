package inflight

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// AnnFormat names the format of a claim's record: the version of the rules
// by which its writer wrote it and by which it may be settled. A record
// without it is of format 1 (every record written before formats were
// named). Record writes it; Forget removes it with the record.
//
// The skew rule (docs/upgrade.md): a release reads every format the
// release before it writes, and writes a new format only once the release
// before it reads it. So a binder and a provisioner one minor release
// apart, in either order, always understand each other's records, and a
// rollback by one release finds only records it reads.
//
// A reader that meets a format it does not read (two releases apart, or
// a value a namespace user wrote) leaves the record as it is: it neither
// drops it nor deletes a volume on its word, and says so (an event and a
// metric). Like any finalizer of the claim's user, a format the user wrote
// holds only that user's own claim, until the user removes it.
const AnnFormat = "provisioner.tether.dev/in-flight-format"

// Formats of the record this version reads, and the one it writes.
const (
	// Format1: the finalizer, AnnVolume and AnnDriver, and in
	// node-deployment mode AnnNode (AnnSource and AnnSnapshot of earlier
	// versions only removed).
	Format1 = 1

	// FormatWritten is the format Record writes.
	FormatWritten = Format1
	// FormatRead is the newest format this version reads; it reads every
	// format from 1 to it.
	FormatRead = Format1
)

// Format returns the format of a claim's record as its annotation names
// it (1 without one) and whether this version reads it. A value that is
// not a positive decimal number is a format it does not read.
func Format(claim *v1.PersistentVolumeClaim) (format int, read bool) {
	v, ok := claim.Annotations[AnnFormat]
	if !ok {
		return Format1, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || strconv.Itoa(n) != v {
		return 0, false
	}
	return n, n <= FormatRead
}
