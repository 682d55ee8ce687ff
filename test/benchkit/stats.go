package benchkit

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of
// durations, 0 for none; it sorts a copy.
func Percentile(durations []time.Duration, p float64) time.Duration {
	if len(durations) == 0 {
		return 0
	}
	sorted := slices.Clone(durations)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// MedianMax of a list of sizes (the lower median of an even count); 0, 0
// for none.
func MedianMax(v []int64) (median, most int64) {
	if len(v) == 0 {
		return 0, 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2], s[len(s)-1]
}

// MiB prints a size in MiB with one decimal, "-" for 0 (not measured).
func MiB(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
