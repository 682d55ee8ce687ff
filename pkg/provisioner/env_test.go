package provisioner

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// The stateful paths (provision, record, save, settle, clean-up) are tested
// step by step: a fake CSI driver whose CreateVolume can run a step of the
// test while it "works", a fake API server with the claim semantics that
// matter here (resourceVersion conflicts, finalizers holding a deleted
// claim, no new finalizer on a claim being deleted), and informer caches
// that the test refreshes from the API when it wants them to catch up, so
// that a stale cache is a step of its own.

// fakeDriver keeps volumes by name; CreateVolume is idempotent by name.
type fakeDriver struct {
	mu      sync.Mutex
	name    string
	vols    map[string]*csi.Volume
	creates []*csi.CreateVolumeRequest
	deletes []string
	// during, if set, runs inside CreateVolume after the volume is made
	// and before the answer: the interleaving under test.
	during func(*csi.CreateVolumeRequest)
	// fail, if set, is CreateVolume's error (after making the volume when
	// made is true: a timeout of a create that goes on in the background).
	fail error
	made bool
}

func newFakeDriver() *fakeDriver {
	return &fakeDriver{name: driverNm, vols: map[string]*csi.Volume{}}
}

func (d *fakeDriver) DriverName() string { return d.name }

func (d *fakeDriver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d.mu.Lock()
	d.creates = append(d.creates, req)
	fail, made, during := d.fail, d.made, d.during
	if fail == nil || made {
		if d.vols[req.Name] == nil {
			d.vols[req.Name] = &csi.Volume{VolumeId: "h-" + req.Name, CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
				ContentSource: req.VolumeContentSource}
		}
	}
	vol := d.vols[req.Name]
	d.mu.Unlock()
	if during != nil {
		during(req)
	}
	if fail != nil {
		return nil, fail
	}
	return &csi.CreateVolumeResponse{Volume: vol}, nil
}

func (d *fakeDriver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deletes = append(d.deletes, req.VolumeId)
	for name, v := range d.vols {
		if v.VolumeId == req.VolumeId {
			delete(d.vols, name)
		}
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// volumes lists the names of the volumes the driver holds.
func (d *fakeDriver) volumes() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for name := range d.vols {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func (d *fakeDriver) createCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.creates)
}

// env is one provisioner with its in-flight reconciler, on a fake API.
type env struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	driver   *fakeDriver
	claims   cache.SharedIndexInformer
	volumes  cache.SharedIndexInformer
	nodes    cache.Indexer
	csiNodes cache.Indexer
	p        *Provisioner
	r        *InFlight
	recorder *record.FakeRecorder
	clock    time.Time
	class    *storagev1.StorageClass
	classes  cache.Indexer
}

type envOpt func(*Options)

