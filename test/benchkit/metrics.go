package benchkit

import (
	"strconv"
	"strings"
)

// MetricSum sums the samples of one metric in a Prometheus text exposition
// whose labels include every label of match (a metric without labels
// matches an empty match only). Histograms' _sum and _count are metrics of
// their own names.
func MetricSum(text, name string, match map[string]string) float64 {
	var sum float64
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var labels map[string]string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels = parseLabels(rest[1:end])
			rest = rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric whose name starts with name
		}
		ok := true
		for k, v := range match {
			if labels[k] != v {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
	}
	return sum
}

// HasMetric reports whether the exposition has a sample of name.
func HasMetric(text, name string) bool {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			return true
		}
	}
	return false
}

// parseLabels reads `a="x",b="y"` (values may hold commas, not quotes).
func parseLabels(s string) map[string]string {
	labels := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, `="`)
		if !ok {
			break
		}
		v, rest, ok := strings.Cut(rest, `"`)
		if !ok {
			break
		}
		labels[strings.TrimSpace(k)] = v
		s = strings.TrimPrefix(rest, ",")
	}
	return labels
}
