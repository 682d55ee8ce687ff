package static

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const (
	otherFinalizer = "example.com/keep"
	pvProtection   = "kubernetes.io/pv-protection"
)

var pvResource = v1.SchemeGroupVersion.WithResource("persistentvolumes")

// fakeDeleter is the provisioner as the reclaimer sees it: it records the
// PVs it is asked about and told to delete, answers Answers with should
// (and unknown), and fails Delete with err.
type fakeDeleter struct {
	should  bool
	unknown error // Answers' error: this node not known yet
	err     error

	mu      sync.Mutex
	asked   []string
	deleted []*v1.PersistentVolume
}

func (d *fakeDeleter) Answers(_ context.Context, pv *v1.PersistentVolume) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, pv.Name)
	return d.should, d.unknown
}

func (d *fakeDeleter) Delete(_ context.Context, pv *v1.PersistentVolume) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deleted = append(d.deleted, pv.DeepCopy())
	return d.err
}

// fixture is a reclaimer on a fake clientset whose PV informer's store
// holds the PVs it was made with (the informer is not started).
type fixture struct {
	r       *Reclaimer
	client  *fake.Clientset
	deleter *fakeDeleter
	store   cache.Store
}

func newFixture(t *testing.T, pvs ...*v1.PersistentVolume) *fixture {
	t.Helper()
	objs := make([]runtime.Object, 0, len(pvs))
	for _, pv := range pvs {
		objs = append(objs, pv.DeepCopy())
	}
	client := fake.NewClientset(objs...)
	informer := informers.NewSharedInformerFactory(client, 0).Core().V1().PersistentVolumes().Informer()
	for _, pv := range pvs {
		if err := informer.GetStore().Add(pv.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	deleter := &fakeDeleter{should: true}
	r, err := New(Options{Client: client, Driver: driverNm, Deleter: deleter, Volumes: informer,
		RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string]()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.queue.ShutDown)
	client.ClearActions()
	return &fixture{r: r, client: client, deleter: deleter, store: informer.GetStore()}
}

// verbs lists the client's recorded actions as "verb" or "verb/subresource".
func (f *fixture) verbs() []string {
	var out []string
	for _, a := range f.client.Actions() {
		v := a.GetVerb()
		if a.GetSubresource() != "" {
			v += "/" + a.GetSubresource()
		}
		out = append(out, v)
	}
	return out
}

// patches are the merge patches the client was sent, decoded.
func (f *fixture) patches(t *testing.T) []patchBody {
	t.Helper()
	var out []patchBody
	for _, a := range f.client.Actions() {
		p, ok := a.(k8stesting.PatchAction)
		if !ok {
			continue
		}
		if p.GetPatchType() != types.MergePatchType {
			t.Errorf("patch of %s is a %s, want a merge patch", p.GetName(), p.GetPatchType())
		}
		var body patchBody
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatalf("patch %s: %v", p.GetPatch(), err)
		}
		body.name, body.raw = p.GetName(), string(p.GetPatch())
		out = append(out, body)
	}
	return out
}

type patchBody struct {
	Metadata struct {
		Finalizers      *[]string `json:"finalizers"`
		ResourceVersion string    `json:"resourceVersion"`
	} `json:"metadata"`
	name, raw string
}

// stored is the PV named name as the fake API server has it, nil if none.
func (f *fixture) stored(t *testing.T, name string) *v1.PersistentVolume {
	t.Helper()
	obj, err := f.client.Tracker().Get(pvResource, "", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*v1.PersistentVolume)
}

// holdWhileFinalized makes PV deletes behave as the API server's: the UID
// precondition is checked, and a PV with finalizers only gets a
// deletionTimestamp (and a new resourceVersion).
func (f *fixture) holdWhileFinalized(t *testing.T) {
	f.client.PrependReactor("delete", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		obj, err := f.client.Tracker().Get(pvResource, "", d.GetName())
		if err != nil {
			return true, nil, err
		}
		pv := obj.(*v1.PersistentVolume).DeepCopy()
		if p := d.GetDeleteOptions().Preconditions; p != nil && p.UID != nil && *p.UID != pv.UID {
			return true, nil, apierrors.NewConflict(pvResource.GroupResource(), pv.Name, errors.New("the UID precondition failed"))
		}
		if len(pv.Finalizers) == 0 {
			return false, nil, nil // the tracker deletes it
		}
		now := metav1.Now()
		pv.DeletionTimestamp = &now
		pv.ResourceVersion = "43"
		if err := f.client.Tracker().Update(pvResource, pv, ""); err != nil {
			t.Errorf("holding %s Terminating: %v", pv.Name, err)
		}
		return true, pv, nil
	})
}

