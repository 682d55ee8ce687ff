package cluster

import (
	"fmt"
	"strings"
	"testing"
)

// errorT records Errorf calls; the rest of T is unused here.
type errorT struct {
	T
	errors []string
}

func (e *errorT) Helper() {}
func (e *errorT) Errorf(format string, args ...any) {
	e.errors = append(e.errors, fmt.Sprintf(format, args...))
}

// A component built with -race reports a race in its log and, when it exits
// by itself, exits with status 66: either fails the test that ran it.
func TestProcessRaceDetection(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{"clean", "echo started; exit 0", ""},
		{"report", "echo started; printf '==================\\nWARNING: DATA RACE\\nRead at 0x1 by goroutine 7:\\n'; exit 0", "Read at 0x1 by goroutine 7"},
		{"exit66", "exit 66", "exited with status 66"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Process{opts: ProcessOptions{Name: "racy", Path: "/bin/sh", Args: []string{"-c", tc.script}, Dir: t.TempDir()}}
			p.LogPath = p.opts.Dir + "/racy.log"
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			_ = p.Wait(t.Context())
			et := &errorT{}
			p.checkRaces(et)
			got := strings.Join(et.errors, "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("checkRaces reported %q, want %q", got, tc.want)
			}
		})
	}
}
