//go:build race

package sim

// Under the race detector the simulator runs ten times slower; make test
// runs a few hundred schedules so (the simulator is single-threaded, but
// tether's code under it may not be), and the 10,000 without it.
const defaultSchedules = 300
