package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboardPath is tether's Grafana dashboard, from the repository's root.
const dashboardPath = "deploy/monitoring/dashboard.json"

// dashboardQuery is one PromQL query of the dashboard: a panel target's
// expr or a template variable's query, and where it is.
type dashboardQuery struct {
	where string
	expr  string
}

// grafanaPanel is a dashboard panel, as far as these tests read it; a row
// may hold panels of its own.
type grafanaPanel struct {
	ID      int            `json:"id"`
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// readDashboardQueries reads every query of deploy/monitoring/dashboard.json,
// checking the dashboard's shape on the way: a uid, unique panel ids, a
// target with an expr in every panel but rows, and only Prometheus query
// variables besides the data source.
func readDashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	data, err := os.ReadFile(repoFile(t, dashboardPath))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string         `json:"uid"`
		Title      string         `json:"title"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: uid %q, title %q", dashboardPath, d.UID, d.Title)
	}
	var out []dashboardQuery
	ids := map[int]bool{}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", dashboardPath, p.ID)
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", dashboardPath, p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q, target %s: no expr", dashboardPath, p.Title, tg.RefID)
				}
				out = append(out, dashboardQuery{where: fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), expr: tg.Expr})
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			continue
		case "query":
		default:
			t.Errorf("%s: variable %s of type %s", dashboardPath, v.Name, v.Type)
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Errorf("%s: variable %s: query %s", dashboardPath, v.Name, v.Query)
				continue
			}
		}
		expr, ok := variableExpr(q.Query)
		if !ok {
			t.Errorf("%s: variable %s: query %q is not label_values(SELECTOR, LABEL)", dashboardPath, v.Name, q.Query)
			continue
		}
		out = append(out, dashboardQuery{where: "variable " + v.Name, expr: expr})
	}
	if len(out) == 0 {
		t.Fatalf("%s has no query", dashboardPath)
	}
	return out
}

// labelValues matches Grafana's label_values(SELECTOR, LABEL).
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// variableExpr is the PromQL selector of a template variable's
// label_values query.
func variableExpr(query string) (string, bool) {
	m := labelValues.FindStringSubmatch(query)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// grafanaVar matches a dashboard variable: $name or ${name}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)\}?`)

// expandVars writes a query as Grafana would send it: its interval
// variables ($__rate_interval, ...) as 1m, every other variable as .*, the
// value of "All".
func expandVars(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.HasPrefix(strings.Trim(v, "${}"), "__") {
			return "1m"
		}
		return ".*"
	})
}

// promqlNoise are the parts of a query that hold no metric name: strings,
// label matchers, ranges, and the label lists of by, without, on,
// ignoring and group_left/right.
var promqlNoise = []*regexp.Regexp{
	regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`"),
	regexp.MustCompile(`\{[^}]*\}`),
	regexp.MustCompile(`\[[^\]]*\]`),
	regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`),
}

