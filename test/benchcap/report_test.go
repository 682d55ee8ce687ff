package benchcap

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-csi/tether/test/benchkit"
)

// row is one contender's figures.
type row struct {
	label  string
	failed string // why it stopped early, if it did

	// Start: from the provisioner's start until every object exists.
	allObjects  time.Duration
	objects     int     // keys with an object when the start ended
	startCalls  int64   // GetCapacity calls until then
	startWrites float64 // API writes of CSIStorageCapacity until then

	// Steady state: a window of whole poll periods in which nothing changes.
	steadyMinutes      float64
	callsPerMin        float64
	perSegmentPoll     float64 // GetCapacity calls per segment and poll, mean
	perSegmentPollMax  float64 // the most any segment got
	writesPerMin       float64 // API writes of CSIStorageCapacity
	readsPerMin        float64 // LIST and GET of CSIStorageCapacity
	requestsPerMin     float64 // every request but WATCH, any resource, anyone's
	eventsPerMin       float64 // changes the bench's watch saw
	apiServerCPUPerMin float64 // seconds of CPU a minute
	provCPUPerMin      float64

	// Changes of one segment's capacity, each made right after the
	// provisioner was told the old value: to the object's update, and
	// from the first answer with the new value to the update.
	changeLatency, answerToWrite []time.Duration

	provRSS int64 // peak, bytes
}

// capacityRequests sums, from two readings of bench.APIRequests, the
// writes (POST, PUT, PATCH, DELETE) and the reads (LIST, GET; not WATCH)
// of csistoragecapacities between them, failed ones included.
func capacityRequests(before, after map[string]float64) (writes, reads float64) {
	for k, v := range after {
		verb, rest, _ := strings.Cut(k, " ")
		resource, _, _ := strings.Cut(rest, " ")
		if resource != "csistoragecapacities" {
			continue
		}
		d := v - before[k]
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
			writes += d
		case "LIST", "GET":
			reads += d
		}
	}
	return writes, reads
}

// allRequests sums every request but WATCH (their count says nothing of
// the events they carry) between two readings of bench.APIRequests.
func allRequests(before, after map[string]float64) float64 {
	var n float64
	for k, v := range after {
		if !strings.HasPrefix(k, "WATCH ") {
			n += v - before[k]
		}
	}
	return n
}

// perSegmentPoll is the mean and the most GetCapacity calls a segment got
// per poll period between two readings of the calls by segment, over
// segments segments (those never asked count as 0).
func perSegmentPoll(before, after map[string]int64, segments int, polls float64) (mean, most float64) {
	if segments == 0 || polls <= 0 {
		return 0, 0
	}
	var total int64
	for seg, n := range after {
		d := n - before[seg]
		total += d
		most = max(most, float64(d)/polls)
	}
	return float64(total) / float64(segments) / polls, most
}

// meanMax of a list of durations; 0, 0 for none.
func meanMax(ds []time.Duration) (mean, most time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds)), slices.Max(ds)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func rate(v float64) string {
	if v != 0 && math.Abs(v) < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// render prints the rows side by side: a line per figure, a column per
// contender.
func render(title string, rows []row) string {
	table := benchkit.NewColumns(rows, func(r row) string { return r.label })
	add := table.Add
	add("every object exists", func(r row) string {
		if r.failed != "" {
			return "did not: " + r.failed
		}
		return seconds(r.allObjects)
	})
	add("  objects, GetCapacity calls, API writes by then", func(r row) string {
		return fmt.Sprintf("%d, %d, %.0f", r.objects, r.startCalls, r.startWrites)
	})
	add("steady: GetCapacity calls/min", func(r row) string { return rate(r.callsPerMin) })
	add("  per segment and poll (mean, most)", func(r row) string {
		return fmt.Sprintf("%.2f, %.2f", r.perSegmentPoll, r.perSegmentPollMax)
	})
	add("steady: API writes/min (capacity objects)", func(r row) string { return rate(r.writesPerMin) })
	add("steady: API reads/min (LIST, GET of them)", func(r row) string { return rate(r.readsPerMin) })
	add("steady: API requests/min, all but WATCH", func(r row) string { return rate(r.requestsPerMin) })
	add("steady: object changes seen/min", func(r row) string { return rate(r.eventsPerMin) })
	add("steady: CPU s/min (API server, provisioner)", func(r row) string {
		return fmt.Sprintf("%.2f, %.2f", r.apiServerCPUPerMin, r.provCPUPerMin)
	})
	add("change shows (mean, max)", func(r row) string {
		if len(r.changeLatency) == 0 {
			return "-"
		}
		mean, most := meanMax(r.changeLatency)
		return seconds(mean) + ", " + seconds(most)
	})
	add("  answer to update (mean, max)", func(r row) string {
		if len(r.answerToWrite) == 0 {
			return "-"
		}
		mean, most := meanMax(r.answerToWrite)
		return fmt.Sprintf("%d ms, %d ms", mean.Milliseconds(), most.Milliseconds())
	})
	add("provisioner peak RSS", func(r row) string { return fmt.Sprintf("%.0f MiB", float64(r.provRSS)/(1<<20)) })
	return title + "\n" + table.Aligned()
}

// figures is a row as benchout's figures (seconds, per minute, bytes).
func figures(r row) map[string]any {
	mean, most := meanMax(r.changeLatency)
	amean, amost := meanMax(r.answerToWrite)
	f := map[string]any{
		"all_objects_seconds":                       r.allObjects.Seconds(),
		"objects":                                   r.objects,
		"start_getcapacity_calls":                   r.startCalls,
		"start_api_writes":                          r.startWrites,
		"steady_minutes":                            r.steadyMinutes,
		"steady_getcapacity_per_minute":             r.callsPerMin,
		"steady_getcapacity_per_segment_poll":       r.perSegmentPoll,
		"steady_getcapacity_per_segment_poll_max":   r.perSegmentPollMax,
		"steady_api_writes_per_minute":              r.writesPerMin,
		"steady_api_reads_per_minute":               r.readsPerMin,
		"steady_api_requests_per_minute":            r.requestsPerMin,
		"steady_object_changes_per_minute":          r.eventsPerMin,
		"steady_apiserver_cpu_seconds_per_minute":   r.apiServerCPUPerMin,
		"steady_provisioner_cpu_seconds_per_minute": r.provCPUPerMin,
		"changes":                       len(r.changeLatency),
		"change_mean_seconds":           mean.Seconds(),
		"change_max_seconds":            most.Seconds(),
		"answer_to_update_mean_seconds": amean.Seconds(),
		"answer_to_update_max_seconds":  amost.Seconds(),
		"provisioner_peak_rss_bytes":    r.provRSS,
	}
	if r.failed != "" {
		f["failed"] = r.failed
	}
	return f
}

func TestCapacityRequests(t *testing.T) {
	tests := []struct {
		name          string
		before, after map[string]float64
		writes, reads float64
	}{
		{"nothing", nil, nil, 0, 0},
		{"creates and a list", map[string]float64{"POST csistoragecapacities": 10},
			map[string]float64{"POST csistoragecapacities": 16, "LIST csistoragecapacities": 2}, 6, 2},
		{"failed writes count", nil, map[string]float64{"PUT csistoragecapacities (conflict)": 3, "DELETE csistoragecapacities": 1}, 4, 0},
		{"watches and other resources do not", nil,
			map[string]float64{"WATCH csistoragecapacities": 5, "POST nodes": 9, "GET csinodes": 4, "PUT leases": 7}, 0, 0},
		{"gets", nil, map[string]float64{"GET csistoragecapacities": 2}, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, r := capacityRequests(tt.before, tt.after)
			if w != tt.writes || r != tt.reads {
				t.Errorf("got %v writes, %v reads; want %v, %v", w, r, tt.writes, tt.reads)
			}
		})
	}
}