func nodeMode(node string) envOpt {
	return func(o *Options) {
		o.Node = &NodeDeployment{NodeName: node, BaseDelay: time.Second, MaxDelay: time.Second}
	}
}
func immediateBinding() envOpt {
	return func(o *Options) {
		o.Node.ImmediateBinding, o.Node.BaseDelay, o.Node.MaxDelay = true, time.Hour, time.Hour
	}
}
func uuidLen(n int) envOpt { return func(o *Options) { o.Request.VolumeNameUUIDLen = n } }
func cloning() envOpt      { return func(o *Options) { o.Clone = true } }
func newEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	e := &env{t: t, ctx: t.Context(), client: fake.NewClientset(), driver: newFakeDriver(),
		recorder: record.NewFakeRecorder(100), clock: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	e.apiSemantics()
	informer := func(obj runtime.Object) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(&cache.ListWatch{}, obj, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	e.claims, e.volumes = informer(&v1.PersistentVolumeClaim{}), informer(&v1.PersistentVolume{})
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e.nodes = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e.csiNodes = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	vas := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e.class, e.classes = newClass(nil), classes
	if err := classes.Add(e.class); err != nil {
		t.Fatal(err)
	}
	o := Options{Client: e.client, Driver: e.driver, Request: request.Options{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: -1},
		Claims:  corelisters.NewPersistentVolumeClaimLister(e.claims.GetIndexer()),
		Volumes: corelisters.NewPersistentVolumeLister(e.volumes.GetIndexer()),
		Classes: storagelisters.NewStorageClassLister(classes), Nodes: corelisters.NewNodeLister(e.nodes),
		CSINodes: storagelisters.NewCSINodeLister(e.csiNodes), VolumeAttachments: storagelisters.NewVolumeAttachmentLister(vas)}
	for _, opt := range opts {
		opt(&o)
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	p.now = func() time.Time { return e.clock }
	e.p = p
	e.r, err = p.NewInFlight(InFlightOptions{Claims: e.claims, Volumes: e.volumes, Classes: o.Classes, Recorder: e.recorder,
		RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string]()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.r.queue.ShutDown)
	return e
}

// restart is a new provisioner process on the same API and driver: no
// memory of the last one's hand-offs.
func (e *env) restart() {
	e.t.Helper()
	p, err := New(e.p.o)
	if err != nil {
		e.t.Fatal(err)
	}
	p.now = func() time.Time { return e.clock }
	e.p, e.r.p = p, p
}

var claimsGVR = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}

// apiSemantics gives the fake API server the claim behaviour the paths
// under test rely on: optimistic concurrency, deletion held by
// finalizers, and no new finalizer on a claim being deleted.
func (e *env) apiSemantics() {
	tracker := e.client.Tracker()
	rv := 100
	bump := func(obj metav1.Object) { rv++; obj.SetResourceVersion(strconv.Itoa(rv)) }
	e.client.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if obj, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok {
			bump(obj)
		}
		return false, nil, nil
	})
	e.client.PrependReactor("update", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		claim := a.(k8stesting.UpdateAction).GetObject().(*v1.PersistentVolumeClaim)
		obj, err := tracker.Get(claimsGVR, claim.Namespace, claim.Name)
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*v1.PersistentVolumeClaim)
		if claim.ResourceVersion != "" && claim.ResourceVersion != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(claimsGVR.GroupResource(), claim.Name, fmt.Errorf("the object has been modified"))
		}
		if cur.DeletionTimestamp != nil {
			for _, f := range claim.Finalizers {
				if !slices.Contains(cur.Finalizers, f) {
					return true, nil, apierrors.NewForbidden(claimsGVR.GroupResource(), claim.Name, fmt.Errorf("no new finalizers can be added if the object is being deleted"))
				}
			}
			claim.DeletionTimestamp = cur.DeletionTimestamp
			if len(claim.Finalizers) == 0 {
				return true, claim, tracker.Delete(claimsGVR, claim.Namespace, claim.Name)
			}
		}
		out := claim.DeepCopy()
		bump(out)
		return true, out, tracker.Update(claimsGVR, out, out.Namespace)
	})
	e.client.PrependReactor("delete", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		obj, err := tracker.Get(claimsGVR, d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*v1.PersistentVolumeClaim).DeepCopy()
		if len(cur.Finalizers) == 0 {
			return true, nil, tracker.Delete(claimsGVR, cur.Namespace, cur.Name)
		}
		if cur.DeletionTimestamp == nil {
			now := metav1.NewTime(e.clock)
			cur.DeletionTimestamp = &now
			bump(cur)
		}
		return true, cur, tracker.Update(claimsGVR, cur, cur.Namespace)
	})
}

