package libv8

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	clienttesting "k8s.io/client-go/testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func patchPV(rv string, finalizers ...string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv", ResourceVersion: rv, Finalizers: finalizers,
			Annotations: map[string]string{"a": "b"}},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete},
	}
}

func TestFinalizerPatch(t *testing.T) {
	const fin = "external-provisioner.volume.kubernetes.io/finalizer"
	changedSpec := patchPV("5", fin)
	changedSpec.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
	changedAnn := patchPV("5")
	changedAnn.Annotations["c"] = "d"
	tests := []struct {
		name             string
		current, updated *v1.PersistentVolume
		want             PatchKind
		wantFinalizers   []string // in the patch
	}{
		{name: "finalizer removed", current: patchPV("5", fin, "kubernetes.io/pv-protection"), updated: patchPV("5", "kubernetes.io/pv-protection"),
			want: PatchFinalizers, wantFinalizers: []string{"kubernetes.io/pv-protection"}},
		{name: "last finalizer removed", current: patchPV("5", fin), updated: patchPV("5"), want: PatchFinalizers},
		{name: "finalizer added", current: patchPV("5"), updated: patchPV("5", fin), want: PatchFinalizers, wantFinalizers: []string{fin}},
		{name: "nothing changed", current: patchPV("5", fin), updated: patchPV("5", fin), want: PatchNone},
		{name: "nil and empty finalizers are the same", current: patchPV("5"), updated: &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", ResourceVersion: "5",
			Finalizers: []string{}, Annotations: map[string]string{"a": "b"}}, Spec: patchPV("5").Spec}, want: PatchNone},
		{name: "the spec changed too", current: patchPV("5"), updated: changedSpec, want: PatchUpdate},
		{name: "an annotation changed", current: patchPV("5", fin), updated: changedAnn, want: PatchUpdate},
		{name: "stale resourceVersion", current: patchPV("6", fin), updated: patchPV("5"), want: PatchConflict},
		{name: "the library's unsaved copy (no resourceVersion) is a conflict, not an unconditional update", current: patchPV("6", fin), updated: patchPV(""), want: PatchConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, kind := FinalizerPatch(tt.current, tt.updated)
			if kind != tt.want {
				t.Fatalf("kind %d, want %d", kind, tt.want)
			}
			if kind != PatchFinalizers {
				if patch != nil {
					t.Errorf("patch %s for kind %d", patch, kind)
				}
				return
			}
			var got struct {
				Metadata struct {
					ResourceVersion string   `json:"resourceVersion"`
					Finalizers      []string `json:"finalizers"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(patch, &got); err != nil {
				t.Fatal(err)
			}
			if got.Metadata.ResourceVersion != tt.updated.ResourceVersion || !reflect.DeepEqual(got.Metadata.Finalizers, tt.wantFinalizers) {
				t.Errorf("patch %s", patch)
			}
		})
	}
}

// The wrapper sends a finalizer-only Update as a patch and nothing else
// as one.
func TestPatchFinalizerClient(t *testing.T) {
	const fin = "external-provisioner.volume.kubernetes.io/finalizer"
	pv := patchPV("1", fin)
	cs := fake.NewClientset(pv)
	var verbs []string
	cs.PrependReactor("*", "persistentvolumes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		verbs = append(verbs, a.GetVerb())
		return false, nil, nil
	})
	c := PatchFinalizerClient(cs)
	ctx := context.Background()
	cur, err := c.CoreV1().PersistentVolumes().Get(ctx, "pv", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	upd := cur.DeepCopy()
	upd.Finalizers = nil
	out, err := c.CoreV1().PersistentVolumes().Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Finalizers) != 0 {
		t.Errorf("finalizers %v after the patch", out.Finalizers)
	}
	if want := []string{"get", "get", "patch"}; !reflect.DeepEqual(verbs, want) {
		t.Errorf("verbs %v, want %v", verbs, want)
	}
	// A stale copy is a conflict, not a write.
	verbs = nil
	stale := cur.DeepCopy()
	stale.ResourceVersion = "999"
	if _, err := c.CoreV1().PersistentVolumes().Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: %v, want a conflict", err)
	}
	if want := []string{"get"}; !reflect.DeepEqual(verbs, want) {
		t.Errorf("verbs %v, want %v", verbs, want)
	}
}

// The PV the library saves is also in the informer's store: the client
// must not be handed that object (its encoder writes the kind on it).
func TestPatchFinalizerClientCreatesACopy(t *testing.T) {
	cs := fake.NewClientset()
	var sent runtime.Object
	cs.PrependReactor("create", "persistentvolumes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sent = a.(clienttesting.CreateAction).GetObject()
		return false, nil, nil
	})
	pv := patchPV("", "f")
	if _, err := PatchFinalizerClient(cs).CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if sent == runtime.Object(pv) {
		t.Error("the library's own PV object went to the client")
	}
}
