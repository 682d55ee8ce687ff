package binder

import (
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/tether-csi/tether/pkg/intern"
)

func TestKeptAnnotation(t *testing.T) {
	for key, want := range map[string]bool{
		"pv.kubernetes.io/bind-completed":                     true,
		"pv.kubernetes.io/provisioned-by":                     true,
		"volume.kubernetes.io/selected-node":                  true,
		"volume.beta.kubernetes.io/storage-provisioner":       true,
		"volume.alpha.kubernetes.io/pre-resize-capacity":      true,
		"tether.dev/lost-node":                                true,
		"provisioner.tether.dev/in-flight-volume":             true,
		"kubectl.kubernetes.io/last-applied-configuration":    false,
		"meta.helm.sh/release-name":                           false,
		"example.com/team":                                    false,
		"notether.dev/x":                                      false,
		"no-domain":                                           false,
		"volume.kubernetes.io.example.com/looks-like-ours":    false,
		"storageclass.kubernetes.io/is-default-class":         false, // a class's, and classes are not slimmed
		"external-provisioner.volume.kubernetes.io/finalizer": true,
	} {
		if got := keptAnnotation(key); got != want {
			t.Errorf("keptAnnotation(%q) = %v, want %v", key, got, want)
		}
	}
}

// fatClaim has every field the binder does not read set, beside those it
// reads.
func fatClaim() *v1.PersistentVolumeClaim {
	c := newPVC("c", "1Gi", claimClass("fast"), claimVolumeMode(v1.PersistentVolumeBlock), claimVAC("gold"),
		claimAnn("pv.kubernetes.io/bind-completed", "yes"), claimAnn("kubectl.kubernetes.io/last-applied-configuration", "{...}"))
	c.Labels = map[string]string{"app": "db"}
	c.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: "p", UID: "pod-uid"}}
	c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	c.Finalizers = []string{"kubernetes.io/pvc-protection"}
	c.GenerateName = "c-"
	c.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"disk": "ssd"}}
	c.Spec.Resources.Limits = v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}
	c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	c.Spec.VolumeName = "pv"
	c.Status = v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound, AccessModes: c.Spec.AccessModes,
		Capacity:                         v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
		CurrentVolumeAttributesClassName: ptr.To("gold"),
		Conditions:                       []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimResizing}},
		AllocatedResources:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
	}
	return c
}

func fatVolume() *v1.PersistentVolume {
	pv := newPV("pv", "1Gi", pvClass("fast"), pvVolumeMode(v1.PersistentVolumeBlock), pvVAC("gold"), pvLabels("disk", "ssd"),
		pvDynamic("csi.example.com"), pvAnn("kubectl.kubernetes.io/last-applied-configuration", "{...}"),
		pvClaimRef("c", "uid-c"), pvNode("zone", "a"), pvReclaim(v1.PersistentVolumeReclaimDelete))
	pv.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "provisioner"}}
	pv.OwnerReferences = []metav1.OwnerReference{{Kind: "X", Name: "x", UID: "x-uid"}}
	pv.Finalizers = []string{"kubernetes.io/pv-protection"}
	pv.Spec.MountOptions = []string{"noatime"}
	pv.Spec.CSI = &v1.CSIPersistentVolumeSource{Driver: "csi.example.com", VolumeHandle: "h", FSType: "ext4",
		VolumeAttributes: map[string]string{"a": "b"}, NodeStageSecretRef: &v1.SecretReference{Name: "s"}}
	pv.Status = v1.PersistentVolumeStatus{Phase: v1.VolumeBound, Message: "m", Reason: "r",
		LastPhaseTransitionTime: ptr.To(metav1.NewTime(time.Unix(200, 0)))}
	return pv
}

// A slim claim keeps what the binder reads and its labels, a slim PV all
// but its managed fields and the status it does not read (slim.go's
// lists); each is marked cut when an update of it would erase something.
func TestSlim(t *testing.T) {
	in := &intern.Interner{}
	claim := fatClaim()
	wantClaim := fatClaim()
	wantClaim.OwnerReferences = nil
	wantClaim.ManagedFields = cutMark
	wantClaim.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
	wantClaim.Spec.Resources.Limits, wantClaim.Spec.DataSource = nil, nil
	wantClaim.Status.Conditions, wantClaim.Status.AllocatedResources = nil, nil
	if got := slimClaim(in, claim); got != claim || !reflect.DeepEqual(got, wantClaim) || !isCut(&got.ObjectMeta) {
		t.Errorf("slimClaim =\n%+v\nwant\n%+v", got, wantClaim)
	}

	pv := fatVolume()
	wantPV := fatVolume()
	wantPV.ManagedFields = cutMark
	wantPV.Status = v1.PersistentVolumeStatus{Phase: v1.VolumeBound, Message: "m"}
	if got := slimVolume(in, pv); got != pv || !reflect.DeepEqual(got, wantPV) || !isCut(&got.ObjectMeta) {
		t.Errorf("slimVolume =\n%+v\nwant\n%+v", got, wantPV)
	}

	// A second pass (client-go's watch-list runs the transform twice) is
	// a no-op, and a slim object's deep copy is slim and cut still.
	again := pv.DeepCopy()
	if slimVolume(in, pv); !reflect.DeepEqual(pv, wantPV) {
		t.Error("a second slimVolume changed the PV")
	}
	if slimVolume(in, again); !reflect.DeepEqual(again, wantPV) || !isCut(&again.ObjectMeta) {
		t.Error("a slim PV's deep copy is not slim and cut")
	}
}

