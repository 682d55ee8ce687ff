package sim

import (
	"crypto/sha256"
	"fmt"
	"regexp"
)

// Summary is what a run of many schedules found.
type Summary struct {
	Steps, Violations int
	// Failed are the failing schedules (at most ten kept, with traces).
	Failed []Result
	// Kinds counts the schedules per kind of violation, in the order
	// first found.
	Kinds     map[string]*Kind
	KindOrder []string
	// Counts add up the schedules' Counts; Reached counts the schedules
	// where each was not zero.
	Counts, Reached map[string]int
}

// Kind is one kind of violation: how many schedules showed it, and the
// first seed that did.
type Kind struct {
	Schedules int
	FirstSeed int64
}

// Run runs n schedules seeded first, first+1, ...
func Run(first int64, n int) Summary {
	s := Summary{Kinds: map[string]*Kind{}, Counts: map[string]int{}, Reached: map[string]int{}}
	for i := 0; i < n; i++ {
		r := RunSchedule(first + int64(i))
		s.Steps += r.Steps
		for k, v := range r.Counts {
			s.Counts[k] += v
			if v > 0 {
				s.Reached[k]++
			}
		}
		s.Violations += len(r.Violations)
		if len(r.Violations) == 0 {
			continue
		}
		if len(s.Failed) < 10 {
			s.Failed = append(s.Failed, r)
		}
		kinds := map[string]bool{}
		for _, v := range r.Violations {
			kinds[KindOf(v)] = true
		}
		for _, k := range sortedKeys(kinds) {
			if s.Kinds[k] == nil {
				s.Kinds[k] = &Kind{FirstSeed: r.Seed}
				s.KindOrder = append(s.KindOrder, k)
			}
			s.Kinds[k].Schedules++
		}
	}
	return s
}

var (
	kindNumbers = regexp.MustCompile(`vol-[0-9]+|snap-[0-9]+|snapcontent-[0-9a-f-]+|pvc-[0-9a-f-]+|static-c[0-9]+|ns-[0-9]+/c[0-9]+|ns-[0-9]+|c[0-9]+|step [0-9]+: |\[[^]]*\]|\((vol|pvc|asked|finalizers|source)[^)]*\)`)
)

// KindOf is a violation's message without its names and numbers.
func KindOf(v string) string {
	return kindNumbers.ReplaceAllString(v, "_")
}

// Outcome is one schedule's outcome in one line: its seed, steps,
// violations and a digest of its whole trace (every delivery, actor move
// and fault in order). Equal lines before and after a change mean the
// change left that schedule's behaviour as it was (make sim
// SIM_OUTCOMES=file writes one per seed; issue 35's referee).
func Outcome(r Result) string {
	h := sha256.New()
	for _, line := range r.Trace {
		h.Write([]byte(line))
		h.Write([]byte{'\n'})
	}
	return fmt.Sprintf("seed %d steps %d violations %d trace %x", r.Seed, r.Steps, len(r.Violations), h.Sum(nil)[:12])
}
