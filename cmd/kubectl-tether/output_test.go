package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/tether-csi/tether/pkg/explain"
)

// TestAllPendingScope: --all-pending is the table of one namespace (-n's,
// else the kubeconfig context's); -A, as in kubectl, of every namespace.
func TestAllPendingScope(t *testing.T) {
	inOther := func(c *v1.PersistentVolumeClaim) { c.Namespace = "other" }
	objs := []runtime.Object{manualClass(), pvc("small", "manual", "5Gi"), pvc("elsewhere", "manual", "5Gi", inOther),
		pv("pv-2", "manual", "1Gi", "")}
	tests := []struct {
		args      []string
		scope     string
		want, not []string // claims in the table, and not
	}{
		{args: []string{"--all-pending"}, scope: "namespace default", want: []string{"small"}, not: []string{"elsewhere"}},
		{args: []string{"--all-pending", "-n", "other"}, scope: "namespace other", want: []string{"elsewhere"}, not: []string{"small"}},
		{args: []string{"-A"}, scope: "all namespaces", want: []string{"small", "elsewhere"}},
		{args: []string{"--all-namespaces", "--all-pending"}, scope: "all namespaces", want: []string{"small", "elsewhere"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, status := whyOut(t, fake.NewClientset(objs...), append(tt.args, "-o", "json")...)
			if status != explain.ExitNotBound {
				t.Errorf("status %d, want %d\n%s", status, explain.ExitNotBound, out)
			}
			var rep pendingReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var names []string
			for _, r := range rep.Claims {
				names = append(names, r.Name)
			}
			if rep.Scope != tt.scope {
				t.Errorf("scope %q, want %q", rep.Scope, tt.scope)
			}
			for _, w := range tt.want {
				if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+w+" ") {
					t.Errorf("%s not in the table %q", w, names)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(" "+strings.Join(names, " ")+" ", " "+n+" ") {
					t.Errorf("%s in the table %q", n, names)
				}
			}
		})
	}
}

// TestOutputFormats: -o json and -o yaml print the same struct with the
// same field names (the json tags), the text is for a person, and the exit
// status is the same whatever the format.
func TestOutputFormats(t *testing.T) {
	objs := []runtime.Object{manualClass(), pvc("small", "manual", "5Gi"), pv("pv-2", "manual", "1Gi", "")}
	tests := []struct {
		name string
		args []string
		into func() any // a fresh value of what json and yaml print
		text string     // the first words of the text
	}{
		{name: "one claim", args: []string{"default/small"}, into: func() any { return &explain.Explanation{} }, text: "Claim default/small: Pending"},
		{name: "table", args: []string{"--all-pending"}, into: func() any { return &pendingReport{} }, text: "1 claim waits: 1 TooSmall (namespace default)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decoded := map[string]any{}
			for _, format := range []string{outputText, outputJSON, outputYAML} {
				o, err := parse(append(tt.args, "-o", format))
				if err != nil {
					t.Fatal(err)
				}
				var out, errs bytes.Buffer
				if status := execute(t.Context(), fake.NewClientset(objs...), o, ns, &out, &errs); status != explain.ExitNotBound || errs.Len() > 0 {
					t.Errorf("-o %s: status %d, want %d; stderr %q", format, status, explain.ExitNotBound, errs.String())
				}
				v := tt.into()
				switch format {
				case outputText:
					if !strings.HasPrefix(out.String(), tt.text) {
						t.Errorf("-o text does not begin with %q:\n%s", tt.text, out.String())
					}
					continue
				case outputJSON:
					err = json.Unmarshal(out.Bytes(), v)
				case outputYAML:
					if strings.HasPrefix(strings.TrimSpace(out.String()), "{") {
						t.Errorf("-o yaml printed JSON:\n%s", out.String())
					}
					err = yaml.UnmarshalStrict(out.Bytes(), v)
				}
				if err != nil {
					t.Fatalf("-o %s: %v\n%s", format, err, out.String())
				}
				decoded[format] = v
			}
			if !reflect.DeepEqual(decoded[outputJSON], decoded[outputYAML]) {
				t.Errorf("json and yaml differ:\n%+v\n%+v", decoded[outputJSON], decoded[outputYAML])
			}
		})
	}
}
