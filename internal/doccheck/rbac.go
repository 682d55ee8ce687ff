package doccheck

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/tether-csi/tether/internal/flagdoc"
)

// Grant is who may do what: a component's rights on one resource, in the
// cluster or in its own namespace, from deploy/csi's base or from an
// optional component (Source: "base", or the folder's name under
// deploy/csi/components).
type Grant struct {
	Component  string // "binder", "provisioner": the ServiceAccount tether-<component>
	Resource   string // "persistentvolumes", "persistentvolumeclaims/status"
	Namespaced bool   // granted by a Role in the component's namespace
	Source     string
}

func (g Grant) String() string {
	s := g.Component + " " + g.Resource
	if g.Namespaced {
		s += " (its namespace)"
	}
	if g.Source != "base" {
		s += " with components/" + g.Source
	}
	return s
}

// Grants is the verbs of each grant.
type Grants map[Grant][]string

func (gs Grants) add(g Grant, verbs ...string) {
	for _, v := range verbs {
		if !slices.Contains(gs[g], v) {
			gs[g] = append(gs[g], v)
		}
	}
	sort.Strings(gs[g])
}

// YAMLGrants reads the Roles, ClusterRoles and their bindings of the YAML
// files (multi-document) and returns what they grant each ServiceAccount
// named tether-<component>, all under source.
func YAMLGrants(source string, files ...string) (Grants, error) {
	roles := map[string][]rbacv1.PolicyRule{} // "Role/ns/name", "ClusterRole//name"
	type binding struct {
		role       string
		namespaced bool // a RoleBinding (of a Role or a ClusterRole)
		subjects   []rbacv1.Subject
		where      string
	}
	var bindings []binding
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for i, doc := range splitYAML(b) {
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return nil, fmt.Errorf("%s, document %d: %v", f, i+1, err)
			}
			where := fmt.Sprintf("%s, %s %s", f, meta.Kind, meta.Metadata.Name)
			switch meta.Kind {
			case "Role", "ClusterRole":
				var r rbacv1.ClusterRole // a Role has the same fields
				if err := yaml.UnmarshalStrict(doc, &r); err != nil {
					return nil, fmt.Errorf("%s: %v", where, err)
				}
				ns := r.Namespace
				if meta.Kind == "ClusterRole" {
					ns = ""
				}
				roles[meta.Kind+"/"+ns+"/"+r.Name] = r.Rules
			case "RoleBinding", "ClusterRoleBinding":
				var rb rbacv1.RoleBinding
				if err := yaml.UnmarshalStrict(doc, &rb); err != nil {
					return nil, fmt.Errorf("%s: %v", where, err)
				}
				ns := rb.Namespace
				if rb.RoleRef.Kind == "ClusterRole" {
					ns = ""
				}
				bindings = append(bindings, binding{rb.RoleRef.Kind + "/" + ns + "/" + rb.RoleRef.Name, meta.Kind == "RoleBinding", rb.Subjects, where})
			}
		}
	}
	grants := Grants{}
	for _, b := range bindings {
		rules, ok := roles[b.role]
		if !ok {
			return nil, fmt.Errorf("%s binds %s, which these files do not define", b.where, b.role)
		}
		namespaced := b.namespaced
		for _, s := range b.subjects {
			component, ok := strings.CutPrefix(s.Name, "tether-")
			if s.Kind != "ServiceAccount" || !ok {
				return nil, fmt.Errorf("%s: subject %s %s is not a tether-<component> ServiceAccount", b.where, s.Kind, s.Name)
			}
			for _, r := range rules {
				if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
					return nil, fmt.Errorf("%s: a rule with resourceNames or nonResourceURLs, which the docs' table cannot say", b.where)
				}
				for _, res := range r.Resources {
					grants.add(Grant{component, res, namespaced, source}, r.Verbs...)
				}
			}
		}
	}
	return grants, nil
}

func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if len(bytes.TrimSpace(stripComments([]byte(d)))) > 0 {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func stripComments(b []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// DeployGrants is what deploy/csi grants tether's components: the base's
// rbac-*.yaml, and each optional component's YAML under its folder's name.
func DeployGrants(root string) (Grants, error) {
	base, err := filepath.Glob(filepath.Join(root, "deploy/csi/base/rbac-*.yaml"))
	if err != nil || len(base) == 0 {
		return nil, fmt.Errorf("no deploy/csi/base/rbac-*.yaml (%v)", err)
	}
	grants, err := YAMLGrants("base", base...)
	if err != nil {
		return nil, err
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "deploy/csi/components/*"))
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		var rbac []string
		for _, f := range files {
			if filepath.Base(f) != "kustomization.yaml" {
				rbac = append(rbac, f)
			}
		}
		g, err := YAMLGrants(filepath.Base(dir), rbac...)
		if err != nil {
			return nil, err
		}
		for k, v := range g {
			grants.add(k, v...)
		}
	}
	return grants, nil
}

