package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tether-csi/tether/internal/cli"
	"github.com/tether-csi/tether/pkg/explain"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args      []string
		claim, ns string
		output    string
		all, show bool
		allNS     bool
		wantErr   string
	}{
		{args: []string{"default/data"}, claim: "default/data", output: "text"},
		{args: []string{"-n", "apps", "data"}, claim: "data", ns: "apps", output: "text"},
		{args: []string{"data", "-n", "apps", "-o", "json"}, claim: "data", ns: "apps", output: "json"},
		{args: []string{"-o", "yaml", "apps/data"}, claim: "apps/data", output: "yaml"},
		{args: []string{"--namespace=apps", "--output=json", "data", "--show-volumes"}, claim: "data", ns: "apps", output: "json", show: true},
		// -A is every namespace, as in kubectl; alone it is the table.
		{args: []string{"-A"}, all: true, allNS: true, output: "text"},
		{args: []string{"--all-namespaces", "-o", "yaml"}, all: true, allNS: true, output: "yaml"},
		{args: []string{"--all-pending", "-A"}, all: true, allNS: true, output: "text"},
		// --all-pending is the table of one namespace unless -A.
		{args: []string{"--all-pending"}, all: true, output: "text"},
		{args: []string{"--all-pending", "-n", "apps", "-o", "json"}, all: true, ns: "apps", output: "json"},
		{args: []string{}, wantErr: "name one claim"},
		{args: []string{"a", "b"}, wantErr: "name one claim"},
		{args: []string{"-o", "wide", "a"}, wantErr: "unknown output"},
		{args: []string{"-o", "JSON", "a"}, wantErr: "unknown output"},
		{args: []string{"-A", "a"}, wantErr: "-A (all namespaces) takes no claim"},
		{args: []string{"--all-namespaces", "default/a"}, wantErr: "-A (all namespaces) takes no claim"},
		{args: []string{"-A", "-n", "apps"}, wantErr: "--all-pending -n apps for the claims that wait in one namespace"},
		{args: []string{"--all-pending", "a"}, wantErr: "--all-pending takes no claim"},
		{args: []string{"-A", "--show-volumes"}, wantErr: "--show-volumes is for one claim"},
		{args: []string{"--all-pending", "--show-volumes"}, wantErr: "--show-volumes is for one claim"},
		{args: []string{"-n", "x", "y/a"}, wantErr: "different namespaces"},
		{args: []string{"/a"}, wantErr: "want NAMESPACE/CLAIM"},
		{args: []string{"--binder-lease=a/b/c", "a"}, wantErr: "--binder-lease"},
		{args: []string{"--request-timeout=soon", "a"}, wantErr: "--request-timeout"},
		{args: []string{"--request-timeout=-1s", "a"}, wantErr: "--request-timeout"},
		{args: []string{"--nope", "a"}, wantErr: "unknown flag: --nope"},
	}
	for _, tt := range tests {
		o, err := parse(tt.args)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parse(%q): error %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parse(%q): %v", tt.args, err)
			continue
		}
		if o.claim != tt.claim || o.namespace != tt.ns || o.output != tt.output || o.allPending != tt.all || o.showVolumes != tt.show ||
			o.allNamespaces != tt.allNS || o.binderLease != explain.BinderLeaseName {
			t.Errorf("parse(%q) = %+v", tt.args, o)
		}
	}
	for _, help := range [][]string{{"--help"}, {"-h", "a"}, {"-o", "json", "--help"}} {
		if _, err := parse(help); !errors.Is(err, pflag.ErrHelp) {
			t.Errorf("parse(%q): %v, want pflag.ErrHelp", help, err)
		}
	}
}