func failWith(err error) k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err }
}

func withRV(pv *v1.PersistentVolume, rv string) *v1.PersistentVolume {
	pv.ResourceVersion = rv
	return pv
}

func TestNewRequiresClientDeleterVolumesAndDriver(t *testing.T) {
	client := fake.NewClientset()
	informer := informers.NewSharedInformerFactory(client, 0).Core().V1().PersistentVolumes().Informer()
	full := Options{Client: client, Driver: driverNm, Deleter: &fakeDeleter{}, Volumes: informer}
	tests := []struct {
		name    string
		without func(*Options)
	}{
		{"no client", func(o *Options) { o.Client = nil }},
		{"no deleter", func(o *Options) { o.Deleter = nil }},
		{"no PV informer", func(o *Options) { o.Volumes = nil }},
		{"no driver", func(o *Options) { o.Driver = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := full
			tt.without(&o)
			r, err := New(o)
			if err == nil || r != nil {
				t.Fatalf("New = %v, %v; want an error", r, err)
			}
			if !strings.Contains(err.Error(), "required") {
				t.Errorf("error %q does not say what is required", err)
			}
		})
	}
	t.Run("all set: a reclaimer with a queue of its own", func(t *testing.T) {
		o := full
		o.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]()
		r, err := New(o)
		if err != nil || r == nil {
			t.Fatalf("New = %v, %v; want a reclaimer", r, err)
		}
		defer r.queue.ShutDown()
		if r.queue == nil {
			t.Fatal("no queue made")
		}
		if r.o.Driver != driverNm || r.o.Client != client {
			t.Errorf("options not kept: %+v", r.o)
		}
	})
}

