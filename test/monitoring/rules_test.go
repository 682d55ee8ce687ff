package monitoring

import (
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// ruleFile is a Prometheus rule file, as far as these tests read it.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func alertNames(rf ruleFile) []string {
	var names []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	slices.Sort(names)
	return names
}

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(needTool(t, "promtool"), args...)
	cmd.Dir = repoFile(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// TestRulesPromtool: the rules load in Prometheus as they are, and each
// alert's unit tests pass.
func TestRulesPromtool(t *testing.T) {
	promtool(t, "check", "rules", "deploy/monitoring/alerts.yaml")
	promtool(t, "test", "rules", "deploy/monitoring/tests/alerts_test.yaml")
}

// TestRulesEachAlertTested: every alert has a promtool case where it fires
// and one where it stays quiet.
func TestRulesEachAlertTested(t *testing.T) {
	var rules ruleFile
	readYAML(t, repoFile(t, "deploy/monitoring/alerts.yaml"), &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	data, err := os.ReadFile(repoFile(t, "deploy/monitoring/tests/alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	names := alertNames(rules)
	if len(names) == 0 {
		t.Fatal("no alert in deploy/monitoring/alerts.yaml")
	}
	for _, name := range names {
		if !fires[name] || !quiet[name] {
			t.Errorf("alert %s: a case where it fires: %v, where it stays quiet: %v (deploy/monitoring/tests/alerts_test.yaml)", name, fires[name], quiet[name])
		}
	}
}

// TestPrometheusRuleMatches: the Prometheus Operator variant has the rule
// file's groups, and renders as a kustomize component.
func TestPrometheusRuleMatches(t *testing.T) {
	var rules ruleFile
	readYAML(t, repoFile(t, "deploy/monitoring/alerts.yaml"), &rules)
	var cr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       ruleFile       `json:"spec"`
	}
	readYAML(t, repoFile(t, "deploy/monitoring/prometheusrule/prometheusrule.yaml"), &cr)
	if cr.APIVersion != "monitoring.coreos.com/v1" || cr.Kind != "PrometheusRule" {
		t.Errorf("prometheusrule.yaml is a %s %s", cr.APIVersion, cr.Kind)
	}
	if !reflect.DeepEqual(cr.Spec, rules) {
		t.Errorf("deploy/monitoring/prometheusrule/prometheusrule.yaml's groups differ from deploy/monitoring/alerts.yaml's: copy them over")
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	readYAML(t, repoFile(t, "deploy/monitoring/prometheusrule/kustomization.yaml"), &k)
	if k.Kind != "Component" || !slices.Equal(k.Resources, []string{"prometheusrule.yaml"}) {
		t.Errorf("deploy/monitoring/prometheusrule/kustomization.yaml: kind %s, resources %v", k.Kind, k.Resources)
	}
}

// shortRanges matches the range of a range selector, for the test copy.
var shortRanges = regexp.MustCompile(`\[[0-9]+[smhd]\]`)

// shortRules is a copy of the rules that a test can see fire in seconds:
// every `for` is forDur and every range selector's range is window. The
// thresholds stay.
func shortRules(rf ruleFile, forDur, window string) ruleFile {
	var out ruleFile
	for _, g := range rf.Groups {
		g2 := ruleGroup{Name: g.Name}
		for _, r := range g.Rules {
			if r.For != "" {
				r.For = forDur
			}
			r.Expr = shortRanges.ReplaceAllString(r.Expr, "["+window+"]")
			g2.Rules = append(g2.Rules, r)
		}
		out.Groups = append(out.Groups, g2)
	}
	return out
}

func TestShortRules(t *testing.T) {
	in := ruleFile{Groups: []ruleGroup{{Name: "g", Rules: []rule{
		{Alert: "A", Expr: `sum by (c) (increase(x[10m])) > 0 and rate(y[1h]) > 0`, For: "15m"},
		{Alert: "B", Expr: `z > 30 * 60`},
	}}}}
	got := shortRules(in, "5s", "1m")
	want := ruleFile{Groups: []ruleGroup{{Name: "g", Rules: []rule{
		{Alert: "A", Expr: `sum by (c) (increase(x[1m])) > 0 and rate(y[1m]) > 0`, For: "5s"},
		{Alert: "B", Expr: `z > 30 * 60`},
	}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shortRules = %+v, want %+v", got, want)
	}
}
