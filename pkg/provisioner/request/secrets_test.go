package request

import (
	"maps"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestResolveSecret(t *testing.T) {
	vars := TemplateVars{
		PVName: "pvc-4f9d1c2e", PVCName: "data", PVCNamespace: "apps",
		PVCAnnotations: kv("team", "blue", "secret.example.com/name", "db-creds", "bad", "Not_Valid"),
	}
	tests := []struct {
		name, tmplName, tmplNS string
		vars                   *TemplateVars // nil: vars
		wantName, wantNS       string
		wantErr                string
	}{
		{name: "literal names pass through", tmplName: "creds", tmplNS: "storage", wantName: "creds", wantNS: "storage"},
		{name: "literal dotted name", tmplName: "creds.v1", tmplNS: "storage", wantName: "creds.v1", wantNS: "storage"},
		{name: "pv.name in the name", tmplName: "${pv.name}", tmplNS: "storage", wantName: "pvc-4f9d1c2e", wantNS: "storage"},
		{name: "pvc.name in the name", tmplName: "${pvc.name}-creds", tmplNS: "storage", wantName: "data-creds", wantNS: "storage"},
		{name: "pvc.namespace in the name", tmplName: "${pvc.namespace}-creds", tmplNS: "storage", wantName: "apps-creds", wantNS: "storage"},
		{name: "annotation in the name", tmplName: "${pvc.annotations['team']}-creds", tmplNS: "storage", wantName: "blue-creds", wantNS: "storage"},
		{name: "annotation with a prefixed key", tmplName: "${pvc.annotations['secret.example.com/name']}", tmplNS: "storage", wantName: "db-creds", wantNS: "storage"},
		{name: "several variables", tmplName: "${pvc.namespace}.${pvc.name}.${pv.name}", tmplNS: "storage", wantName: "apps.data.pvc-4f9d1c2e", wantNS: "storage"},
		{name: "pv.name in the namespace", tmplName: "creds", tmplNS: "${pv.name}", wantName: "creds", wantNS: "pvc-4f9d1c2e"},
		{name: "pvc.namespace in the namespace", tmplName: "${pvc.name}", tmplNS: "${pvc.namespace}", wantName: "data", wantNS: "apps"},
		{name: "pvc.name in the namespace", tmplName: "creds", tmplNS: "${pvc.name}", wantErr: "secret namespace template \"${pvc.name}\": ${pvc.name} is not allowed here"},
		{name: "annotation in the namespace", tmplName: "creds", tmplNS: "${pvc.annotations['team']}", wantErr: "${pvc.annotations['team']} is not allowed here"},
		{name: "missing annotation", tmplName: "${pvc.annotations['owner']}", tmplNS: "storage", wantErr: `the claim has no annotation "owner"`},
		{name: "missing annotation, no annotations at all", tmplName: "${pvc.annotations['team']}", tmplNS: "storage",
			vars: &TemplateVars{PVName: "pv", PVCName: "data", PVCNamespace: "apps"}, wantErr: `no annotation "team"`},
		{name: "unknown variable in the name", tmplName: "${pvc.uid}", tmplNS: "storage", wantErr: "${pvc.uid} is not allowed here"},
		{name: "unknown variable in the namespace", tmplName: "creds", tmplNS: "${node.name}", wantErr: "${node.name} is not allowed here"},
		{name: "empty variable", tmplName: "${}", tmplNS: "storage", wantErr: "${} is not allowed here"},
		{name: "annotation with double quotes", tmplName: `${pvc.annotations["team"]}`, tmplNS: "storage", wantErr: "is not allowed here"},
		{name: "name not a DNS subdomain", tmplName: "Creds", tmplNS: "storage", wantErr: `secret name "Creds" (from "Creds") is not valid`},
		{name: "name from an annotation not a DNS subdomain", tmplName: "${pvc.annotations['bad']}", tmplNS: "storage", wantErr: `secret name "Not_Valid"`},
		{name: "unterminated variable", tmplName: "${pvc.name", tmplNS: "storage", wantErr: "is not valid"},
		{name: "empty name", tmplName: "", tmplNS: "storage", wantErr: "secret name \"\""},
		{name: "namespace not a DNS label", tmplName: "creds", tmplNS: "storage.system", wantErr: `secret namespace "storage.system"`},
		{name: "empty namespace", tmplName: "creds", tmplNS: "", wantErr: `secret namespace ""`},
		{name: "name too long", tmplName: strings.Repeat("a", 254), tmplNS: "storage", wantErr: "is not valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := vars
			if tt.vars != nil {
				v = *tt.vars
			}
			got, err := ResolveSecret(SecretTemplate{Name: tt.tmplName, Namespace: tt.tmplNS}, v)
			if !checkErr(t, err, tt.wantErr) {
				if got != nil {
					t.Errorf("got %v with an error", got)
				}
				return
			}
			if got.Name != tt.wantName || got.Namespace != tt.wantNS {
				t.Errorf("got %s/%s, want %s/%s", got.Namespace, got.Name, tt.wantNS, tt.wantName)
			}
		})
	}
}

