package main

import "runtime/debug"

// defaultGCPercent is the binder's GOGC unless the environment sets one.
// Its heap is mostly its caches, which live as long as the process: at
// Go's default (100) the heap grows to twice them before a collection,
// and the peak RSS was about 2.5 times the live heap (make bench-binder at
// 30,000 and 100,000 pairs). At 50 the heap grows by half, for more
// frequent collections (docs/performance.md, "Memory").
const defaultGCPercent = 50

// gcPercent is the GC percentage to set: the default when GOGC is unset
// (the runtime has applied a GOGC that is set).
func gcPercent(gogc string, set bool) (percent int, apply bool) {
	if set && gogc != "" {
		return 0, false
	}
	return defaultGCPercent, true
}

// setGCPercent applies gcPercent to the runtime.
func setGCPercent(lookup func(string) (string, bool)) {
	if percent, apply := gcPercent(lookup("GOGC")); apply {
		debug.SetGCPercent(percent)
	}
}
