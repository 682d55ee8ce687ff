package protect

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tether-csi/tether/pkg/inflight"
)

// Small builders for plain API objects; options change the defaults.

const (
	testNS   = "apps"
	driverNm = "csi.tether.dev"
)

type claimOpt func(*v1.PersistentVolumeClaim)

// newClaim is apps/data, class "fast", requesting 1Gi.
func newClaim(opts ...claimOpt) *v1.PersistentVolumeClaim {
	class := "fast"
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "data", UID: "data-uid", ResourceVersion: "7"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName: &class,
			Resources: v1.VolumeResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// sourceClaim is the claim apps/src (UID src-uid), bound to pv-src.
func sourceClaim() *v1.PersistentVolumeClaim {
	return newClaim(func(c *v1.PersistentVolumeClaim) {
		c.Name, c.UID = "src", "src-uid"
		c.Spec.VolumeName = "pv-src"
		c.Status.Phase = v1.ClaimBound
	})
}

// protectedSource is apps/src, bound, carrying the clone finalizer.
func protectedSource(opts ...claimOpt) *v1.PersistentVolumeClaim {
	src := sourceClaim()
	src.Finalizers = []string{"kubernetes.io/pvc-protection", FinalizerCloneSource}
	for _, o := range opts {
		o(src)
	}
	return src
}

func cloneOf(name string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: name}
	}
}

// aClone is a pending clone of apps/src named name.
func aClone(name string, opts ...claimOpt) *v1.PersistentVolumeClaim {
	c := newClaim(cloneOf("src"), func(c *v1.PersistentVolumeClaim) {
		c.Name, c.UID = name, types.UID(name+"-uid")
	})
	for _, o := range opts {
		o(c)
	}
	return c
}

func boundTo(volume string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName, c.Status.Phase = volume, v1.ClaimBound }
}

// holdingRecord gives the claim tether's in-flight record for its volume
// pvc-<UID>.
func holdingRecord() claimOpt {
	return func(c *v1.PersistentVolumeClaim) { inflight.Record(c, driverNm, "pvc-"+string(c.UID)) }
}

func beingDeleted() claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
		if len(c.Finalizers) == 0 {
			c.Finalizers = []string{"kubernetes.io/pvc-protection"}
		}
	}
}

func inNamespace(ns string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Namespace = ns }
}

// checkErr fails unless err matches want: "" for no error, else a
// substring of the message.
func checkErr(t *testing.T, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
	return err == nil
}

// poll waits for cond with a deadline.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

var claimsGVR = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}

// optimisticClient is a fake clientset whose claims have a
// resourceVersion, set on every write, and whose claim updates with a
// stale one conflict, as on an API server.
func optimisticClient() *fake.Clientset {
	cs := fake.NewClientset()
	tracker := cs.Tracker()
	rv := 100
	bump := func(obj metav1.Object) { rv++; obj.SetResourceVersion(strconv.Itoa(rv)) }
	cs.PrependReactor("create", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		bump(a.(k8stesting.CreateAction).GetObject().(metav1.Object))
		return false, nil, nil
	})
	cs.PrependReactor("update", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		claim := a.(k8stesting.UpdateAction).GetObject().(*v1.PersistentVolumeClaim).DeepCopy()
		obj, err := tracker.Get(claimsGVR, claim.Namespace, claim.Name)
		if err != nil {
			return true, nil, err
		}
		if cur := obj.(*v1.PersistentVolumeClaim); claim.ResourceVersion != "" && claim.ResourceVersion != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(claimsGVR.GroupResource(), claim.Name, fmt.Errorf("the object has been modified"))
		}
		bump(claim)
		return true, claim, tracker.Update(claimsGVR, claim, claim.Namespace)
	})
	return cs
}
