//go:build !race

package sim

const defaultSchedules = 10000
