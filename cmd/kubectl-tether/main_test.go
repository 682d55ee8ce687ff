package main

import (
	"bytes"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tether-csi/tether/pkg/explain"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args      []string
		claim, ns string
		output    string
		wantErr   bool
	}{
		{args: []string{"default/data"}, claim: "default/data", output: "text"},
		{args: []string{"-n", "apps", "data"}, claim: "data", ns: "apps", output: "text"},
		{args: []string{"data", "-n", "apps", "-o", "json"}, claim: "data", ns: "apps", output: "json"},
		{args: []string{"--namespace=apps", "--output=json", "data"}, claim: "data", ns: "apps", output: "json"},
		{args: []string{}, wantErr: true},
		{args: []string{"a", "b"}, wantErr: true},
		{args: []string{"-o", "yaml", "a"}, wantErr: true},
	}
	for _, tt := range tests {
		o, err := parse(tt.args, &bytes.Buffer{})
		if (err != nil) != tt.wantErr {
			t.Errorf("parse(%q): error %v, want error %v", tt.args, err, tt.wantErr)
			continue
		}
		if err == nil && (o.claim != tt.claim || o.namespace != tt.ns || o.output != tt.output) {
			t.Errorf("parse(%q) = %+v", tt.args, o)
		}
	}
}

// TestReadRecordsWhatItCannotRead: a user who may not list volumes and
// classes still gets an answer, which names what was missing; the plugin
// makes no write.
func TestReadRecordsWhatItCannotRead(t *testing.T) {
	class := "manual"
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}}}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "manual"}, Provisioner: "kubernetes.io/no-provisioner"}
	client := fake.NewClientset(claim, sc)
	for _, res := range []string{"persistentvolumes", "storageclasses"} {
		client.PrependReactor("list", res, func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: res}, "", nil)
		})
	}
	in, err := read(t.Context(), reader{client: client}, "default", "data")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" {
			t.Errorf("the plugin wrote: %s %s", v, a.GetResource().Resource)
		}
	}
	var buf bytes.Buffer
	if err := printText(&buf, explain.Explain(in), in.Now); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"Claim default/data: Pending", "Could not read: persistentvolumes (forbidden (list, cluster)), storageclasses (forbidden (list, cluster))",
		"Why: CannotTell"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q not in output:\n%s", want, out)
		}
	}
}

func TestVersion(t *testing.T) {
	var out, errs strings.Builder
	if err := run([]string{"version"}, &out, &errs); err != nil || !strings.HasPrefix(out.String(), "kubectl-tether ") {
		t.Errorf("version: %v, printed %q", err, out.String())
	}
}
