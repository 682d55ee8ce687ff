package flagdoc

import (
	"slices"
	"testing"
)

func TestMentions(t *testing.T) {
	doc := "With `--orphan-sweep-interval` (default 10m) and `--orphan-policy=delete`,\n" +
		"```\n`--in-a-fence` (default 1)\n```\n" +
		"`--workers` (its default, 100); `--max-delay` (1m by default), `-v`, `--kube-api-qps=<n>`\n" +
		"`--min-age` (1h), not `kubectl get -n x`\n"
	want := []Mention{
		{Line: 1, Name: "orphan-sweep-interval", Default: "10m"},
		{Line: 1, Name: "orphan-policy", Value: "delete", HasValue: true},
		{Line: 5, Name: "workers", Default: "100"},
		{Line: 5, Name: "max-delay", Default: "1m"},
		{Line: 5, Name: "v"},
		{Line: 5, Name: "kube-api-qps", Value: "<n>", HasValue: true},
		{Line: 6, Name: "min-age"},
	}
	if got := Mentions(doc); !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestCheckMentions(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Mention
		want []string
	}{
		{"a right default", Mention{Line: 1, Name: "max-delay", Default: "1m"}, nil},
		{"a wrong default", Mention{Line: 2, Name: "max-delay", Default: "2m"}, []string{`line 2: --max-delay: documented default 2m is another duration, the flag's default is "1m0s"`}},
		{"a wrong number", Mention{Line: 2, Name: "workers", Default: "16"}, []string{`line 2: --workers: documented default 16 is another number, the flag's default is "100"`}},
		{"a value that parses", Mention{Line: 3, Name: "workers", Value: "3", HasValue: true}, nil},
		{"a bool's value", Mention{Line: 3, Name: "leader-elect", Value: "false", HasValue: true}, nil},
		{"a value that does not parse", Mention{Line: 4, Name: "max-delay", Value: "soon", HasValue: true}, []string{"line 4: --max-delay=soon: parse error"}},
		{"a placeholder", Mention{Line: 5, Name: "workers", Value: "<n>", HasValue: true}, nil},
		{"another program's flag", Mention{Line: 6, Name: "controllers", Value: "*,-x", HasValue: true, Default: "x"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckMentions(testFlags(), []Mention{tc.m}); !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
