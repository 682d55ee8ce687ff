package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
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

// ruleSet is one of deploy/monitoring's rule files, with its promtool
// tests and its PrometheusRule component.
type ruleSet struct {
	component string // provisioner, binder
	rules     string // the rule file, from the repository's root
	tests     string // its promtool tests
	cr        string // its PrometheusRule component's folder
}

// ruleSets are the rule files: the provisioner's, for every install, and
// the binder's, only where tether's binder runs.
var ruleSets = []ruleSet{
	{"provisioner", "deploy/monitoring/provisioner-alerts.yaml", "deploy/monitoring/tests/provisioner-alerts_test.yaml", "deploy/monitoring/prometheusrule/provisioner"},
	{"binder", "deploy/monitoring/binder-alerts.yaml", "deploy/monitoring/tests/binder-alerts_test.yaml", "deploy/monitoring/prometheusrule/binder"},
}

// allRules reads every rule set's groups into one rule file, as a
// Prometheus that loads both files holds them.
func allRules(t *testing.T) ruleFile {
	t.Helper()
	var all ruleFile
	for _, rs := range ruleSets {
		var rf ruleFile
		readYAML(t, repoFile(t, rs.rules), &rf)
		all.Groups = append(all.Groups, rf.Groups...)
	}
	return all
}

// TestRulesPromtool: the rules load in Prometheus as they are, and each
// alert's unit tests pass.
func TestRulesPromtool(t *testing.T) {
	for _, rs := range ruleSets {
		promtool(t, "check", "rules", rs.rules)
		promtool(t, "test", "rules", rs.tests)
	}
}

// TestRulesEachAlertTested: every alert has a promtool case, in its rule
// file's tests, where it fires and one where it stays quiet.
func TestRulesEachAlertTested(t *testing.T) {
	for _, rs := range ruleSets {
		var rules ruleFile
		readYAML(t, repoFile(t, rs.rules), &rules)
		var tests struct {
			RuleFiles []string `json:"rule_files"`
			Tests     []struct {
				AlertRuleTest []struct {
					Alertname string           `json:"alertname"`
					ExpAlerts []map[string]any `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		data, err := os.ReadFile(repoFile(t, rs.tests))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &tests); err != nil {
			t.Fatal(err)
		}
		if want := []string{"../" + filepath.Base(rs.rules)}; !slices.Equal(tests.RuleFiles, want) {
			t.Errorf("%s: rule_files %v, want %v", rs.tests, tests.RuleFiles, want)
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
			t.Errorf("no alert in %s", rs.rules)
		}
		for _, name := range names {
			if !fires[name] || !quiet[name] {
				t.Errorf("alert %s of %s: a case where it fires: %v, where it stays quiet: %v (%s)", name, rs.rules, fires[name], quiet[name], rs.tests)
			}
		}
	}
}

// TestRulesSeverity: the provisioner's rules, loaded wherever tether's
// provisioner runs (with kube-controller-manager's binder too), hold no
// critical alert; every alert has a severity of warning or critical.
func TestRulesSeverity(t *testing.T) {
	for _, rs := range ruleSets {
		var rules ruleFile
		readYAML(t, repoFile(t, rs.rules), &rules)
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				switch sev := r.Labels["severity"]; {
				case sev != "warning" && sev != "critical":
					t.Errorf("%s: alert %s has severity %q", rs.rules, r.Alert, sev)
				case sev == "critical" && rs.component == "provisioner":
					t.Errorf("%s: alert %s is critical in the rules a provisioner-only install loads", rs.rules, r.Alert)
				}
			}
		}
	}
}

// TestPrometheusRuleMatches: each PrometheusRule component has its rule
// file's groups, and deploy/monitoring/prometheusrule holds both.
func TestPrometheusRuleMatches(t *testing.T) {
	var names []string
	for _, rs := range ruleSets {
		var rules ruleFile
		readYAML(t, repoFile(t, rs.rules), &rules)
		var cr struct {
			APIVersion string         `json:"apiVersion"`
			Kind       string         `json:"kind"`
			Metadata   map[string]any `json:"metadata"`
			Spec       ruleFile       `json:"spec"`
		}
		readYAML(t, repoFile(t, rs.cr, "prometheusrule.yaml"), &cr)
		if cr.APIVersion != "monitoring.coreos.com/v1" || cr.Kind != "PrometheusRule" {
			t.Errorf("%s/prometheusrule.yaml is a %s %s", rs.cr, cr.APIVersion, cr.Kind)
		}
		if !reflect.DeepEqual(cr.Spec, rules) {
			t.Errorf("%s/prometheusrule.yaml's groups differ from %s's: copy them over", rs.cr, rs.rules)
		}
		var k struct {
			APIVersion string   `json:"apiVersion"`
			Kind       string   `json:"kind"`
			Resources  []string `json:"resources"`
		}
		readYAML(t, repoFile(t, rs.cr, "kustomization.yaml"), &k)
		if k.Kind != "Component" || !slices.Equal(k.Resources, []string{"prometheusrule.yaml"}) {
			t.Errorf("%s/kustomization.yaml: kind %s, resources %v", rs.cr, k.Kind, k.Resources)
		}
		names = append(names, filepath.Base(rs.cr))
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Components []string `json:"components"`
	}
	readYAML(t, repoFile(t, "deploy/monitoring/prometheusrule/kustomization.yaml"), &k)
	if k.Kind != "Component" || !slices.Equal(k.Components, names) {
		t.Errorf("deploy/monitoring/prometheusrule/kustomization.yaml: kind %s, components %v, want %v", k.Kind, k.Components, names)
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

// TestPrometheusRuleRenders: kustomize renders each component into the
// PrometheusRules it is meant to hold.
func TestPrometheusRuleRenders(t *testing.T) {
	for dir, want := range map[string][]string{
		"deploy/monitoring/prometheusrule":             {"tether-provisioner", "tether-binder"},
		"deploy/monitoring/prometheusrule/provisioner": {"tether-provisioner"},
		"deploy/monitoring/prometheusrule/binder":      {"tether-binder"},
	} {
		tmp := t.TempDir()
		rel, err := filepath.Rel(tmp, repoFile(t, dir)) // kustomize takes no absolute path
		if err != nil {
			t.Fatal(err)
		}
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n  - " + rel + "\n"
		if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), tmp)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		var got []string
		for _, r := range res.Resources() {
			if r.GetKind() != "PrometheusRule" || r.GetNamespace() != "tether-system" {
				t.Errorf("%s renders %s %s/%s", dir, r.GetKind(), r.GetNamespace(), r.GetName())
			}
			got = append(got, r.GetName())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s renders %v, want %v", dir, got, want)
		}
	}
}