// TestUsage: help asked for is printed on stdout with status 0; a bare
// kubectl tether, an unknown command and bad flags get status 2; the usage
// names every flag why takes.
func TestUsage(t *testing.T) {
	tests := []struct {
		args       []string
		status     int
		stdout     string // a fragment of stdout ("" for none)
		stderr     string
		noUsageOut bool
	}{
		{args: []string{"why", "--help"}, status: 0, stdout: "Flags of why:"},
		{args: []string{"why", "-h"}, status: 0, stdout: "Exit status of why"},
		{args: []string{"--help"}, status: 0, stdout: "kubectl tether why -A"},
		{args: []string{"help"}, status: 0, stdout: "Usage:"},
		{args: nil, status: 2, stderr: "Flags of why:"},
		{args: []string{"frobnicate"}, status: 2, stderr: `unknown command "frobnicate"`},
		{args: []string{"why"}, status: 2, stderr: "name one claim"},
		{args: []string{"why", "--bogus"}, status: 2, stderr: "unknown flag: --bogus"},
		{args: []string{"version", "x"}, status: 2, stderr: "no arguments"},
		{args: []string{"version"}, status: 0, stdout: "kubectl-tether "},
		{args: []string{"version", "--help"}, status: 0, stdout: "Usage:"},
		{args: []string{"--version", "-h"}, status: 0, stdout: "Usage:"},
		{args: []string{"--version", "-n", "x"}, status: 2, stderr: "no arguments"},
		{args: []string{"why", "-o", "yaml", "--help"}, status: 0, stdout: "Flags of why:"},
		{args: []string{"why", "-A", "default/data"}, status: 2, stderr: "-A (all namespaces) takes no claim"},
		{args: []string{"why", "-o", "wide", "data"}, status: 2, stderr: `unknown output "wide" (text, json or yaml)`},
	}
	for _, tt := range tests {
		var out, errs bytes.Buffer
		if got := run(tt.args, &out, &errs); got != tt.status {
			t.Errorf("run(%q) = %d, want %d\nstdout: %s\nstderr: %s", tt.args, got, tt.status, out.String(), errs.String())
		}
		if tt.stdout != "" && !strings.Contains(out.String(), tt.stdout) {
			t.Errorf("run(%q): %q not on stdout:\n%s", tt.args, tt.stdout, out.String())
		}
		if tt.stderr != "" && !strings.Contains(errs.String(), tt.stderr) {
			t.Errorf("run(%q): %q not on stderr:\n%s", tt.args, tt.stderr, errs.String())
		}
	}
	// A bad setting exits as in every tether program (issue 38).
	if explain.ExitCannotTell != cli.ExitBadSetting {
		t.Errorf("bad arguments exit %d, the other programs' bad settings %d", explain.ExitCannotTell, cli.ExitBadSetting)
	}
	// Every flag parse defines is in the usage.
	for _, name := range flagNames(t) {
		dash := "--"
		if len(name) == 1 {
			dash = "-"
		}
		if !regexp.MustCompile(`(^|[ ,])` + regexp.QuoteMeta(dash+name) + `([ ,=]|$)`).MatchString(usage()) {
			t.Errorf("flag %s%s is not in the usage", dash, name)
		}
	}
}

// flagNames are the flags parse defines.
func flagNames(t *testing.T) []string {
	t.Helper()
	var o options
	var names []string
	newWhyFlags(&o).all.VisitAll(func(f *pflag.Flag) {
		names = append(names, f.Name)
		if f.Shorthand != "" {
			names = append(names, f.Shorthand)
		}
	})
	if len(names) < 20 {
		t.Errorf("only %d flags: %q", len(names), names)
	}
	return names
}

const ns = "default"

func pvc(name, class, size string, mutate ...func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Minute))},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}}},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func boundTo(pv string) func(*v1.PersistentVolumeClaim) {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.VolumeName = pv
		c.Status.Phase = v1.ClaimBound
		c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
	}
}

func pv(name, class, size string, claimedBy string) *v1.PersistentVolume {
	p := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{StorageClassName: class, Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)},
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable}}
	if claimedBy != "" {
		p.Spec.ClaimRef = &v1.ObjectReference{Namespace: ns, Name: claimedBy, UID: types.UID("uid-" + claimedBy)}
		p.Status.Phase = v1.VolumeBound
	}
	return p
}

func heldLease(namespace, name, holder string) *coordinationv1.Lease {
	d := int32(15)
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &now}}
}

func forbid(client *fake.Clientset, verb, resource string) {
	client.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC"))
	})
}

func manualClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "manual"}, Provisioner: "kubernetes.io/no-provisioner"}
}

func whyOut(t *testing.T, client *fake.Clientset, args ...string) (string, int) {
	t.Helper()
	o, err := parse(args)
	if err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	status := execute(t.Context(), client, o, ns, &out, &errs)
	return out.String() + errs.String(), status
}