// createClaim saves a claim in the API and the cache.
func (e *env) createClaim(c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	e.t.Helper()
	c = c.DeepCopy()
	c.ResourceVersion = ""
	out, err := e.client.CoreV1().PersistentVolumeClaims(c.Namespace).Create(e.ctx, c, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.refresh()
	return out
}

// apiClaim is the claim as the API server has it, nil when gone.
func (e *env) apiClaim(name string) *v1.PersistentVolumeClaim {
	e.t.Helper()
	c, err := e.client.CoreV1().PersistentVolumeClaims(testNS).Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// cachedClaim is the claim as the informer has it, nil when gone.
func (e *env) cachedClaim(name string) *v1.PersistentVolumeClaim {
	obj, ok, _ := e.claims.GetStore().GetByKey(testNS + "/" + name)
	if !ok {
		return nil
	}
	return obj.(*v1.PersistentVolumeClaim)
}

// deleteClaim asks the API server to delete a claim (its finalizers hold
// it) without refreshing the cache.
func (e *env) deleteClaim(name string) {
	e.t.Helper()
	if err := e.client.CoreV1().PersistentVolumeClaims(testNS).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// updateClaim changes a claim in the API as another component would.
func (e *env) updateClaim(name string, change func(*v1.PersistentVolumeClaim)) {
	e.t.Helper()
	c := e.apiClaim(name)
	change(c)
	if _, err := e.client.CoreV1().PersistentVolumeClaims(testNS).Update(e.ctx, c, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// savePV is the library saving the PV that Provision returned.
func (e *env) savePV(pv *v1.PersistentVolume) {
	e.t.Helper()
	pv = pv.DeepCopy()
	pv.CreationTimestamp = metav1.NewTime(e.clock)
	if _, err := e.client.CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// refresh makes the caches catch up with the API server.
func (e *env) refresh() {
	e.t.Helper()
	claims, err := e.client.CoreV1().PersistentVolumeClaims("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pvs, err := e.client.CoreV1().PersistentVolumes().List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var objs []any
	for i := range claims.Items {
		objs = append(objs, &claims.Items[i])
	}
	if err := e.claims.GetStore().Replace(objs, ""); err != nil {
		e.t.Fatal(err)
	}
	objs = nil
	for i := range pvs.Items {
		objs = append(objs, &pvs.Items[i])
	}
	if err := e.volumes.GetStore().Replace(objs, ""); err != nil {
		e.t.Fatal(err)
	}
}

// provision is the library's call for a claim, as it has it cached.
func (e *env) provision(claim *v1.PersistentVolumeClaim) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	var node *v1.Node
	if name := claim.Annotations["volume.kubernetes.io/selected-node"]; name != "" {
		if obj, ok, _ := e.nodes.GetByKey(name); ok {
			node = obj.(*v1.Node)
		}
	}
	return e.p.Provision(e.ctx, controller.ProvisionOptions{StorageClass: e.class, PVC: claim, SelectedNode: node})
}

// settle runs one step of the in-flight reconciler for a claim.
func (e *env) settle(name string) {
	e.t.Helper()
	if err := e.r.Reconcile(e.ctx, testNS+"/"+name); err != nil {
		e.t.Fatalf("in-flight reconciler: %v", err)
	}
}

// events drains the recorded events.
func (e *env) events() []string { return drain(e.recorder) }

// drain returns the events a fake recorder holds, emptying it.
func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case ev := <-rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// timeoutErr is a CreateVolume that timed out while the driver goes on.
var timeoutErr = status.Error(codes.DeadlineExceeded, "context deadline exceeded")

// createNode creates a node in the API and the cache.
func (e *env) createNode(n *v1.Node) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.nodes.Add(n); err != nil {
		e.t.Fatal(err)
	}
}

// deleteClass removes the test class from the cache (as its deletion,
// once seen).
func (e *env) deleteClass() {
	e.t.Helper()
	if err := e.classes.Delete(e.class); err != nil {
		e.t.Fatal(err)
	}
}

// holdsRecord reports whether the claim at the API holds the record.
func (e *env) holdsRecord(name string) bool {
	c := e.apiClaim(name)
	return c != nil && inflight.Holds(c)
}
