package csi

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// sampleCount is the number of observations in the operations histogram
// with the given labels.
func sampleCount(t *testing.T, reg *prometheus.Registry, driver, method, code string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{labelDriver: driver, labelMethod: method, labelCode: code}
	for _, f := range families {
		if f.GetName() != operationsMetric {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// containsLine says whether one line contains all the parts.
func containsLine(lines []string, parts ...string) bool {
	for _, l := range lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// waitForLine blocks until a log line contains msg, or fails the test when ctx ends.
func waitForLine(t *testing.T, ctx context.Context, logs *logSink, msg string) {
	t.Helper()
	for {
		select {
		case l := <-logs.seen:
			if strings.Contains(l, msg) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no log line %q before the deadline; logs:\n%s", msg, strings.Join(logs.all(), "\n"))
		}
	}
}