func TestNewReturnsTheInformersErrorOnceItHasStopped(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().PersistentVolumes().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	cancel()
	factory.Shutdown()
	if !informer.IsStopped() {
		t.Fatal("the informer has not stopped")
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	r, err := New(Options{Client: client, Driver: driverNm, Deleter: &fakeDeleter{}, Volumes: informer, Queue: q})
	if err == nil || r != nil {
		t.Fatalf("New = %v, %v; want the informer's error", r, err)
	}
}

// TestInformerQueuesOnlyPVsWithSomethingToDo runs the informer on the fake
// clientset: adds and updates of PVs Decide answers None for stay out of
// Options.Queue, the others go in by name.
func TestInformerQueuesOnlyPVsWithSomethingToDo(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().PersistentVolumes().Informer()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	if _, err := New(Options{Client: client, Driver: driverNm, Deleter: &fakeDeleter{}, Volumes: informer, Queue: q}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the PV informer did not sync")
	}
	pvs := client.CoreV1().PersistentVolumes()
	named := func(name string, pv *v1.PersistentVolume) *v1.PersistentVolume {
		pv.Name, pv.UID = name, types.UID(name+"-uid")
		return pv
	}
	// next waits until the queue holds one name, and takes it; the events
	// before the one that queued it were handled (and not queued) first.
	next := func(want string) {
		t.Helper()
		if err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
			return q.Len() > 0, nil
		}); err != nil {
			t.Fatalf("waiting for %s to be queued: %v", want, err)
		}
		if n := q.Len(); n != 1 {
			t.Fatalf("%d names queued, want only %s", n, want)
		}
		got, _ := q.Get()
		q.Done(got)
		if got != want {
			t.Fatalf("queued %q, want %q", got, want)
		}
	}
	mustCreate := func(pv *v1.PersistentVolume) {
		t.Helper()
		if _, err := pvs.Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mustUpdate := func(name string, change func(*v1.PersistentVolume)) {
		t.Helper()
		pv, err := pvs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(pv)
		if _, err := pvs.Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label := func(pv *v1.PersistentVolume) { pv.Labels = map[string]string{"touched": "yes"} }

	del := v1.PersistentVolumeReclaimDelete
	other := named("other-driver", staticPV(del, v1.VolumeReleased))
	other.Spec.CSI.Driver = "other.csi"
	mustCreate(named("available", staticPV(del, v1.VolumeAvailable)))        // None
	mustCreate(other)                                                        // None
	mustCreate(named("finalized", staticPV(del, v1.VolumeBound, finalizer))) // None
	mustCreate(named("bound", staticPV(del, v1.VolumeBound)))                // AddFinalizer
	next("bound")

	mustUpdate("available", label)    // still None
	mustUpdate("other-driver", label) // still None
	mustUpdate("finalized", label)    // still None
	mustUpdate("bound", label)        // still AddFinalizer
	next("bound")

	mustUpdate("available", func(pv *v1.PersistentVolume) { pv.Status.Phase = v1.VolumeReleased }) // Delete
	next("available")
	mustUpdate("finalized", func(pv *v1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
	}) // RemoveFinalizer
	next("finalized")
}

func TestReconcileOfAPVNotInTheStoreDoesNothing(t *testing.T) {
	f := newFixture(t)
	if err := f.r.Reconcile(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	if len(f.deleter.asked) != 0 || len(f.client.Actions()) != 0 {
		t.Errorf("asked %v, actions %v; want nothing", f.deleter.asked, f.verbs())
	}
}

// TestReconcileLeavesAPVShouldDeleteRefuses: in node-deployment mode another
// node's volume is not this reclaimer's, whatever Decide says.
func TestReconcileLeavesAPVShouldDeleteRefuses(t *testing.T) {
	del, keep := v1.PersistentVolumeReclaimDelete, v1.PersistentVolumeReclaimRetain
	for name, pv := range map[string]*v1.PersistentVolume{
		"bound (AddFinalizer)":       staticPV(del, v1.VolumeBound),
		"retained (RemoveFinalizer)": staticPV(keep, v1.VolumeBound, finalizer),
		"released (Delete)":          staticPV(del, v1.VolumeReleased, finalizer),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, pv)
			f.deleter.should = false
			if err := f.r.Reconcile(context.Background(), pv.Name); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.deleter.asked, []string{pv.Name}) {
				t.Errorf("Answers asked about %v, want [%s]", f.deleter.asked, pv.Name)
			}
			if len(f.deleter.deleted) != 0 || len(f.client.Actions()) != 0 {
				t.Errorf("deleted %d backend volumes, actions %v; want nothing", len(f.deleter.deleted), f.verbs())
			}
			if got := f.stored(t, pv.Name); !slices.Equal(got.Finalizers, pv.Finalizers) {
				t.Errorf("finalizers %v, want %v", got.Finalizers, pv.Finalizers)
			}
		})
	}
}

// TestReconcileRetriesWhileItsNodeIsUnknown: in node-deployment mode a
// Bound static Delete PV the reclaimer cannot yet tell is its node's (the
// node not in its cache) is tried again, not dropped: it was dropped until
// the PV's next event, which came only with its deletion while Bound, and
// the volume went with nothing to delete it (simulator seed 5488 of issue
// 49's gap moves).
func TestReconcileRetriesWhileItsNodeIsUnknown(t *testing.T) {
	pv := staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeBound)
	f := newFixture(t, pv)
	f.deleter.unknown = errors.New("this node node-2 is not in the node cache yet")
	if err := f.r.Reconcile(context.Background(), pv.Name); err == nil {
		t.Fatal("Reconcile took a PV it could not tell was its node's for another node's: no retry")
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("actions %v while its node was unknown; want none", f.verbs())
	}
	f.deleter.unknown = nil
	if err := f.r.Reconcile(context.Background(), pv.Name); err != nil {
		t.Fatal(err)
	}
	if got := f.verbs(); !slices.Equal(got, []string{"patch"}) {
		t.Errorf("actions %v once its node is known, want the finalizer's patch", got)
	}
}

