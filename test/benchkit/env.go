package benchkit

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// TB is the part of testing.TB the knobs use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Int is the environment's integer name, def when unset; a value that is
// not a whole number above zero (or zero, where zeroOK) fails the test.
func Int(t TB, name string, def int, zeroOK bool) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || (n == 0 && !zeroOK) {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// Duration is the environment's duration name, def when unset; a value
// that is not a duration above zero fails the test.
func Duration(t TB, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

// LoadAvg is /proc/loadavg's three load averages, "?" where unreadable.
func LoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