// TestExitStatus: 0 Bound, 1 not bound with the cause printed, 2 when it
// cannot tell (the claim unreadable, or the cause CannotTell).
func TestExitStatus(t *testing.T) {
	objs := []runtime.Object{manualClass(),
		pvc("bound", "manual", "1Gi", boundTo("pv-1")), pv("pv-1", "manual", "1Gi", "bound"),
		pvc("small", "manual", "5Gi"), pv("pv-2", "manual", "1Gi", "")}
	tests := []struct {
		name   string
		args   []string
		forbid []string // resources whose list is forbidden
		status int
		words  []string
	}{
		{name: "bound", args: []string{"bound"}, status: 0, words: []string{"Claim default/bound: Bound to pv-1"}},
		{name: "pending", args: []string{"default/small"}, status: 1, words: []string{"Why: TooSmall", "What to do: "}},
		{name: "missing claim", args: []string{"nope"}, status: 2, words: []string{`read claim default/nope`, "not found"}},
		{name: "volumes unreadable", args: []string{"small"}, forbid: []string{"persistentvolumes"}, status: 2,
			words: []string{"Why: CannotTell", "Could not read: persistentvolumes (forbidden (list, cluster))"}},
		{name: "bound, volumes unreadable", args: []string{"bound"}, forbid: []string{"persistentvolumes"}, status: 0},
		{name: "-A with claims waiting", args: []string{"-A"}, status: 1, words: []string{"1 claim waits: 1 TooSmall (all namespaces)", "default    small"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(objs...)
			for _, r := range tt.forbid {
				forbid(client, "list", r)
				forbid(client, "get", r)
			}
			out, status := whyOut(t, client, tt.args...)
			if status != tt.status {
				t.Errorf("status %d, want %d\n%s", status, tt.status, out)
			}
			for _, w := range tt.words {
				if !strings.Contains(out, w) {
					t.Errorf("%q not in:\n%s", w, out)
				}
			}
		})
	}
	t.Run("--all-pending, nothing waits", func(t *testing.T) {
		out, status := whyOut(t, fake.NewClientset(objs[:3]...), "--all-pending")
		if status != 0 || !strings.Contains(out, "No claim waits (namespace default)") {
			t.Errorf("status %d\n%s", status, out)
		}
	})
}

// TestReadsAreSmall: the plugin only gets and lists; every list is paged;
// the claim's events are picked by a field selector (and of a bound claim
// only its and its volume's AnotherBinder events are read); Leases are read by
// name, never all of them; a bound claim's volume is read by name.
func TestReadsAreSmall(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "disk.csi.example.com"}
	client := fake.NewClientset(class, manualClass(), pvc("data", "fast", "1Gi"),
		pvc("bound", "manual", "1Gi", boundTo("pv-1")), pv("pv-1", "manual", "1Gi", "bound"),
		heldLease("tether-system", explain.BinderLeaseName, "binder-0"))
	if _, status := whyOut(t, client, "data"); status != 1 {
		t.Errorf("status %d, want 1", status)
	}
	var leaseReads []string
	for _, a := range client.Actions() {
		res := a.GetResource().Resource
		switch a := a.(type) {
		case k8stesting.ListAction:
			r := a.GetListRestrictions()
			if a.(k8stesting.ListActionImpl).ListOptions.Limit != pageSize {
				t.Errorf("list %s without the page size", res)
			}
			if res == "events" && !anotherBinderEvents(r.Fields.String()) &&
				r.Fields.String() != "involvedObject.kind=PersistentVolumeClaim,involvedObject.name=data,involvedObject.uid=uid-data" {
				t.Errorf("events listed with field selector %q", r.Fields)
			}
			if res == "leases" {
				if !strings.HasPrefix(r.Fields.String(), "metadata.name=") {
					t.Errorf("leases listed without a name: %q", r.Fields)
				}
				leaseReads = append(leaseReads, r.Fields.String())
			}
		case k8stesting.GetAction:
			if res == "leases" {
				leaseReads = append(leaseReads, a.GetNamespace()+"/"+a.GetName())
			}
		default:
			t.Errorf("the plugin did %s %s", a.GetVerb(), res)
		}
	}
	want := "metadata.name=disk-csi-example-com metadata.name=tether-binder kube-system/kube-controller-manager"
	if got := strings.Join(leaseReads, " "); got != want {
		t.Errorf("lease reads %q, want %q", got, want)
	}

	client.ClearActions()
	out, status := whyOut(t, client, "bound")
	if status != 0 {
		t.Errorf("bound claim: status %d\n%s", status, out)
	}
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "persistentvolumes" && a.GetVerb() != "get" {
			t.Errorf("a bound claim's volume read by %s", a.GetVerb())
		}
		if a, ok := a.(k8stesting.ListAction); ok && anotherBinderEvents(a.GetListRestrictions().Fields.String()) {
			continue
		}
		if r := a.GetResource().Resource; r == "pods" || r == "events" || r == "csinodes" {
			t.Errorf("a bound claim read %s", r)
		}
	}
	if !strings.Contains(out, "Binder: tether's: Lease tether-system/tether-binder is held by binder-0") {
		t.Errorf("the binder is not named:\n%s", out)
	}
}