var (
	knownVerbs  = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	component   = regexp.MustCompile("`deploy/csi/components/([a-z0-9-]+)`")
	parenthesis = regexp.MustCompile(`\s*\([^()]*\)`)
)

// tableRows returns the rows (cells) of the tables of md whose header is
// header, each with its line.
func tableRows(md string, header ...string) (rows [][]string, lines []int) {
	in := false
	for _, l := range ProseLines(md) {
		t := strings.TrimSpace(l.Text)
		if !strings.HasPrefix(t, "|") {
			in = false
			continue
		}
		cells := flagdoc.Cells(t)
		if slices.Equal(cells, header) {
			in = true
			continue
		}
		if !in || strings.Trim(strings.Join(cells, ""), ":-") == "" {
			continue
		}
		rows, lines = append(rows, cells), append(lines, l.N)
	}
	return rows, lines
}

// leadingVerbs reads a verbs cell's leading list: "get, list, watch (the
// informer), then prose" gives get, list, watch; rest is what follows.
func leadingVerbs(cell string) (verbs []string, rest string) {
	parts := flagdoc.SplitTop(cell)
	for i, p := range parts {
		v := strings.TrimSpace(parenthesis.ReplaceAllString(p, ""))
		if !slices.Contains(knownVerbs, v) {
			return verbs, strings.Join(parts[i:], ", ")
		}
		verbs = append(verbs, v)
	}
	return verbs, ""
}

// DocGrants reads docs/deploy.md's table "component | resource | verbs |
// why". A row's resources are comma-separated; "(its namespace)" after
// them means a Role in the component's namespace. Its verbs are a list
// ("get, list, watch"), or, for several resources with verbs of their
// own, one list per resource separated by ";" with "/" between verbs
// ("get/create/update; list/delete"). Verbs followed by "only with
// `deploy/csi/components/<name>`" are granted by that optional component.
func DocGrants(md string) (Grants, []string) {
	grants := Grants{}
	var problems []string
	rows, lines := tableRows(md, "component", "resource", "verbs", "why")
	if len(rows) == 0 {
		return nil, []string{"no table with the header | component | resource | verbs | why |"}
	}
	for i, cells := range rows {
		at := fmt.Sprintf("line %d", lines[i])
		if len(cells) != 4 {
			problems = append(problems, at+": not 4 cells")
			continue
		}
		namespaced := strings.Contains(cells[1], "(its namespace)")
		resources := flagdoc.SplitTop(strings.TrimSpace(parenthesis.ReplaceAllString(cells[1], "")))
		var perResource [][]string
		source := "base"
		if parts := splitOutside(cells[2], ';'); len(parts) > 1 {
			for _, part := range parts {
				var vs []string
				for _, v := range strings.Split(strings.TrimSpace(part), "/") {
					vs = append(vs, strings.TrimSpace(v))
				}
				perResource = append(perResource, vs)
			}
			if len(perResource) != len(resources) {
				problems = append(problems, fmt.Sprintf("%s: %d resources but %d verb lists", at, len(resources), len(perResource)))
				continue
			}
		} else {
			verbs, rest := leadingVerbs(cells[2])
			if m := component.FindStringSubmatch(rest); m != nil {
				source = m[1]
			} else if rest != "" {
				problems = append(problems, fmt.Sprintf("%s: the verbs cell goes on with %q: only `deploy/csi/components/<name>` may follow the verbs", at, rest))
			}
			for range resources {
				perResource = append(perResource, verbs)
			}
		}
		for j, res := range resources {
			for _, v := range perResource[j] {
				if !slices.Contains(knownVerbs, v) {
					problems = append(problems, fmt.Sprintf("%s: %q is not a verb", at, v))
				}
			}
			if len(perResource[j]) == 0 {
				problems = append(problems, fmt.Sprintf("%s: no verbs for %s", at, res))
			}
			grants.add(Grant{cells[0], res, namespaced, source}, perResource[j]...)
		}
	}
	return grants, problems
}

// CompareGrants returns a problem for each grant the two sides do not
// have alike.
func CompareGrants(doc, yml Grants) []string {
	var problems []string
	for g, verbs := range yml {
		if d, ok := doc[g]; !ok {
			problems = append(problems, fmt.Sprintf("deploy/csi grants %s %s; docs/deploy.md's table has no such row", g, strings.Join(verbs, ", ")))
		} else if !slices.Equal(d, verbs) {
			problems = append(problems, fmt.Sprintf("%s: docs/deploy.md says %s, deploy/csi grants %s", g, strings.Join(d, ", "), strings.Join(verbs, ", ")))
		}
	}
	for g, verbs := range doc {
		if _, ok := yml[g]; !ok {
			problems = append(problems, fmt.Sprintf("docs/deploy.md's table lists %s %s, which deploy/csi does not grant", g, strings.Join(verbs, ", ")))
		}
	}
	sort.Strings(problems)
	return problems
}

