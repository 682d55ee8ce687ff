package benchprov

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tether-csi/tether/test/benchkit"
)

// deleteTrace is when each volume (by PV name, which is also its CSI name)
// passed each stage of its deletion: its claim deleted (the bench's call),
// the PV seen Released (the binder's write, through the bench's watch),
// DeleteVolume arriving at the backend and done there, the PV seen gone.
type deleteTrace struct {
	mu                            sync.Mutex
	claimDeleted, released, gone  map[string]time.Time
	deleteArrived, deleteFinished map[string]time.Time
}

func newDeleteTrace() *deleteTrace {
	return &deleteTrace{claimDeleted: map[string]time.Time{}, released: map[string]time.Time{}, gone: map[string]time.Time{},
		deleteArrived: map[string]time.Time{}, deleteFinished: map[string]time.Time{}}
}

// mark records at for name in m (one of d's maps) unless a time is there
// already: each stage's first passage counts.
func (d *deleteTrace) mark(m map[string]time.Time, name string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := m[name]; !ok {
		m[name] = at
	}
}

// stage is one span of the deletion: from one mark to the next.
type stage struct {
	name     string
	from, to func(*deleteTrace) map[string]time.Time
}

var deleteStages = []stage{
	{"claim deleted -> Released", func(d *deleteTrace) map[string]time.Time { return d.claimDeleted }, func(d *deleteTrace) map[string]time.Time { return d.released }},
	{"Released -> DeleteVolume", func(d *deleteTrace) map[string]time.Time { return d.released }, func(d *deleteTrace) map[string]time.Time { return d.deleteArrived }},
	{"DeleteVolume at work", func(d *deleteTrace) map[string]time.Time { return d.deleteArrived }, func(d *deleteTrace) map[string]time.Time { return d.deleteFinished }},
	{"DeleteVolume done -> PV gone", func(d *deleteTrace) map[string]time.Time { return d.deleteFinished }, func(d *deleteTrace) map[string]time.Time { return d.gone }},
}

// stageFigures is one stage's spans over the volumes that passed both
// its marks.
type stageFigures struct {
	name          string
	volumes       int
	p50, p99, max time.Duration
	lastAt        time.Duration // the stage's last end, from the first claim deleted
}

// figures summarizes the trace: each stage's spans, and the DeleteVolume
// calls at work over time (calls per second of the window from the first
// arrival to the last finish, which is inFlight when the provisioner keeps
// every worker busy).
func (d *deleteTrace) figures() (stages []stageFigures, busy float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := earliest(d.claimDeleted)
	for _, s := range deleteStages {
		from, to := s.from(d), s.to(d)
		var spans []time.Duration
		var last time.Time
		for name, a := range from {
			if b, ok := to[name]; ok {
				spans = append(spans, b.Sub(a))
				if b.After(last) {
					last = b
				}
			}
		}
		f := stageFigures{name: s.name, volumes: len(spans)}
		if len(spans) > 0 {
			f.p50, f.p99, f.max = benchkit.Percentile(spans, 50), benchkit.Percentile(spans, 99), benchkit.Percentile(spans, 100)
			f.lastAt = last.Sub(start)
		}
		stages = append(stages, f)
	}
	var work time.Duration
	first, last := earliest(d.deleteArrived), time.Time{}
	for name, a := range d.deleteArrived {
		if b, ok := d.deleteFinished[name]; ok {
			work += b.Sub(a)
			if b.After(last) {
				last = b
			}
		}
	}
	if window := last.Sub(first); window > 0 {
		busy = work.Seconds() / window.Seconds()
	}
	return stages, busy
}

func earliest(m map[string]time.Time) time.Time {
	var first time.Time
	for _, t := range m {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}

// arrivals counts DeleteVolume arrivals per second after the first claim
// deleted, for the report's timeline.
func (d *deleteTrace) arrivals() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := earliest(d.claimDeleted)
	var per []int
	for _, a := range d.deleteArrived {
		s := int(a.Sub(start) / time.Second)
		if s < 0 {
			s = 0
		}
		for len(per) <= s {
			per = append(per, 0)
		}
		per[s]++
	}
	return per
}

