package monitoring

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// docMetric is a row of docs/metrics.md's tables.
type docMetric struct {
	name       string   // a family name, or a prefix ending in *
	typ        string   // counter, gauge, histogram (empty for a prefix)
	labels     []string // sorted
	components []string // binder, provisioner
	line       int
}

// readDocMetrics reads the rows of docs/metrics.md's tables under
// "## Metrics" whose first cell is a metric name in backquotes:
// | `name` | type | `l1`, `l2` | component(s) | meaning |.
func readDocMetrics(t *testing.T) map[string]docMetric {
	t.Helper()
	f, err := os.Open(repoFile(t, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]docMetric{}
	inMetrics := false // under "## Metrics"
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inMetrics = line == "## Metrics"
		}
		if !inMetrics || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 5 {
			t.Errorf("docs/metrics.md:%d: %d cells, want name | type | labels | component | meaning", n, len(cells))
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		m := docMetric{name: strings.Trim(cells[0], "`"), typ: cells[1], line: n}
		for _, l := range strings.Split(cells[2], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "-" {
				m.labels = append(m.labels, l)
			}
		}
		sort.Strings(m.labels)
		for _, c := range strings.Split(cells[3], ",") {
			m.components = append(m.components, strings.TrimSpace(c))
		}
		if _, dup := out[m.name]; dup {
			t.Errorf("docs/metrics.md:%d: %s is listed twice", n, m.name)
		}
		out[m.name] = m
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("docs/metrics.md lists no metric")
	}
	return out
}

// documented finds the row for a family: its own, or a prefix row's.
func documented(docs map[string]docMetric, name string) (docMetric, bool) {
	if m, ok := docs[name]; ok {
		return m, true
	}
	for _, m := range docs {
		if p, ok := strings.CutSuffix(m.name, "*"); ok && strings.HasPrefix(name, p) {
			return m, true
		}
	}
	return docMetric{}, false
}

// scrape reads a component's /metrics.
func scrape(ctx context.Context, addr string) (map[string]*dto.MetricFamily, error) {
	code, body, err := httpGet(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(strings.NewReader(body))
}

// familyLabels are the label names a family's series carry (histogram
// buckets' le aside).
func familyLabels(f *dto.MetricFamily) []string {
	set := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			set[l.GetName()] = true
		}
	}
	var out []string
	for l := range set {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// checkScraped checks a component's scraped families against the docs:
// each is documented for the component, with its type and labels. It
// returns the documented names it saw.
func checkScraped(t *testing.T, docs map[string]docMetric, component string, families map[string]*dto.MetricFamily) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for name, f := range families {
		m, ok := documented(docs, name)
		if !ok {
			t.Errorf("%s serves %s (%s), which docs/metrics.md does not list", component, name, strings.ToLower(f.GetType().String()))
			continue
		}
		seen[m.name] = true
		if !slices.Contains(m.components, component) {
			t.Errorf("%s serves %s; docs/metrics.md:%d lists it for %v", component, name, m.line, m.components)
		}
		if strings.HasSuffix(m.name, "*") {
			continue
		}
		if typ := strings.ToLower(f.GetType().String()); typ != m.typ {
			t.Errorf("%s: type %s; docs/metrics.md:%d says %s", name, typ, m.line, m.typ)
		}
		if got := familyLabels(f); !slices.Equal(got, m.labels) && !(len(got) == 0 && len(m.labels) == 0) {
			t.Errorf("%s: labels %v; docs/metrics.md:%d says %v", name, got, m.line, m.labels)
		}
	}
	return seen
}
