// Package benchkit is what the benches share: their knobs from the
// environment, what they read of a process from /proc (memory, CPU) and of a
// server from its /metrics, and the statistics their reports print. The
// benches themselves (test/bench, test/benchprov, test/benchcap,
// test/benchnodes) start the processes and write the tables.
//
//   - env.go: knobs (BENCH_*), the machine's load average.
//   - mem.go: a process's memory (VmRSS, VmHWM, RssAnon, RssFile) and the
//     machine's available memory.
//   - cpu.go: CPU ticks of the machine and of processes.
//   - heap.go: heap profiles from a process's pprof, once or at its peak.
//   - metrics.go: sums of a Prometheus text exposition's samples.
//   - stats.go: percentiles, medians, sizes in MiB.
package benchkit