// TestReconcileWritesTheFinalizers: AddFinalizer and RemoveFinalizer patch
// only the deletion finalizer, keep the others, and carry the PV's
// resourceVersion; the PV in the store is not changed.
func TestReconcileWritesTheFinalizers(t *testing.T) {
	del, keep := v1.PersistentVolumeReclaimDelete, v1.PersistentVolumeReclaimRetain
	tests := []struct {
		name string
		pv   *v1.PersistentVolume
		want []string
	}{
		{"bound with Delete: the finalizer is added after the others",
			withRV(staticPV(del, v1.VolumeBound, otherFinalizer), "42"), []string{otherFinalizer, finalizer}},
		{"bound with Delete, no finalizer at all",
			withRV(staticPV(del, v1.VolumeBound), "7"), []string{finalizer}},
		{"retained: the finalizer is removed, the others kept",
			withRV(staticPV(keep, v1.VolumeBound, otherFinalizer, finalizer, pvProtection), "42"), []string{otherFinalizer, pvProtection}},
		{"recycled, ours the only finalizer: the patch empties the list",
			withRV(staticPV(v1.PersistentVolumeReclaimRecycle, v1.VolumeReleased, finalizer), "9"), []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.pv)
			if err := f.r.Reconcile(context.Background(), tt.pv.Name); err != nil {
				t.Fatal(err)
			}
			if got := f.verbs(); !slices.Equal(got, []string{"patch"}) {
				t.Fatalf("actions %v, want one patch", got)
			}
			p := f.patches(t)[0]
			if p.name != tt.pv.Name || p.Metadata.ResourceVersion != tt.pv.ResourceVersion ||
				p.Metadata.Finalizers == nil || !slices.Equal(*p.Metadata.Finalizers, tt.want) {
				t.Errorf("patch of %s: %s; want finalizers %q and resourceVersion %q", p.name, p.raw, tt.want, tt.pv.ResourceVersion)
			}
			if got := f.stored(t, tt.pv.Name).Finalizers; !slices.Equal(got, tt.want) {
				t.Errorf("stored finalizers %v, want %v", got, tt.want)
			}
			if len(f.deleter.deleted) != 0 {
				t.Errorf("a backend volume was deleted")
			}
			obj, _, _ := f.store.GetByKey(tt.pv.Name)
			if got := obj.(*v1.PersistentVolume).Finalizers; !slices.Equal(got, tt.pv.Finalizers) {
				t.Errorf("the informer's PV was changed: finalizers %v, want %v", got, tt.pv.Finalizers)
			}
		})
	}
}