// Whole or cut: what an update of the slim copy would erase on the server.
func TestSlimCut(t *testing.T) {
	in := &intern.Interner{}
	for _, tt := range []struct {
		name string
		edit func(*v1.PersistentVolumeClaim)
		cut  bool
	}{
		{"plain", func(*v1.PersistentVolumeClaim) {}, false},
		{"labels (kept)", func(c *v1.PersistentVolumeClaim) { c.Labels = map[string]string{"app": "db"} }, false},
		{"storage annotations (kept)", func(c *v1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "n1"}
		}, false},
		{"managed fields (the server keeps its own)", func(c *v1.PersistentVolumeClaim) {
			c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		}, false},
		{"another annotation", func(c *v1.PersistentVolumeClaim) { c.Annotations = map[string]string{"example.com/x": "y"} }, true},
		{"an owner", func(c *v1.PersistentVolumeClaim) { c.OwnerReferences = []metav1.OwnerReference{{Name: "p"}} }, true},
		{"limits", func(c *v1.PersistentVolumeClaim) {
			c.Spec.Resources.Limits = v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}
		}, true},
		{"a data source", func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
		}, true},
		{"a condition", func(c *v1.PersistentVolumeClaim) {
			c.Status.Conditions = []v1.PersistentVolumeClaimCondition{{Type: "Resizing"}}
		}, true},
		{"a modify-volume status", func(c *v1.PersistentVolumeClaim) {
			c.Status.ModifyVolumeStatus = &v1.ModifyVolumeStatus{Status: v1.PersistentVolumeClaimModifyVolumePending}
		}, true},
	} {
		c := newPVC("c", "1Gi")
		tt.edit(c)
		if got := isCut(&slimClaim(in, c).ObjectMeta); got != tt.cut {
			t.Errorf("claim, %s: cut = %v, want %v", tt.name, got, tt.cut)
		}
	}
	pv := newPV("pv", "1Gi", pvLabels("a", "b"), pvAnn("example.com/x", "y"))
	pv.Spec.MountOptions = []string{"ro"}
	pv.Status.LastPhaseTransitionTime = ptr.To(metav1.Now())
	if isCut(&slimVolume(in, pv).ObjectMeta) {
		t.Error("a PV with a phase transition time (which a write without it keeps) is cut")
	}
	pv = newPV("pv", "1Gi")
	pv.Status.Reason = "r"
	if !isCut(&slimVolume(in, pv).ObjectMeta) {
		t.Error("a PV with a status reason is not cut")
	}
}

// What the binder does not read survives its writes: the PV's mount
// options, CSI attributes, others' annotations and status reason, the
// claim's labels, others' annotations, limits and conditions. A cut
// object (its cache copy lacks some of them) is written by patches of
// what changed, a whole one by updates; an update of a cut copy would
// have erased them.
func TestUnreadFieldsSurviveBind(t *testing.T) {
	for _, tt := range []struct {
		name          string
		cut, patchAll bool
	}{{"cut", true, false}, {"whole", false, false}, {"whole, API server newer", false, true}} {
		t.Run(tt.name, func(t *testing.T) {
			testUnreadFieldsSurvive(t, tt.cut, tt.patchAll)
		})
	}
}

