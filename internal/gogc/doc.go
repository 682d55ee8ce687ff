// Package gogc gives a program a GC percentage of its own (GOGC) that the
// environment's GOGC still overrides: the binder and the provisioner keep
// long-lived caches, for which Go's default of 100 lets the heap grow to
// twice them before a collection (docs/performance.md, "Memory").
package gogc