func TestAllRequests(t *testing.T) {
	tests := []struct {
		name          string
		before, after map[string]float64
		want          float64
	}{
		{"nothing", nil, nil, 0},
		{"every verb and resource but WATCH", map[string]float64{"PUT leases": 10, "WATCH nodes": 3},
			map[string]float64{"PUT leases": 16, "GET namespaces": 2, "LIST csistoragecapacities": 1, "WATCH nodes": 9, "POST csistoragecapacities (conflict)": 1}, 10},
	}
	for _, tt := range tests {
		if got := allRequests(tt.before, tt.after); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPerSegmentPoll(t *testing.T) {
	tests := []struct {
		name          string
		before, after map[string]int64
		segments      int
		polls         float64
		mean, most    float64
	}{
		{"three classes, two polls", map[string]int64{"a": 3, "b": 3}, map[string]int64{"a": 9, "b": 9}, 2, 2, 3, 3},
		{"one segment asked twice as often", nil, map[string]int64{"a": 6, "b": 3}, 2, 1, 4.5, 6},
		{"a segment never asked", nil, map[string]int64{"a": 4}, 2, 2, 1, 2},
		{"no segments", nil, nil, 0, 2, 0, 0},
		{"no polls", nil, map[string]int64{"a": 1}, 1, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, most := perSegmentPoll(tt.before, tt.after, tt.segments, tt.polls)
			if mean != tt.mean || most != tt.most {
				t.Errorf("got %v, %v; want %v, %v", mean, most, tt.mean, tt.most)
			}
		})
	}
}

func TestMeanMax(t *testing.T) {
	tests := []struct {
		in         []time.Duration
		mean, most time.Duration
	}{
		{nil, 0, 0},
		{[]time.Duration{time.Second}, time.Second, time.Second},
		{[]time.Duration{time.Second, 3 * time.Second, 2 * time.Second}, 2 * time.Second, 3 * time.Second},
	}
	for _, tt := range tests {
		if mean, most := meanMax(tt.in); mean != tt.mean || most != tt.most {
			t.Errorf("meanMax(%v) = %v, %v; want %v, %v", tt.in, mean, most, tt.mean, tt.most)
		}
	}
}

func TestRender(t *testing.T) {
	rows := []row{
		{label: "tether", allObjects: 12300 * time.Millisecond, objects: 6000, startCalls: 6000, startWrites: 6000,
			callsPerMin: 12000, perSegmentPoll: 3, perSegmentPollMax: 3, changeLatency: []time.Duration{30 * time.Second},
			answerToWrite: []time.Duration{40 * time.Millisecond}, provRSS: 64 << 20},
		{label: "upstream", failed: "5999 of 6000 objects"},
	}
	out := render("capacity", rows)
	for _, want := range []string{"capacity\n", "tether", "upstream", "12.3 s", "did not: 5999 of 6000 objects",
		"12000", "3.00, 3.00", "30.0 s, 30.0 s", "40 ms, 40 ms", "64 MiB", "-"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if f := figures(rows[1]); f["failed"] != "5999 of 6000 objects" {
		t.Errorf("figures of a failed row: %v", f)
	}
}