// TestReadRecordsWhatItCannotRead: a user who may not list volumes and
// classes still gets an answer, which names what was missing.
func TestReadRecordsWhatItCannotRead(t *testing.T) {
	client := fake.NewClientset(pvc("data", "manual", "1Gi"), manualClass())
	for _, res := range []string{"persistentvolumes", "storageclasses", "leases"} {
		forbid(client, "list", res)
		forbid(client, "get", res)
	}
	out, status := whyOut(t, client, "default/data")
	if status != 2 {
		t.Errorf("status %d, want 2", status)
	}
	for _, want := range []string{"Claim default/data: Pending", "Why: CannotTell",
		"Could not read: storageclasses (forbidden (list, cluster)), persistentvolumes (forbidden (list, cluster)), binder leases (forbidden (list, all namespaces, name tether-binder))",
		"Binder: cannot tell: tether's binder Lease tether-binder could not be read"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q not in output:\n%s", want, out)
		}
	}
}

// TestAllPendingPartialView: a namespace user who may not list claims
// everywhere gets its own namespace's table, told so; one who may not read
// volumes, classes or Leases gets each row's cause as far as it can tell.
func TestAllPendingPartialView(t *testing.T) {
	client := fake.NewClientset(manualClass(), pvc("small", "manual", "5Gi"), pv("pv-2", "manual", "1Gi", ""),
		&v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "elsewhere"}})
	client.PrependReactor("list", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "", errors.New("RBAC"))
		}
		return false, nil, nil
	})
	for _, res := range []string{"persistentvolumes", "storageclasses", "leases"} {
		forbid(client, "list", res)
		forbid(client, "get", res)
	}
	out, status := whyOut(t, client, "-A")
	if status != 1 {
		t.Errorf("status %d, want 1", status)
	}
	for _, want := range []string{"Note: claims of every namespace could not be read (forbidden (list, all namespaces)): only namespace default is shown",
		"1 claim waits: 1 CannotTell (namespace default)", "Binder: cannot tell", "default    small",
		"Could not read: binder leases (forbidden"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q not in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "elsewhere") {
		t.Errorf("a claim of another namespace is shown:\n%s", out)
	}
}

// TestShowVolumes: the nearest few by default, every volume with
// --show-volumes, and the counts either way.
func TestShowVolumes(t *testing.T) {
	objs := []runtime.Object{manualClass(), pvc("data", "manual", "5Gi")}
	for i := range 50 {
		objs = append(objs, pv(fmt.Sprintf("pv-claimed-%02d", i), "manual", "10Gi", fmt.Sprintf("other-%d", i)))
	}
	for i := 1; i <= 4; i++ {
		objs = append(objs, pv(fmt.Sprintf("pv-small-%d", i), "manual", fmt.Sprintf("%dGi", i), ""))
	}
	client := fake.NewClientset(objs...)
	out, _ := whyOut(t, client, "data")
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[1], `Why: TooSmall: no volume of class "manual" fits: 4 of its 54`) {
		t.Errorf("line 2 is not the cause:\n%s", out)
	}
	for _, want := range []string{`Volumes of class "manual": 54: 50 claimed by other claims, 4 too small`,
		"pv-small-4  4Gi  TooSmall", "(--show-volumes lists all 54)", "ask for at most 4Gi (pv-small-4"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q not in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "pv-claimed-") || strings.Contains(out, "pv-small-1") {
		t.Errorf("more than the nearest volumes listed:\n%s", out)
	}
	out, _ = whyOut(t, client, "data", "--show-volumes")
	if !strings.Contains(out, "pv-claimed-49") || !strings.Contains(out, "pv-small-1") {
		t.Errorf("--show-volumes does not list every volume:\n%s", out)
	}
}
