package main

// gcPercent is the binder's GOGC unless the environment sets one. Its heap
// is mostly its caches, which live as long as the process: at Go's default
// (100) the heap grows to twice them before a collection, and the peak RSS
// was about 2.5 times the live heap (make bench-binder at 30,000 and
// 100,000 pairs). At 50 the heap grows by half, for more frequent
// collections (docs/performance.md, "Memory").
const gcPercent = 50