// renderStages prints each traced row's deletion stages.
func renderStages(rows []slowRow) string {
	var b strings.Builder
	header := false
	for _, r := range rows {
		if r.trace == nil || r.failed != "" {
			continue
		}
		if !header {
			b.WriteString("Deletion by stage (per volume: p50 / p99 / max, and when the stage's last volume passed, from the first claim deleted);\n")
			b.WriteString("DeleteVolume calls at work on average between the first arrival and the last finish; arrivals per second.\n")
			header = true
		}
		stages, busy := r.trace.figures()
		fmt.Fprintf(&b, "%s: DeleteVolume calls at work %.1f on average\n", r.pair.label(), busy)
		for _, s := range stages {
			fmt.Fprintf(&b, "  %-30s %5d volumes  %7s / %7s / %7s  last at %7s\n", s.name, s.volumes, sec(s.p50), sec(s.p99), sec(s.max), sec(s.lastAt))
		}
		per := r.trace.arrivals()
		parts := make([]string, len(per))
		for i, c := range per {
			parts[i] = fmt.Sprint(c)
		}
		fmt.Fprintf(&b, "  arrivals per second: %s\n", strings.Join(parts, " "))
	}
	return b.String()
}

// TestDeleteTraceFigures: stages from made-up marks.
func TestDeleteTraceFigures(t *testing.T) {
	d := newDeleteTrace()
	t0 := time.Unix(1000, 0)
	s := time.Second
	for i, name := range []string{"a", "b"} {
		off := time.Duration(i) * s
		d.mark(d.claimDeleted, name, t0.Add(off))
		d.mark(d.released, name, t0.Add(off+s))
		d.mark(d.released, name, t0.Add(off+5*s)) // a later passage does not count
		d.mark(d.deleteArrived, name, t0.Add(off+2*s))
		d.mark(d.deleteFinished, name, t0.Add(off+4*s))
		d.mark(d.gone, name, t0.Add(off+5*s))
	}
	stages, busy := d.figures()
	want := []string{"claim deleted -> Released 2 1s", "Released -> DeleteVolume 2 1s", "DeleteVolume at work 2 2s", "DeleteVolume done -> PV gone 2 1s"}
	var got []string
	for _, st := range stages {
		got = append(got, fmt.Sprintf("%s %d %s", st.name, st.volumes, st.p50))
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stages %v, want %v", got, want)
	}
	// Two calls of 2s each over the 3s from the first arrival to the last finish.
	if busy < 1.33 || busy > 1.34 {
		t.Errorf("busy %.3f, want 4/3", busy)
	}
	if got := stages[3].lastAt; got != 6*s {
		t.Errorf("last PV gone at %s, want 6s", got)
	}
	if per := d.arrivals(); fmt.Sprint(per) != "[0 0 1 1]" {
		t.Errorf("arrivals %v", per)
	}
}

// TestBackendJitter: the spread latencies stay within +-jitter and
// average near the latency; without jitter every call takes the latency.
func TestBackendJitter(t *testing.T) {
	b := &slowBackend{latency: 2 * time.Second}
	if d := b.delay("delete/pvc-1"); d != 2*time.Second {
		t.Fatalf("no jitter: %s", d)
	}
	b.jitter = 0.2
	var sum time.Duration
	for i := range 1000 {
		d := b.delay(fmt.Sprintf("delete/pvc-%d", i))
		if d < 1600*time.Millisecond || d > 2400*time.Millisecond {
			t.Fatalf("pvc-%d: %s, outside 1.6s to 2.4s", i, d)
		}
		sum += d
	}
	if mean := sum / 1000; mean < 1950*time.Millisecond || mean > 2050*time.Millisecond {
		t.Errorf("mean %s, want near 2s", mean)
	}
}