// TestReconcileDeletesAReleasedPV: the backend volume, then the PV with
// its UID as precondition; the API server holds a PV with finalizers
// Terminating, and ours is then dropped from that same PV.
func TestReconcileDeletesAReleasedPV(t *testing.T) {
	del := v1.PersistentVolumeReclaimDelete
	deleting := func(pv *v1.PersistentVolume) *v1.PersistentVolume {
		now := metav1.Now()
		pv.DeletionTimestamp = &now
		return pv
	}
	tests := []struct {
		name       string
		pv         *v1.PersistentVolume
		wantVerbs  []string
		wantPatch  []string // the finalizers the patch writes; nil: no patch
		wantStored []string // the finalizers of the PV left Terminating; nil: the PV is gone
	}{
		{"with our finalizer: held Terminating, then the finalizer goes",
			withRV(staticPV(del, v1.VolumeReleased, finalizer), "42"),
			[]string{"delete", "get", "patch"}, []string{}, []string{}},
		{"with ours and another finalizer: only ours goes",
			withRV(staticPV(del, v1.VolumeReleased, pvProtection, finalizer), "42"),
			[]string{"delete", "get", "patch"}, []string{pvProtection}, []string{pvProtection}},
		{"already Terminating with our finalizer (a crash mid-way): done again",
			withRV(deleting(staticPV(del, v1.VolumeReleased, finalizer)), "42"),
			[]string{"delete", "get", "patch"}, []string{}, []string{}},
		{"without finalizers: the PV is gone at once",
			withRV(staticPV(del, v1.VolumeReleased), "42"),
			[]string{"delete", "get"}, nil, nil},
		{"held by another finalizer only: no write of the finalizers",
			withRV(staticPV(del, v1.VolumeReleased, pvProtection), "42"),
			[]string{"delete", "get"}, nil, []string{pvProtection}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.pv)
			f.holdWhileFinalized(t)
			if err := f.r.Reconcile(context.Background(), tt.pv.Name); err != nil {
				t.Fatal(err)
			}
			if len(f.deleter.deleted) != 1 || f.deleter.deleted[0].UID != tt.pv.UID {
				t.Fatalf("backend deletes %v, want one of %s", f.deleter.deleted, tt.pv.UID)
			}
			if got := f.verbs(); !slices.Equal(got, tt.wantVerbs) {
				t.Fatalf("actions %v, want %v", got, tt.wantVerbs)
			}
			d := f.client.Actions()[0].(k8stesting.DeleteAction)
			if pre := d.GetDeleteOptions().Preconditions; d.GetName() != tt.pv.Name || pre == nil || pre.UID == nil || *pre.UID != tt.pv.UID {
				t.Errorf("PV delete of %s with preconditions %+v, want UID %s", d.GetName(), pre, tt.pv.UID)
			}
			patches := f.patches(t)
			switch {
			case tt.wantPatch == nil && len(patches) != 0:
				t.Errorf("patched: %s", patches[0].raw)
			case tt.wantPatch != nil:
				p := patches[0]
				// The resourceVersion is that of the PV held Terminating (the
				// reactor's 43), not the informer's.
				if p.name != tt.pv.Name || p.Metadata.ResourceVersion != "43" ||
					p.Metadata.Finalizers == nil || !slices.Equal(*p.Metadata.Finalizers, tt.wantPatch) {
					t.Errorf("patch of %s: %s; want finalizers %q and resourceVersion 43", p.name, p.raw, tt.wantPatch)
				}
			}
			got := f.stored(t, tt.pv.Name)
			switch {
			case tt.wantStored == nil && got != nil:
				t.Errorf("the PV is still there: %+v", got.ObjectMeta)
			case tt.wantStored != nil && got == nil:
				t.Errorf("the PV is gone, want it Terminating")
			case tt.wantStored != nil:
				if got.DeletionTimestamp == nil || !slices.Equal(got.Finalizers, tt.wantStored) {
					t.Errorf("stored PV: deletionTimestamp %v, finalizers %v; want Terminating with %v", got.DeletionTimestamp, got.Finalizers, tt.wantStored)
				}
			}
		})
	}
}

// TestReconcileLeavesANewPVOfTheSameName: the PV was deleted and a new one
// made under its name before the reclaimer read it back; its finalizer is
// not ours to drop.
func TestReconcileLeavesANewPVOfTheSameName(t *testing.T) {
	old := withRV(staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeReleased, finalizer), "42")
	f := newFixture(t, old)
	newer := staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeBound, finalizer)
	newer.UID, newer.ResourceVersion = "new-uid", "50"
	f.client.PrependReactor("get", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, newer.DeepCopy(), nil
	})
	if err := f.r.Reconcile(context.Background(), old.Name); err != nil {
		t.Fatal(err)
	}
	if got := f.verbs(); !slices.Equal(got, []string{"delete", "get"}) {
		t.Errorf("actions %v, want delete and get only", got)
	}
	if len(f.deleter.deleted) != 1 {
		t.Errorf("%d backend deletes, want 1", len(f.deleter.deleted))
	}
}

// TestReconcileDeleteErrors: an error stops the work where it happens and
// is returned (for a retry); nothing after it is written.
func TestReconcileDeleteErrors(t *testing.T) {
	backendDown := errors.New("backend unavailable")
	internal := apierrors.NewInternalError(errors.New("etcd down"))
	tests := []struct {
		name      string
		deleteErr error  // Deleter.Delete's error
		verb      string // the client verb that fails with internal
		wantErr   error
		wantVerbs []string
	}{
		{"the backend volume's delete fails: no write", backendDown, "", backendDown, nil},
		{"the PV's delete fails", nil, "delete", internal, []string{"delete"}},
		{"reading the PV back fails", nil, "get", internal, []string{"delete", "get"}},
		{"the finalizer's patch fails", nil, "patch", internal, []string{"delete", "get", "patch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv := withRV(staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeReleased, finalizer), "42")
			f := newFixture(t, pv)
			f.deleter.err = tt.deleteErr
			f.holdWhileFinalized(t)
			if tt.verb != "" {
				f.client.PrependReactor(tt.verb, "persistentvolumes", failWith(internal))
			}
			err := f.r.Reconcile(context.Background(), pv.Name)
			if !errors.Is(err, tt.wantErr) && !(apierrors.IsInternalError(err) && apierrors.IsInternalError(tt.wantErr)) {
				t.Fatalf("Reconcile = %v, want %v", err, tt.wantErr)
			}
			if len(f.deleter.deleted) != 1 {
				t.Errorf("%d backend deletes, want 1", len(f.deleter.deleted))
			}
			if got := f.verbs(); !slices.Equal(got, tt.wantVerbs) {
				t.Errorf("actions %v, want %v", got, tt.wantVerbs)
			}
			if got := f.stored(t, pv.Name); got == nil || !slices.Equal(got.Finalizers, []string{finalizer}) {
				t.Errorf("stored PV %v, want it with our finalizer", got)
			}
		})
	}
}

