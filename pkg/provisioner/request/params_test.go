package request

import (
	"maps"
	"reflect"
	"strings"
	"testing"
)

func TestParseClassParams(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]string
		want    ClassParams
		wantErr string
	}{
		{
			name: "nil parameters",
			want: ClassParams{Secrets: map[SecretKind]SecretTemplate{}, Driver: map[string]string{}},
		},
		{
			name:   "driver parameters are kept as they are",
			params: kv("type", "ssd", "Replicas", "3", "csi.example.com/x", "y"),
			want: ClassParams{Secrets: map[SecretKind]SecretTemplate{},
				Driver: kv("type", "ssd", "Replicas", "3", "csi.example.com/x", "y")},
		},
		{
			name:   "reserved keys are stripped, others kept",
			params: kv("csi.storage.k8s.io/fstype", "xfs", "type", "ssd"),
			want:   ClassParams{FSType: "xfs", Secrets: map[SecretKind]SecretTemplate{}, Driver: kv("type", "ssd")},
		},
		{
			// external-provisioner reads the deprecated key and still
			// passes it to the driver: it is not in the reserved namespace.
			name:   "deprecated fstype key is read and passed on",
			params: kv("fstype", "ext3", "type", "ssd"),
			want: ClassParams{FSType: "ext3", Secrets: map[SecretKind]SecretTemplate{}, Driver: kv("fstype", "ext3", "type", "ssd"),
				Warnings: []string{`"fstype" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/fstype" instead`}},
		},
		{
			name:    "the reserved fstype key and the deprecated one together are an error, as in external-provisioner",
			params:  kv("fstype", "ext3", "csi.storage.k8s.io/fstype", "xfs"),
			wantErr: "cannot both be set",
		},
		{
			name:   "reserved keys match case-insensitively",
			params: kv("CSI.Storage.K8s.io/FSType", "xfs", "Csi.Storage.K8s.Io/Provisioner-Secret-Name", "s", "csi.storage.k8s.io/PROVISIONER-secret-namespace", "ns"),
			want: ClassParams{FSType: "xfs", Driver: map[string]string{},
				Secrets: map[SecretKind]SecretTemplate{ProvisionerSecret: {Name: "s", Namespace: "ns"}}},
		},
		{
			name: "every secret kind",
			params: kv(
				"csi.storage.k8s.io/provisioner-secret-name", "p", "csi.storage.k8s.io/provisioner-secret-namespace", "pn",
				"csi.storage.k8s.io/controller-publish-secret-name", "cp", "csi.storage.k8s.io/controller-publish-secret-namespace", "cpn",
				"csi.storage.k8s.io/node-stage-secret-name", "ns", "csi.storage.k8s.io/node-stage-secret-namespace", "nsn",
				"csi.storage.k8s.io/node-publish-secret-name", "np", "csi.storage.k8s.io/node-publish-secret-namespace", "npn",
				"csi.storage.k8s.io/controller-expand-secret-name", "ce", "csi.storage.k8s.io/controller-expand-secret-namespace", "cen",
				"csi.storage.k8s.io/node-expand-secret-name", "ne", "csi.storage.k8s.io/node-expand-secret-namespace", "nen",
				"type", "ssd"),
			want: ClassParams{Driver: kv("type", "ssd"), Secrets: map[SecretKind]SecretTemplate{
				ProvisionerSecret:       {Name: "p", Namespace: "pn"},
				ControllerPublishSecret: {Name: "cp", Namespace: "cpn"},
				NodeStageSecret:         {Name: "ns", Namespace: "nsn"},
				NodePublishSecret:       {Name: "np", Namespace: "npn"},
				ControllerExpandSecret:  {Name: "ce", Namespace: "cen"},
				NodeExpandSecret:        {Name: "ne", Namespace: "nen"},
			}},
		},
		{
			name:   "templates are kept unresolved",
			params: kv("csi.storage.k8s.io/node-stage-secret-name", "${pvc.name}", "csi.storage.k8s.io/node-stage-secret-namespace", "${pvc.namespace}"),
			want: ClassParams{Driver: map[string]string{},
				Secrets: map[SecretKind]SecretTemplate{NodeStageSecret: {Name: "${pvc.name}", Namespace: "${pvc.namespace}"}}},
		},
		{
			// U+017F folds to "s" (strings.EqualFold) but does not lower to
			// it: the key is not reserved, so it must not be read either.
			name:   "a key that only folds to a reserved one is a driver key",
			params: kv("c\u017fi.storage.k8s.io/fstype", "xfs", "csi.storage.k8s.io/fstype", "ext4"),
			want:   ClassParams{FSType: "ext4", Secrets: map[SecretKind]SecretTemplate{}, Driver: kv("c\u017fi.storage.k8s.io/fstype", "xfs")},
		},
		{
			name:    "unknown reserved key",
			params:  kv("csi.storage.k8s.io/colour", "blue", "type", "ssd"),
			wantErr: `unknown parameter "csi.storage.k8s.io/colour"`,
		},
		{
			name:    "unknown reserved key in another case",
			params:  kv("CSI.STORAGE.K8S.IO/Colour", "blue"),
			wantErr: `unknown parameter "CSI.STORAGE.K8S.IO/Colour"`,
		},
		{
			// As external-provisioner: the default secret is every kind's
			// that has no key of its own.
			name: "the default secret fills every kind without its own",
			params: kv("csi.storage.k8s.io/secret-name", "d", "csi.storage.k8s.io/secret-namespace", "dns",
				"csi.storage.k8s.io/node-stage-secret-name", "ns", "csi.storage.k8s.io/node-stage-secret-namespace", "nsn",
				"csiNodePublishSecretName", "old", "csiNodePublishSecretNamespace", "oldns"),
			want: ClassParams{Driver: kv("csiNodePublishSecretName", "old", "csiNodePublishSecretNamespace", "oldns"),
				Secrets: map[SecretKind]SecretTemplate{
					ProvisionerSecret:       {Name: "d", Namespace: "dns"},
					ControllerPublishSecret: {Name: "d", Namespace: "dns"},
					NodeStageSecret:         {Name: "ns", Namespace: "nsn"},
					NodePublishSecret:       {Name: "old", Namespace: "oldns"},
					ControllerExpandSecret:  {Name: "d", Namespace: "dns"},
					NodeExpandSecret:        {Name: "d", Namespace: "dns"},
					ControllerModifySecret:  {Name: "d", Namespace: "dns"},
				},
				Warnings: []string{
					`"csiNodePublishSecretName" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/node-publish-secret-name" instead`,
					`"csiNodePublishSecretNamespace" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/node-publish-secret-namespace" instead`,
				}},
		},
		{
			name:   "controller-modify secret",
			params: kv("csi.storage.k8s.io/controller-modify-secret-name", "m", "csi.storage.k8s.io/controller-modify-secret-namespace", "mn"),
			want: ClassParams{Driver: map[string]string{},
				Secrets: map[SecretKind]SecretTemplate{ControllerModifySecret: {Name: "m", Namespace: "mn"}}},
		},
		{
			// The deprecated keys are outside the reserved namespace, so
			// the driver gets them too, as with external-provisioner.
			name: "every deprecated secret key, read with a warning and passed on",
			params: kv("csiProvisionerSecretName", "p", "csiProvisionerSecretNamespace", "pn",
				"csiControllerPublishSecretName", "cp", "csiControllerPublishSecretNamespace", "cpn",
				"csiNodeStageSecretName", "st", "csiNodeStageSecretNamespace", "stn",
				"csiNodePublishSecretName", "np", "csiNodePublishSecretNamespace", "npn"),
			want: ClassParams{
				Driver: kv("csiProvisionerSecretName", "p", "csiProvisionerSecretNamespace", "pn",
					"csiControllerPublishSecretName", "cp", "csiControllerPublishSecretNamespace", "cpn",
					"csiNodeStageSecretName", "st", "csiNodeStageSecretNamespace", "stn",
					"csiNodePublishSecretName", "np", "csiNodePublishSecretNamespace", "npn"),
				Secrets: map[SecretKind]SecretTemplate{
					ProvisionerSecret:       {Name: "p", Namespace: "pn"},
					ControllerPublishSecret: {Name: "cp", Namespace: "cpn"},
					NodeStageSecret:         {Name: "st", Namespace: "stn"},
					NodePublishSecret:       {Name: "np", Namespace: "npn"},
				},
				Warnings: []string{
					`"csiProvisionerSecretName" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/provisioner-secret-name" instead`,
					`"csiProvisionerSecretNamespace" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/provisioner-secret-namespace" instead`,
					`"csiControllerPublishSecretName" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/controller-publish-secret-name" instead`,
					`"csiControllerPublishSecretNamespace" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/controller-publish-secret-namespace" instead`,
					`"csiNodeStageSecretName" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/node-stage-secret-name" instead`,
					`"csiNodeStageSecretNamespace" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/node-stage-secret-namespace" instead`,
					`"csiNodePublishSecretName" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/node-publish-secret-name" instead`,
					`"csiNodePublishSecretNamespace" is deprecated and will be removed in a future release, please use "csi.storage.k8s.io/node-publish-secret-namespace" instead`,
				}},
		},
		{
			// EP matches the deprecated keys exactly: another case is a
			// driver parameter only.
			name:   "deprecated secret keys are case-sensitive",
			params: kv("csiprovisionersecretname", "p", "csiprovisionersecretnamespace", "pn"),
			want:   ClassParams{Driver: kv("csiprovisionersecretname", "p", "csiprovisionersecretnamespace", "pn"), Secrets: map[SecretKind]SecretTemplate{}},
		},
		{
			name: "a deprecated and a current key for one secret",
			params: kv("csiProvisionerSecretName", "p", "csiProvisionerSecretNamespace", "pn",
				"csi.storage.k8s.io/provisioner-secret-name", "q", "csi.storage.k8s.io/provisioner-secret-namespace", "qn"),
			wantErr: "named both by csi.storage.k8s.io/provisioner-secret-name and by the deprecated csiProvisionerSecretName",
		},
		{
			name:    "a deprecated name without its namespace",
			params:  kv("csiNodeStageSecretName", "p"),
			wantErr: "csiNodeStageSecretName and csiNodeStageSecretNamespace must be set together",
		},
		{
			name:    "default secret name without namespace",
			params:  kv("csi.storage.k8s.io/secret-name", "d"),
			wantErr: "csi.storage.k8s.io/secret-name and csi.storage.k8s.io/secret-namespace must be set together",
		},
		{
			name:    "an empty secret name",
			params:  kv("csi.storage.k8s.io/provisioner-secret-name", "", "csi.storage.k8s.io/provisioner-secret-namespace", "ns"),
			wantErr: "must not be empty",
		},
		{
			// A kind with a broken pair of its own does not fall back.
			name: "a broken kind does not take the default",
			params: kv("csi.storage.k8s.io/secret-name", "d", "csi.storage.k8s.io/secret-namespace", "dns",
				"csi.storage.k8s.io/node-expand-secret-name", "n"),
			wantErr: "node-expand-secret-name and csi.storage.k8s.io/node-expand-secret-namespace must be set together",
		},
		{
			name:    "secret name without namespace",
			params:  kv("csi.storage.k8s.io/provisioner-secret-name", "s"),
			wantErr: "csi.storage.k8s.io/provisioner-secret-name and csi.storage.k8s.io/provisioner-secret-namespace must be set together",
		},
		{
			name:    "secret namespace without name",
			params:  kv("csi.storage.k8s.io/node-publish-secret-namespace", "ns"),
			wantErr: "node-publish-secret-name and csi.storage.k8s.io/node-publish-secret-namespace must be set together",
		},
		{
			name:    "a reserved key twice, differing only in case",
			params:  kv("csi.storage.k8s.io/fstype", "ext4", "CSI.storage.k8s.io/fstype", "xfs"),
			wantErr: "differ only in case",
		},
		{
			name:    "the deprecated fstype key twice, differing only in case",
			params:  kv("fstype", "ext4", "FSType", "xfs"),
			wantErr: "differ only in case",
		},
		{
			name:    "several errors are all reported",
			params:  kv("csi.storage.k8s.io/a", "1", "csi.storage.k8s.io/b", "2", "csi.storage.k8s.io/node-stage-secret-name", "s"),
			wantErr: `unknown parameter "csi.storage.k8s.io/a" in the reserved namespace csi.storage.k8s.io/; unknown parameter "csi.storage.k8s.io/b"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(tt.params)
			got, err := ParseClassParams(tt.params)
			if !maps.Equal(before, tt.params) {
				t.Errorf("the input was changed: %v, was %v", tt.params, before)
			}
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// Keys that differ only in case used to be resolved by map order, so the
// same class could give different requests from one retry to the next.
func TestParseClassParamsIsDeterministic(t *testing.T) {
	params := kv("csi.storage.k8s.io/node-stage-secret-name", "a", "CSI.STORAGE.K8S.IO/NODE-STAGE-SECRET-NAME", "b",
		"csi.storage.k8s.io/node-stage-secret-namespace", "ns", "type", "ssd")
	first, firstErr := ParseClassParams(params)
	for range 50 {
		got, err := ParseClassParams(params)
		if !reflect.DeepEqual(got, first) || (err == nil) != (firstErr == nil) || (err != nil && err.Error() != firstErr.Error()) {
			t.Fatalf("ParseClassParams is not deterministic: %+v, %v then %+v, %v", first, firstErr, got, err)
		}
	}
	if firstErr == nil {
		t.Fatalf("keys differing only in case should be an error, got %+v", first)
	}
}

func TestWithMetadata(t *testing.T) {
	driver := kv("type", "ssd")
	got := withMetadata(driver, "apps", "data", "pvc-1")
	want := kv("type", "ssd", KeyPVCName, "data", KeyPVCNamespace, "apps", KeyPVName, "pvc-1")
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if !maps.Equal(driver, kv("type", "ssd")) {
		t.Errorf("the input map was changed: %v", driver)
	}
	if got := withMetadata(nil, "apps", "data", "pvc-1"); len(got) != 3 {
		t.Errorf("nil input: got %v", got)
	}
}

func FuzzParseClassParams(f *testing.F) {
	f.Add(uint8(0), "type", "ssd", "fstype", "ext4", "x", "y")
	f.Add(uint8(1), "fstype", "xfs", "type", "ssd", "", "")
	f.Add(uint8(3), "provisioner-secret-name", "s", "provisioner-secret-namespace", "ns", "k", "v")
	f.Add(uint8(7), "FSTYPE", "xfs", "node-stage-secret-name", "${pvc.name}", "node-stage-secret-namespace", "${pvc.namespace}")
	f.Add(uint8(5), "unknown", "v", "Type", "ssd", "CSI.STORAGE.K8S.IO/x", "y")
	f.Fuzz(func(t *testing.T, reserved uint8, k1, v1, k2, v2, k3, v3 string) {
		params := map[string]string{}
		for i, p := range [][2]string{{k1, v1}, {k2, v2}, {k3, v3}} {
			k := p[0]
			if reserved&(1<<i) != 0 {
				k = reservedPrefix + k // make reserved keys common
			}
			params[k] = p[1]
		}
		got, err := ParseClassParams(params)
		if err != nil {
			return
		}
		for k, v := range got.Driver {
			if strings.HasPrefix(strings.ToLower(k), reservedPrefix) {
				t.Errorf("reserved key %q reached the driver parameters", k)
			}
			if pv, ok := params[k]; !ok || pv != v {
				t.Errorf("driver parameter %q=%q is not from the input", k, v)
			}
		}
		for k, v := range params {
			if !strings.HasPrefix(strings.ToLower(k), reservedPrefix) && got.Driver[k] != v {
				t.Errorf("parameter %q=%q did not reach the driver", k, v)
			}
		}
		for kind, s := range got.Secrets {
			if name, ok := lookupFold(params, kind.nameKey()); !ok || name != s.Name {
				t.Errorf("%s secret name %q is not from the input", kind, s.Name)
			}
		}
	})
}
