package bench

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// APIRequests sums the API server's apiserver_request_total counter from
// its /metrics text by "VERB resource[/subresource]", over scopes and
// successful codes; failed requests are counted apart, conflicts (409)
// under "VERB resource[/subresource] (conflict)", other codes from 400 up
// under "VERB resource[/subresource] (CODE)" (a 429 is the API server's
// flow control turning a request away; client-go sends it again).
func APIRequests(metrics string) map[string]float64 {
	const name = "apiserver_request_total{"
	sums := map[string]float64{}
	for line := range strings.Lines(metrics) {
		if !strings.HasPrefix(line, name) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := parseLabels(line[len(name):end])
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		switch code := labels["code"]; {
		case code == "409":
			key += " (conflict)"
		case code >= "400":
			key += " (" + code + ")"
		}
		sums[key] += v
	}
	return sums
}

// parseLabels reads `a="x",b="y"`; label values in these metrics hold no
// quotes or commas.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// PerClaim is after-before per claim, leaving out what is below 0.05 per
// claim (the API server's reads of its own bookkeeping); benches write it
// as JSON (test/benchout).
func PerClaim(before, after map[string]float64, n int) map[string]float64 {
	diff := map[string]float64{}
	for k, v := range after {
		if d := (v - before[k]) / float64(n); d >= 0.05 {
			diff[k] = d
		}
	}
	return diff
}

// RequestsPerClaim renders after-before per claim, most frequent first,
// leaving out reads of the API server's own bookkeeping (below 0.05 per
// claim).
func RequestsPerClaim(before, after map[string]float64, n int) string {
	diff := PerClaim(before, after, n)
	var total, writes float64
	for k, d := range diff {
		total += d
		if verb, _, _ := strings.Cut(k, " "); verb != "GET" && verb != "LIST" && verb != "WATCH" {
			writes += d
		}
	}
	keys := slices.Collect(maps.Keys(diff))
	slices.SortFunc(keys, func(a, b string) int {
		if diff[a] != diff[b] {
			if diff[a] > diff[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "API requests per claim: %.2f (writes %.2f):", total, writes)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s %.2f;", k, diff[k])
	}
	return strings.TrimSuffix(b.String(), ";")
}
