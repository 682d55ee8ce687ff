package benchkit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Mem is one process's memory at one moment, from /proc/PID/status, in
// bytes: VmRSS now and VmHWM, the peak so far, and of VmRSS the anonymous
// pages (the process's own: heap, stacks, runtime) and the file pages (its
// binary's code and data mapped in, shared and reclaimable).
type Mem struct{ RSS, HWM, Anon, File int64 }

// ParseStatus reads VmRSS, VmHWM, RssAnon and RssFile (kB) from a
// /proc/PID/status text.
func ParseStatus(status string) Mem {
	var m Mem
	for line := range strings.Lines(status) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 1 {
			continue
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			m.RSS = kb << 10
		case "VmHWM":
			m.HWM = kb << 10
		case "RssAnon":
			m.Anon = kb << 10
		case "RssFile":
			m.File = kb << 10
		}
	}
	return m
}

// ReadMem reads a process's memory; zero if it is gone (or pid is 0).
func ReadMem(pid int) Mem {
	if pid == 0 {
		return Mem{}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}
	}
	return ParseStatus(string(data))
}

// MemAvailable is /proc/meminfo's MemAvailable, in bytes.
func MemAvailable() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
