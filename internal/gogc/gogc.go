package gogc

import "runtime/debug"

// Percent is the GC percentage Default sets: the default when GOGC is
// unset or empty (the runtime has applied a GOGC that is set).
func Percent(def int, gogc string, set bool) (percent int, apply bool) {
	if set && gogc != "" {
		return 0, false
	}
	return def, true
}

// Default sets the runtime's GC percentage to def unless the environment,
// read through lookup, sets GOGC.
func Default(def int, lookup func(string) (string, bool)) {
	gogc, set := lookup("GOGC")
	if percent, apply := Percent(def, gogc, set); apply {
		debug.SetGCPercent(percent)
	}
}