// TestReconcileAPVDeletedMeanwhile: the PV's delete and its read back may
// find it gone; that is done, not an error.
func TestReconcileAPVDeletedMeanwhile(t *testing.T) {
	pv := staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeReleased, finalizer)
	f := newFixture(t, pv)
	gone := apierrors.NewNotFound(pvResource.GroupResource(), pv.Name)
	f.client.PrependReactor("delete", "persistentvolumes", failWith(gone))
	f.client.PrependReactor("get", "persistentvolumes", failWith(gone))
	if err := f.r.Reconcile(context.Background(), pv.Name); err != nil {
		t.Fatalf("Reconcile = %v, want nil", err)
	}
	if got := f.verbs(); !slices.Equal(got, []string{"delete", "get"}) {
		t.Errorf("actions %v, want delete and get", got)
	}
	if len(f.deleter.deleted) != 1 {
		t.Errorf("%d backend deletes, want 1", len(f.deleter.deleted))
	}
}

func TestDropFinalizerWithoutOursWritesNothing(t *testing.T) {
	pv := staticPV(v1.PersistentVolumeReclaimRetain, v1.VolumeBound, otherFinalizer)
	f := newFixture(t, pv)
	if err := f.r.dropFinalizer(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != 0 {
		t.Errorf("actions %v, want none", f.verbs())
	}
}

func TestSetFinalizersWritesAnEmptyListForNil(t *testing.T) {
	pv := withRV(staticPV(v1.PersistentVolumeReclaimRetain, v1.VolumeBound, finalizer, otherFinalizer), "42")
	f := newFixture(t, pv)
	if err := f.r.setFinalizers(context.Background(), pv, nil); err != nil {
		t.Fatal(err)
	}
	p := f.patches(t)
	if len(p) != 1 || !strings.Contains(p[0].raw, `"finalizers":[]`) || !strings.Contains(p[0].raw, `"resourceVersion":"42"`) {
		t.Fatalf("patches %+v, want one with \"finalizers\":[] and the resourceVersion", p)
	}
	if got := f.stored(t, pv.Name).Finalizers; len(got) != 0 {
		t.Errorf("stored finalizers %v, want none", got)
	}
}

func TestSetFinalizersErrors(t *testing.T) {
	pv := staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeBound)
	t.Run("the PV is gone: done", func(t *testing.T) {
		f := newFixture(t)
		if err := f.r.setFinalizers(context.Background(), pv, []string{finalizer}); err != nil {
			t.Errorf("setFinalizers = %v, want nil", err)
		}
		if got := f.verbs(); !slices.Equal(got, []string{"patch"}) {
			t.Errorf("actions %v, want the one patch", got)
		}
	})
	t.Run("a conflict: an error naming the PV", func(t *testing.T) {
		f := newFixture(t, pv)
		f.client.PrependReactor("patch", "persistentvolumes",
			failWith(apierrors.NewConflict(pvResource.GroupResource(), pv.Name, errors.New("the object has been modified"))))
		err := f.r.setFinalizers(context.Background(), pv, []string{finalizer})
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "finalizers of "+pv.Name) {
			t.Errorf("setFinalizers = %v, want a conflict naming %s", err, pv.Name)
		}
		if got := f.stored(t, pv.Name).Finalizers; len(got) != 0 {
			t.Errorf("stored finalizers %v, want none", got)
		}
	})
}
