package protect

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestCloneDecision(t *testing.T) {
	checked := sourceClaim()
	with := func(change func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
		c := checked.DeepCopy()
		change(c)
		return c
	}
	now := metav1.Now()
	tests := []struct {
		name    string
		current *v1.PersistentVolumeClaim
		want    bool
		wantErr string
	}{
		{name: "unprotected: add", current: checked, want: true},
		{name: "changed since (another clone's write, a label): add", current: with(func(c *v1.PersistentVolumeClaim) {
			c.ResourceVersion, c.Labels = "99", map[string]string{"a": "b"}
		}), want: true},
		{name: "protected by another clone meanwhile: nothing to write", current: with(func(c *v1.PersistentVolumeClaim) {
			c.Finalizers = []string{FinalizerCloneSource}
		})},
		{name: "protected and being deleted: nothing to write", current: with(func(c *v1.PersistentVolumeClaim) {
			c.Finalizers, c.DeletionTimestamp = []string{FinalizerCloneSource}, &now
		})},
		{name: "replaced by another claim of the name", current: with(func(c *v1.PersistentVolumeClaim) { c.UID = "other" }),
			wantErr: "clone source claim src was replaced"},
		{name: "being deleted", current: with(func(c *v1.PersistentVolumeClaim) { c.DeletionTimestamp = &now }),
			wantErr: "clone source claim src is being deleted"},
		{name: "bound to another volume", current: with(func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-other" }),
			wantErr: "bound to another volume"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cloneDecision(checked, tt.current)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClone(t *testing.T) {
	src := sourceClaim()
	cs := fake.NewClientset(src)
	for range 2 { // the second call finds the finalizer and writes nothing
		if err := Clone(t.Context(), cs, src); err != nil {
			t.Fatal(err)
		}
		got, err := cs.CoreV1().PersistentVolumeClaims(testNS).Get(t.Context(), "src", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Finalizers) != 1 || got.Finalizers[0] != FinalizerCloneSource {
			t.Fatalf("source finalizers %v, want only %s", got.Finalizers, FinalizerCloneSource)
		}
		src = got
	}
	updates := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "update" {
			updates++
		}
	}
	if updates != 1 {
		t.Errorf("%d updates of the source, want 1", updates)
	}
}

// Five clones of one source at once: each read the source before any of
// them protected it. Every one succeeds (no conflict reaches the library,
// which would make a Warning ProvisioningFailed and retry later), with one
// write of the finalizer; a source replaced meanwhile is refused.
func TestClonesProtectOneSourceAtOnce(t *testing.T) {
	ctx := t.Context()
	cs := optimisticClient()
	src := sourceClaim()
	src.ResourceVersion = ""
	read, err := cs.CoreV1().PersistentVolumeClaims(testNS).Create(ctx, src, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := Clone(ctx, cs, read); err != nil {
			t.Fatalf("clone %d: %v", i, err)
		}
	}
	got, err := cs.CoreV1().PersistentVolumeClaims(testNS).Get(ctx, "src", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(slices.Clone(got.Finalizers), func(f string) bool { return f != FinalizerCloneSource })); n != 1 {
		t.Errorf("source finalizers %v, want the cloning protection once", got.Finalizers)
	}
	updates := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "persistentvolumeclaims" {
			updates++
		}
	}
	if updates != 5 { // the first clone's; the others' conflict, then a fresh read finds the finalizer
		t.Errorf("%d claim updates, want 5", updates)
	}

	// The source deleted and made again under its name since the read.
	if err := cs.Tracker().Delete(claimsGVR, testNS, "src"); err != nil {
		t.Fatal(err)
	}
	again := sourceClaim()
	again.UID, again.ResourceVersion = "src-uid-2", ""
	if _, err := cs.CoreV1().PersistentVolumeClaims(testNS).Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	checkErr(t, Clone(ctx, cs, read), "clone source claim src was replaced")
}

func TestCloneInProgress(t *testing.T) {
	tests := []struct {
		name      string
		src       *v1.PersistentVolumeClaim
		claims    []*v1.PersistentVolumeClaim
		want      bool
		wantClone string
	}{
		{name: "no clone: source released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{protectedSource(), newClaim()}},
		{name: "clone bound: source released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", boundTo("pvc-c1-uid"))}},
		{name: "clone bound, its record not dropped yet: source released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", holdingRecord(), boundTo("pvc-c1-uid"))}},
		{name: "clone bound to another volume while its own CreateVolume runs: source kept", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", holdingRecord(), boundTo("static-pv"))}, want: true, wantClone: "c1"},
		{name: "clone pending: source kept", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1")}, want: true, wantClone: "c1"},
		{name: "clone pending with its record: source kept", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", holdingRecord())}, want: true, wantClone: "c1"},
		{name: "clone deleted while its CreateVolume runs (holds the in-flight record): source kept", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", holdingRecord(), beingDeleted())}, want: true, wantClone: "c1"},
		{name: "clone deleted and its record gone: source released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", beingDeleted())}},
		{name: "bound clone being deleted: source released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", boundTo("pvc-c1-uid"), beingDeleted())}},
		{name: "source being deleted with a clone in progress: kept", src: protectedSource(beingDeleted()),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", holdingRecord())}, want: true, wantClone: "c1"},
		{name: "source being deleted, its clone done: released", src: protectedSource(beingDeleted()),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", boundTo("pvc-c1-uid"))}},
		{name: "two clones, one bound one pending: kept", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", boundTo("pvc-c1-uid")), aClone("c2")}, want: true, wantClone: "c2"},
		{name: "two clones, both bound: released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", boundTo("pvc-c1-uid")), aClone("c2", boundTo("pvc-c2-uid"))}},
		{name: "claim of another namespace naming the same source: ignored", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", inNamespace("other"))}},
		{name: "clone of another source: ignored", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", cloneOf("elsewhere"))}},
		{name: "dataSourceRef instead of dataSource", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", func(c *v1.PersistentVolumeClaim) {
				c.Spec.DataSource = nil
				c.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
			})}, want: true, wantClone: "c1"},
		{name: "dataSourceRef into another namespace: ignored", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", func(c *v1.PersistentVolumeClaim) {
				ns := "other"
				c.Spec.DataSource = nil
				c.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src", Namespace: &ns}
			})}},
		{name: "a snapshot data source of the same name: ignored", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", func(c *v1.PersistentVolumeClaim) {
				group := "snapshot.storage.k8s.io"
				c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "src"}
			})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, clone := CloneInProgress(tt.src, tt.claims)
			if got != tt.want || clone != tt.wantClone {
				t.Errorf("CloneInProgress = %v, %q; want %v, %q", got, clone, tt.want, tt.wantClone)
			}
		})
	}
}

func TestCloneSourceName(t *testing.T) {
	core, other := "", "example.com"
	tests := []struct {
		name   string
		claim  *v1.PersistentVolumeClaim
		want   string
		wantOK bool
	}{
		{name: "no data source", claim: newClaim()},
		{name: "dataSource", claim: newClaim(cloneOf("src")), want: "src", wantOK: true},
		{name: "dataSource with the empty core group", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &core, Kind: "PersistentVolumeClaim", Name: "src"}
		}), want: "src", wantOK: true},
		{name: "a PersistentVolumeClaim kind of another group", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &other, Kind: "PersistentVolumeClaim", Name: "src"}
		})},
		{name: "dataSourceRef in the same namespace", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			ns := testNS
			c.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src", Namespace: &ns}
		}), want: "src", wantOK: true},
		{name: "dataSourceRef of a populator", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: &other, Kind: "Populator", Name: "src"}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := CloneSourceName(tt.claim)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("CloneSourceName = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