// promqlWord matches a name or a number, with what precedes it.
var promqlWord = regexp.MustCompile(`[0-9.]*[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)

// promqlKeywords are PromQL's words that are no metric.
var promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"inf": true, "nan": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// exprMetrics are the metric names a PromQL query selects, in order of
// first use: the names that are neither functions, aggregations,
// keywords nor numbers.
func exprMetrics(expr string) []string {
	for _, re := range promqlNoise {
		expr = re.ReplaceAllString(expr, " ")
	}
	var out []string
	for _, w := range promqlWord.FindAllString(expr, -1) {
		if strings.HasSuffix(w, "(") || w[0] == '.' || (w[0] >= '0' && w[0] <= '9') {
			continue // a function or aggregation, or a number such as 1e3
		}
		if !promqlKeywords[strings.ToLower(w)] && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func TestExprMetrics(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`histogram_quantile(0.99, sum by (le, job) (rate(a_bucket{job=~"x|y", le!="+Inf"}[5m])))`, []string{"a_bucket"}},
		{`sum without (instance) (b) / on (job) group_left (name) c > bool 1e3 or d offset 5m`, []string{"b", "c", "d"}},
		{`max(e) > 30 * 60 and absent(f{a="sum(g)"})`, []string{"e", "f"}},
		{`label_replace(h, "dst", "$1", "src", "(.*)") unless h`, []string{"h"}},
		{`rate (i[1m])`, []string{"i"}},
	} {
		if got := exprMetrics(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("exprMetrics(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestExpandVars(t *testing.T) {
	got := expandVars(`rate(x{job=~"$job", instance=~"${instance}"}[$__rate_interval])`)
	if want := `rate(x{job=~".*", instance=~".*"}[1m])`; got != want {
		t.Errorf("expandVars = %s, want %s", got, want)
	}
}

// familyOf is the metric family a series name belongs to, by the
// family's type: a histogram's _bucket, _sum and _count are its own.
func familyOf(name string, isHistogram func(string) bool) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && isHistogram(base) {
			return base
		}
	}
	return name
}

// TestDashboard: every query of the dashboard names only metrics that
// docs/metrics.md lists (TestMonitoring checks those against what the
// binaries serve, and asks a real Prometheus to run each query), and
// follows the job variable.
func TestDashboard(t *testing.T) {
	docs := readDocMetrics(t)
	isHistogram := func(name string) bool { m, ok := docs[name]; return ok && m.typ == "histogram" }
	for _, q := range readDashboardQueries(t) {
		if q.where != "variable job" && !strings.Contains(q.expr, "$job") {
			t.Errorf("%s: %s: does not follow $job", dashboardPath, q.where)
		}
		names := exprMetrics(expandVars(q.expr))
		if len(names) == 0 {
			t.Errorf("%s: %s: no metric in %s", dashboardPath, q.where, q.expr)
		}
		for _, name := range names {
			if _, ok := documented(docs, familyOf(name, isHistogram)); !ok {
				t.Errorf("%s: %s: %s is no metric docs/metrics.md lists", dashboardPath, q.where, name)
			}
		}
	}
}

// checkDashboardOnPrometheus asks the Prometheus to run every query of
// the dashboard, as Grafana sends it with "All" chosen: a query that does
// not parse fails. Every metric a query names must be a family one of the
// scraped processes serves (or one notScrapedHere lists).
func checkDashboardOnPrometheus(t *testing.T, prom *prometheus, served map[string]string) {
	t.Helper()
	isHistogram := func(name string) bool { return served[name] == "histogram" }
	queries := readDashboardQueries(t)
	t.Logf("%d queries of %s run on Prometheus", len(queries), dashboardPath)
	for _, q := range queries {
		expr := expandVars(q.expr)
		if err := prom.query(t.Context(), expr); err != nil {
			t.Errorf("%s: %s: %v", dashboardPath, q.where, err)
		}
		for _, name := range exprMetrics(expr) {
			family := familyOf(name, isHistogram)
			if _, ok := served[family]; !ok {
				if _, elsewhere := notScrapedHere[family]; !elsewhere {
					t.Errorf("%s: %s: %s is no metric the binder or a provisioner serves", dashboardPath, q.where, name)
				}
			}
		}
	}
}

// query runs an instant query; an expression Prometheus cannot parse is
// an error (400, bad_data).
func (p *prometheus) query(ctx context.Context, expr string) error {
	code, body, err := httpGet(ctx, "http://"+p.addr+"/api/v1/query?query="+url.QueryEscape(expr))
	if err != nil {
		return err
	}
	var resp struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		return fmt.Errorf("/api/v1/query: %d %s", code, body)
	}
	if code != http.StatusOK || resp.Status != "success" {
		return fmt.Errorf("/api/v1/query %s: %d %s: %s", expr, code, resp.ErrorType, resp.Error)
	}
	return nil
}