// ByResource is the verbs per resource, scopes and sources merged.
func ByResource(gs Grants, component string) map[string][]string {
	out := map[string][]string{}
	for g, verbs := range gs {
		if g.Component != component {
			continue
		}
		for _, v := range verbs {
			if !slices.Contains(out[g.Resource], v) {
				out[g.Resource] = append(out[g.Resource], v)
			}
		}
		sort.Strings(out[g.Resource])
	}
	return out
}

// RulesByResource reads every Role and ClusterRole of the files (EP's
// rbac.yaml) into verbs per resource, commented-out rules not counted.
func RulesByResource(files ...string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, doc := range splitYAML(b) {
			var r rbacv1.ClusterRole
			if err := yaml.Unmarshal(doc, &r); err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			for _, rule := range r.Rules {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						if !slices.Contains(out[res], v) {
							out[res] = append(out[res], v)
						}
					}
					sort.Strings(out[res])
				}
			}
		}
	}
	return out, nil
}

var onResource = regexp.MustCompile(`^(.*?)\s+on\s+([a-z/]+)\s*$`)

// CheckEPTable checks docs/deploy.md's table "resource | tether's
// provisioner uses | EP v6.4.0's rbac.yaml grants | enough?": each row's
// EP column against EP's rules (its leading verbs; "nothing" or "a
// commented-out rule" for none), and its tether column against tether's
// (the leading verbs of each ";"-separated clause, "get on nodes" for one
// resource of the row; "nothing" for none), and that every resource
// tether's provisioner is granted has a row.
func CheckEPTable(md string, tether, ep map[string][]string) []string {
	var problems []string
	rows, lines := tableRows(md, "resource", "tether's provisioner uses", "EP v6.4.0's rbac.yaml grants", "enough?")
	if len(rows) == 0 {
		return []string{"no table with the header | resource | tether's provisioner uses | EP v6.4.0's rbac.yaml grants | enough? |"}
	}
	seen := map[string]bool{}
	for i, cells := range rows {
		at := fmt.Sprintf("line %d", lines[i])
		if len(cells) != 4 {
			problems = append(problems, at+": not 4 cells")
			continue
		}
		resources := flagdoc.SplitTop(strings.TrimSpace(parenthesis.ReplaceAllString(cells[0], "")))
		uses := map[string][]string{}
		for _, clause := range splitOutside(cells[1], ';') {
			clause = strings.TrimSpace(clause)
			only := ""
			if m := onResource.FindStringSubmatch(parenthesis.ReplaceAllString(clause, "")); m != nil {
				clause, only = m[1], m[2]
			}
			verbs, _ := leadingVerbs(clause)
			if len(verbs) == 0 && !strings.HasPrefix(clause, "nothing") {
				problems = append(problems, fmt.Sprintf("%s: tether's column: %q names no verb", at, clause))
			}
			for _, res := range resources {
				if only == "" || only == res {
					uses[res] = append(uses[res], verbs...)
				}
			}
		}
		epVerbs, rest := leadingVerbs(cells[2])
		if len(epVerbs) == 0 && !strings.HasPrefix(rest, "nothing") && !strings.HasPrefix(rest, "a commented-out rule") {
			problems = append(problems, fmt.Sprintf("%s: EP's column: %q names no verb (or nothing, or a commented-out rule)", at, cells[2]))
		}
		for _, res := range resources {
			seen[res] = true
			want := slices.Sorted(slices.Values(ep[res]))
			if got := sortedSet(epVerbs); !slices.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("%s: %s: EP's column says %v, EP's rbac.yaml grants %v", at, res, got, want))
			}
			if got, want := sortedSet(uses[res]), tether[res]; !slices.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("%s: %s: tether's column says %v, deploy/csi grants %v", at, res, got, want))
			}
		}
	}
	for res := range tether {
		if !seen[res] {
			problems = append(problems, fmt.Sprintf("deploy/csi grants the provisioner %s; the EP comparison has no row for it", res))
		}
	}
	sort.Strings(problems)
	return problems
}

// splitOutside splits s at each sep outside backticks and parentheses.
func splitOutside(s string, sep rune) []string {
	var parts []string
	depth, code, start := 0, false, 0
	for i, c := range s {
		switch {
		case c == '`':
			code = !code
		case code:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == sep && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

func sortedSet(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return slices.Compact(out)
}