// testUnreadFieldsSurvive binds a claim, cut or whole, with every write a
// patch (patchAll: the API server is newer than the binder's API types)
// or not.
func testUnreadFieldsSurvive(t *testing.T, cut, patchAll bool) {
	class := newClass("fast", "csi.example.com")
	claim := fatClaim()
	claim.Spec.VolumeName, claim.Annotations = "", map[string]string{"example.com/owner": "ops"}
	claim.Spec.Selector, claim.Spec.DataSource, claim.Status = nil, nil, v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending,
		Conditions: []v1.PersistentVolumeClaimCondition{{Type: "Custom", Status: v1.ConditionTrue}}}
	claim.OwnerReferences = nil
	pv := fatVolume()
	pv.Spec.ClaimRef, pv.Status = nil, v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable, Reason: "r"}
	pv.Spec.NodeAffinity = nil
	wantVerb := "patch"
	if !cut {
		claim.Annotations, claim.Spec.Resources.Limits, claim.Status.Conditions = nil, nil, nil
		pv.Status.Reason = ""
		if !patchAll {
			wantVerb = "update"
		}
	}
	client := fake.NewClientset(class, claim, pv)
	client.PrependReactor("patch", "*", versionedPatches(client.Tracker()))
	client.PrependReactor("update", "*", bumpVersion())
	c, err := New(Options{Client: client, Workers: 2, Recorder: record.NewFakeRecorder(100), PatchAll: func() bool { return patchAll }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := runController(t, c)
	if !pollUntil(10*time.Second, func() bool {
		got, ok := c.claims.Get(ns, "c")
		pv, _ := c.volumes.Get("pv")
		return ok && got.Status.Phase == v1.ClaimBound && pv != nil && pv.Status.Phase == v1.VolumeBound
	}) {
		t.Fatal("the claim was not bound")
	}
	cached, _ := c.claims.Get(ns, "c")
	cachedPV, _ := c.volumes.Get("pv")
	if cached.Annotations["example.com/owner"] != "" || cachedPV.Status.Reason != "" {
		t.Fatalf("the cache holds what the binder does not read: %+v, %+v", cached.ObjectMeta, cachedPV.Status)
	}
	for _, a := range client.Actions() {
		if v := a.GetVerb(); (v == "update" || v == "patch") && v != wantVerb && a.GetResource().Resource != "events" {
			t.Errorf("a %s of %s, want every write a %s", v, a.GetResource().Resource, wantVerb)
		}
	}

	gotPV, err := client.CoreV1().PersistentVolumes().Get(ctx, "pv", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gotPV.Spec.ClaimRef == nil || gotPV.Spec.ClaimRef.UID != claim.UID {
		t.Errorf("PV claimRef = %+v", gotPV.Spec.ClaimRef)
	}
	if !reflect.DeepEqual(gotPV.Spec.MountOptions, pv.Spec.MountOptions) ||
		!reflect.DeepEqual(gotPV.Spec.CSI, pv.Spec.CSI) ||
		gotPV.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "{...}" ||
		!reflect.DeepEqual(gotPV.OwnerReferences, pv.OwnerReferences) || gotPV.Status.Reason != pv.Status.Reason {
		t.Errorf("the PV lost what the binder does not read: %+v", gotPV)
	}
	gotClaim, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gotClaim.Spec.VolumeName != "pv" || gotClaim.Annotations["pv.kubernetes.io/bind-completed"] != "yes" {
		t.Errorf("claim not bound: %+v", gotClaim)
	}
	if !reflect.DeepEqual(gotClaim.Labels, claim.Labels) ||
		gotClaim.Annotations["example.com/owner"] != claim.Annotations["example.com/owner"] ||
		!reflect.DeepEqual(gotClaim.Spec.Resources.Limits, claim.Spec.Resources.Limits) ||
		len(gotClaim.Status.Conditions) != len(claim.Status.Conditions) {
		t.Errorf("the claim lost what the binder does not read: %+v", gotClaim)
	}
	for _, m := range append(gotClaim.ManagedFields, gotPV.ManagedFields...) {
		if m.Manager == slimManager {
			t.Errorf("the cache's mark reached the server: %+v", m)
		}
	}
}

// slimClaim and slimVolume rebuild the spec and status from the fields
// they know: each field of these types is either kept or makes the object
// cut. A field a newer API adds would be dropped without the cut mark, and
// an update of a "whole" object would erase it on the server: this test
// fails first, when the API module is upgraded.
func TestSlimKnowsEveryField(t *testing.T) {
	for _, tt := range []struct {
		typ   any
		known []string
	}{
		{v1.PersistentVolumeClaimSpec{}, []string{"AccessModes", "Selector", "Resources", "VolumeName", "StorageClassName",
			"VolumeMode", "DataSource", "DataSourceRef", "VolumeAttributesClassName"}},
		{v1.VolumeResourceRequirements{}, []string{"Limits", "Requests"}},
		{v1.PersistentVolumeClaimStatus{}, []string{"Phase", "AccessModes", "Capacity", "Conditions", "AllocatedResources",
			"AllocatedResourceStatuses", "CurrentVolumeAttributesClassName", "ModifyVolumeStatus"}},
		{v1.PersistentVolumeStatus{}, []string{"Phase", "Message", "Reason", "LastPhaseTransitionTime"}},
	} {
		typ := reflect.TypeOf(tt.typ)
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tt.known))
		if !slices.Equal(got, want) {
			t.Errorf("%s has the fields %v, slim.go knows %v: keep the new ones, or count them in the cut", typ.Name(), got, want)
		}
	}
}
