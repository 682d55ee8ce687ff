package benchkit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func TestParseStatus(t *testing.T) {
	m := ParseStatus("Name:\tprovisioner\nVmHWM:\t   65536 kB\nVmRSS:\t   32768 kB\nRssAnon:\t   8192 kB\nRssFile:\t   24576 kB\nThreads:\t12\n")
	if m.RSS != 32<<20 || m.HWM != 64<<20 || m.Anon != 8<<20 || m.File != 24<<20 {
		t.Fatalf("got %+v", m)
	}
	if m := ParseStatus("garbage"); m != (Mem{}) {
		t.Fatalf("garbage: %+v", m)
	}
}

func TestMetricSum(t *testing.T) {
	text := `# HELP apiserver_watch_events_total x
apiserver_watch_events_total{group="",resource="persistentvolumeclaims",version="v1"} 120
apiserver_watch_events_total{group="",resource="persistentvolumes",version="v1"} 7
apiserver_watch_events_total{group="storage.k8s.io",resource="csinodes",version="v1"} 3
apiserver_watch_events_sizes_sum{group="",resource="persistentvolumeclaims",version="v1"} 4.5e+06
apiserver_watch_events_sizes_count{group="",resource="persistentvolumeclaims",version="v1"} 120
apiserver_longrunning_requests{component="apiserver",group="",resource="persistentvolumeclaims",scope="cluster",subresource="",verb="WATCH"} 21
apiserver_longrunning_requests{component="apiserver",group="",resource="persistentvolumeclaims",scope="namespace",subresource="",verb="WATCH"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="log,x",verb="WATCH"} 5
go_goroutines 42
`
	for _, c := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"apiserver_watch_events_total", map[string]string{"resource": "persistentvolumeclaims"}, 120},
		{"apiserver_watch_events_total", nil, 130},
		{"apiserver_watch_events_sizes_sum", map[string]string{"resource": "persistentvolumeclaims"}, 4.5e6},
		{"apiserver_watch_events", nil, 0}, // a prefix of other names only
		{"apiserver_longrunning_requests", map[string]string{"resource": "persistentvolumeclaims", "verb": "WATCH"}, 23},
		{"apiserver_longrunning_requests", map[string]string{"resource": "pods", "subresource": "log,x"}, 5},
		{"go_goroutines", nil, 42},
		{"go_goroutines", map[string]string{"a": "b"}, 0},
	} {
		if got := MetricSum(text, c.name, c.match); got != c.want {
			t.Errorf("%s %v: %v, want %v", c.name, c.match, got, c.want)
		}
	}
	if !HasMetric(text, "go_goroutines") || HasMetric(text, "apiserver_registered_watchers") || HasMetric(text, "apiserver_watch_events") {
		t.Error("HasMetric")
	}
}

func TestStatistics(t *testing.T) {
	if med, most := MedianMax([]int64{5, 1, 3, 9}); med != 3 || most != 9 {
		t.Errorf("MedianMax: %d %d", med, most)
	}
	if med, most := MedianMax(nil); med != 0 || most != 0 {
		t.Error("MedianMax of none")
	}
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Second)
	}
	if p := Percentile(d, 50); p != 50*time.Second {
		t.Errorf("p50 %s", p)
	}
	if p := Percentile(d, 99); p != 99*time.Second {
		t.Errorf("p99 %s", p)
	}
	if p := Percentile(d[:1], 99); p != time.Second {
		t.Errorf("p99 of one %s", p)
	}
	if Percentile(nil, 50) != 0 {
		t.Error("percentile of none")
	}
}

func TestCPUParsing(t *testing.T) {
	busy, steal, total := ParseProcStat("cpu  100 5 50 800 20 3 2 7 0 0\ncpu0 1 2 3\n")
	if busy != 160 || steal != 7 || total != 987 {
		t.Errorf("ParseProcStat: busy %d steal %d total %d, want 160 7 987", busy, steal, total)
	}
	comm, ticks, ok := ParsePidStat("42 (kube-apiserver) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0")
	if !ok || comm != "kube-apiserver" || ticks != 325 {
		t.Errorf("ParsePidStat: %q %d %v", comm, ticks, ok)
	}
	line := CPUUse(CPU{Busy: 100, Total: 1000, ByProgram: map[string]int64{"etcd": 10}},
		CPU{Busy: 600, Steal: 100, Total: 2000, ByProgram: map[string]int64{"etcd": 110}}, 100)
	if want := "machine CPU busy 50%, stolen 10%; etcd 1.00s (10.0 ms/claim)"; line != want {
		t.Errorf("CPUUse: %q, want %q", line, want)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	tests := []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(3, 1, 2), 50, 2 * time.Millisecond},
		{ms(hundred...), 50, 50 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond},
		{ms(hundred...), 100, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := Percentile(tt.in, tt.p); got != tt.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tt.in, tt.p, got, tt.want)
		}
	}
	in := ms(3, 1, 2)
	Percentile(in, 50)
	if !reflect.DeepEqual(in, ms(3, 1, 2)) {
		t.Error("Percentile sorted its input")
	}
}

func TestColumns(t *testing.T) {
	type run struct {
		name string
		secs float64
	}
	c := NewColumns([]run{{"tether", 1.5}, {"ep", 12}}, func(r run) string { return r.name })
	c.Add("time", func(r run) string { return fmt.Sprintf("%.1f s", r.secs) })
	if got, want := c.Markdown(), "| figure | tether | ep |\n|---|---|---|\n| time | 1.5 s | 12.0 s |\n"; got != want {
		t.Errorf("Markdown:\n%s\nwant\n%s", got, want)
	}
	if got, want := c.Aligned(), "figure  tether  ep      \ntime    1.5 s   12.0 s  \n"; got != want {
		t.Errorf("Aligned:\n%q\nwant\n%q", got, want)
	}
}

// TestPeakHeapProfile: the profile of a process (here the test's own) is
// saved at the first reading and stays once stopped.
func TestPeakHeapProfile(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/heap", pprof.Index)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "p", "peak.heap.pprof")
	stop := PeakHeapProfile(path, strings.TrimPrefix(srv.URL, "http://"), os.Getpid(), time.Hour)
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		fi, err := os.Stat(path)
		return err == nil && fi.Size() > 0, nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("no profile at %s", path)
	}
}
