package benchkit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CPU is a snapshot of CPU time: the machine's busy and total clock ticks,
// and the ticks spent by each program (by command name) of interest.
type CPU struct {
	// Busy counts user, system, irq and the like; Steal is time the
	// hypervisor gave to other machines.
	Busy, Steal, Total int64
	ByProgram          map[string]int64
}

// ReadCPU takes a snapshot from /proc: the machine's ticks, and those of
// each named process (names are the caller's; a pid of 0 is left out).
// Processes are counted by pid, not by command name, so that other
// control planes on the machine do not count.
func ReadCPU(pids map[string]int) CPU {
	s := CPU{ByProgram: map[string]int64{}}
	if raw, err := os.ReadFile("/proc/stat"); err == nil {
		s.Busy, s.Steal, s.Total = ParseProcStat(string(raw))
	}
	for name, pid := range pids {
		if pid == 0 {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			continue
		}
		if _, ticks, ok := ParsePidStat(string(raw)); ok {
			s.ByProgram[name] += ticks
		}
	}
	return s
}

// ParseProcStat returns the busy, stolen and total ticks of /proc/stat's
// cpu line (idle and iowait are neither busy nor stolen).
func ParseProcStat(stat string) (busy, steal, total int64) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, 0
	}
	for i, f := range fields[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		total += v
		switch i {
		case 3, 4: // idle, iowait
		case 7:
			steal += v
		default:
			busy += v
		}
	}
	return busy, steal, total
}

// ParsePidStat returns the command name and utime+stime of a
// /proc/<pid>/stat line.
func ParsePidStat(stat string) (comm string, ticks int64, ok bool) {
	open, closing := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || closing < open {
		return "", 0, false
	}
	fields := strings.Fields(stat[closing+1:])
	if len(fields) < 13 {
		return "", 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	return stat[open+1 : closing], utime + stime, err1 == nil && err2 == nil
}

// CPUUse renders the CPU used between two snapshots: the machine's busy
// share, and each program's CPU seconds (at 100 ticks a second), per claim
// in milliseconds.
func CPUUse(before, after CPU, n int) string {
	var b strings.Builder
	if d := after.Total - before.Total; d > 0 {
		fmt.Fprintf(&b, "machine CPU busy %.0f%%, stolen %.0f%%;", 100*float64(after.Busy-before.Busy)/float64(d), 100*float64(after.Steal-before.Steal)/float64(d))
	}
	names := make([]string, 0, len(after.ByProgram))
	for k := range after.ByProgram {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		ticks := after.ByProgram[k] - before.ByProgram[k]
		if ticks < 0 {
			continue // a process that was restarted in between
		}
		fmt.Fprintf(&b, " %s %.2fs (%.1f ms/claim);", k, float64(ticks)/100, 10*float64(ticks)/float64(n))
	}
	return strings.TrimSuffix(b.String(), ";")
}
