package bench

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseSizes(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"1000,10000", []int{1000, 10000}, false},
		{" 5 , 7,", []int{5, 7}, false},
		{"", nil, true},
		{"10,x", nil, true},
		{"0", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseSizes(tt.in)
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseSizes(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestTable(t *testing.T) {
	const delay = 2500 * time.Microsecond
	results := []Result{
		{N: 1000, Binder: "tether", First: time.Second, Total: 2 * time.Second, P50: time.Second, P99: 2 * time.Second, PeakRSS: 40 << 20, APIServerRSS: 300 << 20},
		{N: 1000, Binder: "kcm", First: time.Second, Total: 8 * time.Second, P50: 4 * time.Second, P99: 8 * time.Second, PeakRSS: 80 << 20},
		{N: 1000, Binder: "floor", First: time.Second, Total: 1600 * time.Millisecond, P50: time.Second, P99: 1600 * time.Millisecond},
		{N: 10000, Binder: "kcm", Skipped: "N > BENCH_KCM_MAX_N"},
		{N: 1000, Binder: "tether", Delay: delay, Total: 5 * time.Second},
		{N: 1000, Binder: "tether", Delay: delay, Total: 4 * time.Second, First: time.Second, P50: 2 * time.Second, P99: 4 * time.Second},
		{N: 1000, Binder: "tether", Delay: delay, Skipped: "failed"},
	}
	got := Table(results, 2000, 4000)
	for _, want := range []string{
		"QPS 2000, burst 4000",
		"etcd on loopback, no added delay:",
		"   1000  tether              1.00s       2.00s      500.0     1.00s     2.00s    40.0 MiB   300.0 MiB    0.0 MiB",
		"   1000  tether/kcm          1.00x       0.25x      4.00x     0.25x     0.25x       0.50x",
		"   1000  tether/floor        1.00x       1.25x      0.80x",
		"  10000  kcm           skipped: N > BENCH_KCM_MAX_N",
		"etcd 2.5ms further each way (5ms per etcd round trip, BENCH_ETCD_DELAY=2.5ms):",
		// The median of 4 s, 5 s and a failed round is the 4 s one.
		"   1000  tether              1.00s       4.00s      250.0",
		"1000 tether, claims/s of each of 3 rounds: 200.0, 250.0, failed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table misses %q:\n%s", want, got)
		}
	}
}

func TestAPIRequests(t *testing.T) {
	text := `# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="cluster",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="cluster",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="persistentvolumeclaims",scope="resource",subresource="status",verb="PUT",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 1e+01
apiserver_request_total{code="429",component="apiserver",dry_run="",group="",resource="persistentvolumeclaims",scope="resource",subresource="",verb="PUT",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="persistentvolumeclaims",scope="resource",subresource="",verb="PUT",version="v1"} 5
apiserver_request_duration_seconds_bucket{verb="POST",le="1"} 99
`
	got := APIRequests(text)
	want := map[string]float64{"POST persistentvolumes": 10, "POST persistentvolumes (conflict)": 2, "PUT persistentvolumeclaims/status": 4, "GET pods": 10,
		"PUT persistentvolumeclaims (429)": 3, "PUT persistentvolumeclaims": 5}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	line := RequestsPerClaim(map[string]float64{"POST persistentvolumes": 2}, got, 10)
	for _, s := range []string{"per claim: 3.20 (writes 2.20)", "PUT persistentvolumeclaims (429) 0.30", "POST persistentvolumes 0.80", "POST persistentvolumes (conflict) 0.20", "GET pods 1.00", "PUT persistentvolumeclaims/status 0.40"} {
		if !strings.Contains(line, s) {
			t.Errorf("%q lacks %q", line, s)
		}
	}
}

func TestParseDelays(t *testing.T) {
	got, err := ParseDelays(" 0, 2.5ms,")
	if err != nil || len(got) != 2 || got[0] != 0 || got[1] != 2500*time.Microsecond {
		t.Errorf("ParseDelays: %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "-1ms", "5"} {
		if _, err := ParseDelays(bad); err == nil {
			t.Errorf("ParseDelays(%q) took it", bad)
		}
	}
}

func TestTetherWorkers(t *testing.T) {
	for _, tc := range []struct {
		binder, workers string
		ok              bool
	}{
		{"tether", "", true},
		{"tether@w48", "48", true},
		{"tether@w0", "", false},
		{"tether@wx", "", false},
		{"tether@48", "", false},
		{"kcm", "", false},
		{"floor", "", false},
	} {
		workers, ok := TetherWorkers(tc.binder)
		if workers != tc.workers || ok != tc.ok {
			t.Errorf("TetherWorkers(%q) = %q, %v; want %q, %v", tc.binder, workers, ok, tc.workers, tc.ok)
		}
	}
}