func TestSecretData(t *testing.T) {
	tests := []struct {
		name   string
		secret *v1.Secret
		want   map[string]string
	}{
		{name: "empty", secret: &v1.Secret{}, want: map[string]string{}},
		{name: "data", secret: &v1.Secret{Data: map[string][]byte{"user": []byte("admin"), "key": {0xff, 0x00}}},
			want: kv("user", "admin", "key", "\xff\x00")},
		{name: "stringData", secret: &v1.Secret{StringData: kv("token", "abc")}, want: kv("token", "abc")},
		{name: "both merged, stringData wins", secret: &v1.Secret{
			Data:       map[string][]byte{"user": []byte("admin"), "pass": []byte("old")},
			StringData: kv("pass", "new", "token", "abc"),
		}, want: kv("user", "admin", "pass", "new", "token", "abc")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SecretData(tt.secret); !maps.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzResolveSecret(f *testing.F) {
	f.Add("${pvc.name}-creds", "${pvc.namespace}", "pvc-1", "data", "apps", "team", "blue")
	f.Add("${pvc.annotations['team']}", "${pv.name}", "pvc-1", "data", "apps", "team", "blue")
	f.Add("${pvc.annotations['x']}", "storage", "pvc-1", "data", "apps", "team", "blue")
	f.Add("literal", "${pvc.name}", "pvc-1", "data", "apps", "", "")
	f.Add("${pv.name}.${pvc.namespace}", "kube-system", "pvc-1", "Data", "apps", "k", "v")
	f.Add("${${pvc.name}}", "${", "", "", "", "'", "}")
	f.Fuzz(func(t *testing.T, name, namespace, pvName, pvcName, pvcNS, annKey, annVal string) {
		vars := TemplateVars{PVName: pvName, PVCName: pvcName, PVCNamespace: pvcNS,
			PVCAnnotations: map[string]string{annKey: annVal}}
		ref, err := ResolveSecret(SecretTemplate{Name: name, Namespace: namespace}, vars)
		if err != nil {
			if ref != nil {
				t.Errorf("a reference %v with the error %v", ref, err)
			}
			return
		}
		if errs := validation.IsDNS1123Subdomain(ref.Name); len(errs) > 0 {
			t.Errorf("name %q is not a DNS subdomain: %v", ref.Name, errs)
		}
		if errs := validation.IsDNS1123Label(ref.Namespace); len(errs) > 0 {
			t.Errorf("namespace %q is not a DNS label: %v", ref.Namespace, errs)
		}
		// A claim's author controls its name and annotations, never the
		// namespace: a namespace template that resolves must not have used them.
		if strings.Contains(namespace, "${pvc.name}") || strings.Contains(namespace, "${pvc.annotations") {
			t.Errorf("namespace template %q resolved to %q", namespace, ref.Namespace)
		}
	})
}
