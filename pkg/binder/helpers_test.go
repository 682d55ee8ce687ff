package binder

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

// Small builders for plain API objects. Every object gets a UID derived from
// its name and resourceVersion "1"; options change the rest.

const ns = "default"

var (
	rwo = v1.ReadWriteOnce
	rox = v1.ReadOnlyMany
	rwx = v1.ReadWriteMany
)

type pvOpt func(*v1.PersistentVolume)

// newPV is an Available, unclaimed Filesystem volume of class "" with
// access mode ReadWriteOnce and reclaim policy Retain.
func newPV(name, size string, opts ...pvOpt) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("pv-uid-" + name), ResourceVersion: "1"},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []v1.PersistentVolumeAccessMode{rwo},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable},
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

func pvClass(c string) pvOpt { return func(pv *v1.PersistentVolume) { pv.Spec.StorageClassName = c } }
func pvModes(m ...v1.PersistentVolumeAccessMode) pvOpt {
	return func(pv *v1.PersistentVolume) { pv.Spec.AccessModes = m }
}
func pvVolumeMode(m v1.PersistentVolumeMode) pvOpt {
	return func(pv *v1.PersistentVolume) { pv.Spec.VolumeMode = &m }
}
func pvPhase(p v1.PersistentVolumePhase) pvOpt {
	return func(pv *v1.PersistentVolume) { pv.Status.Phase = p }
}
func pvLabels(kv ...string) pvOpt {
	return func(pv *v1.PersistentVolume) { pv.Labels = pairs(kv) }
}
func pvAnn(k, v string) pvOpt {
	return func(pv *v1.PersistentVolume) { metav1.SetMetaDataAnnotation(&pv.ObjectMeta, k, v) }
}
func pvVAC(c string) pvOpt {
	return func(pv *v1.PersistentVolume) { pv.Spec.VolumeAttributesClassName = &c }
}
func pvReclaim(p v1.PersistentVolumeReclaimPolicy) pvOpt {
	return func(pv *v1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = p }
}
func pvRV(rv string) pvOpt   { return func(pv *v1.PersistentVolume) { pv.ResourceVersion = rv } }
func pvUID(uid string) pvOpt { return func(pv *v1.PersistentVolume) { pv.UID = types.UID(uid) } }
func pvDeleting() pvOpt {
	return func(pv *v1.PersistentVolume) { pv.DeletionTimestamp = &metav1.Time{} }
}
func pvCSISource(driver string) pvOpt {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "h-" + pv.Name}}
	}
}
func pvDynamic(by string) pvOpt { return pvAnn(storagehelpers.AnnDynamicallyProvisioned, by) }
func pvBoundByController() pvOpt {
	return pvAnn(storagehelpers.AnnBoundByController, "yes")
}

// pvClaimRef points the volume at default/<claim>; uid "" is a user's
// pre-binding.
func pvClaimRef(claim, uid string) pvOpt {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: claim, UID: types.UID(uid)}
	}
}

// pvNode gives the volume a required node affinity: label key In values.
func pvNode(key string, values ...string) pvOpt {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
				{Key: key, Operator: v1.NodeSelectorOpIn, Values: values},
			}}},
		}}
	}
}

type pvcOpt func(*v1.PersistentVolumeClaim)

// newPVC is a Pending claim in namespace default with UID "uid-<name>", no
// storage class (nil) and access mode ReadWriteOnce.
func newPVC(name, size string, opts ...pvcOpt) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{rwo},
			Resources: v1.VolumeResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)},
			},
		},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func claimClass(s string) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.StorageClassName = &s }
}
func claimModes(m ...v1.PersistentVolumeAccessMode) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.AccessModes = m }
}
func claimVolumeMode(m v1.PersistentVolumeMode) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeMode = &m }
}
func claimVAC(s string) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeAttributesClassName = &s }
}
func claimVolume(name string) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = name }
}
func claimAnn(k, v string) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) { metav1.SetMetaDataAnnotation(&c.ObjectMeta, k, v) }
}
func claimUID(uid string) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) { c.UID = types.UID(uid) }
}
func claimSelector(s *metav1.LabelSelector) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.Selector = s }
}
func claimRequest(size string) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.Resources.Requests = v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}
	}
}
func claimNoRequest() pvcOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.Resources.Requests = nil }
}

// claimBound marks the claim as past its first binding to volume.
func claimBound(volume string) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.VolumeName = volume
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
		c.Status.Phase = v1.ClaimBound
	}
}
func claimSelectedNode(node string) pvcOpt { return claimAnn(storagehelpers.AnnSelectedNode, node) }

type classOpt func(*storagev1.StorageClass)

func newClass(name, provisioner string, opts ...classOpt) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner}
	for _, o := range opts {
		o(sc)
	}
	return sc
}

func wffc() classOpt {
	return func(sc *storagev1.StorageClass) {
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	}
}

func pairs(kv []string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func indexOf(pvs ...*v1.PersistentVolume) *Index {
	ix := NewIndex()
	for _, pv := range pvs {
		ix.Upsert(pv)
	}
	return ix
}

func mustParse(t testing.TB, claim *v1.PersistentVolumeClaim) ClaimNeeds {
	t.Helper()
	n, err := ParseClaim(claim)
	if err != nil {
		t.Fatalf("ParseClaim(%s): %v", claim.Name, err)
	}
	return n
}

func nameOf(pv *v1.PersistentVolume) string {
	if pv == nil {
		return ""
	}
	return pv.Name
}

// wantEvent is an expected event: type and reason, and a substring of the
// message when msg is set. The zero wantEvent expects no event.
type wantEvent struct {
	typ, reason, msg string
}

func normalEvent(reason string) wantEvent {
	return wantEvent{typ: v1.EventTypeNormal, reason: reason}
}
func warningEvent(reason string) wantEvent {
	return wantEvent{typ: v1.EventTypeWarning, reason: reason}
}

func checkEvent(t *testing.T, what string, got *Event, want wantEvent) {
	t.Helper()
	if want == (wantEvent{}) {
		if got != nil {
			t.Errorf("%s: got event %+v, want none", what, *got)
		}
		return
	}
	if got == nil {
		t.Errorf("%s: got no event, want %s %s", what, want.typ, want.reason)
		return
	}
	if got.Type != want.typ || got.Reason != want.reason {
		t.Errorf("%s: got event %s %s (%q), want %s %s", what, got.Type, got.Reason, got.Message, want.typ, want.reason)
	}
	if want.msg != "" && !strings.Contains(got.Message, want.msg) {
		t.Errorf("%s: event message %q does not contain %q", what, got.Message, want.msg)
	}
	if got.Message == "" {
		t.Errorf("%s: event %s has an empty message", what, got.Reason)
	}
}
