package benchcap

import (
	"sync"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// watcher follows the CSIStorageCapacity objects of the bench's namespace
// through a watch: which (class, segment) has one and with what capacity,
// when the last missing one appeared, and how many changes it saw.
type watcher struct {
	want int // objects expected: segments x classes

	mu       sync.Mutex
	free     map[string]int64 // by key(class, segment)
	names    map[string]string
	events   int64     // adds, updates that changed the capacity, deletes
	complete time.Time // when every key first had an object
	done     chan struct{}
	awaits   map[string]await
}

type await struct {
	free int64
	seen chan time.Time
}

func key(class, segment string) string { return class + "/" + segment }

func objectKey(o *storagev1.CSIStorageCapacity) string {
	seg := ""
	if o.NodeTopology != nil {
		seg = o.NodeTopology.MatchLabels[topologyKey]
	}
	return key(o.StorageClassName, seg)
}

func capacityOf(o *storagev1.CSIStorageCapacity) int64 {
	if o.Capacity == nil {
		return -1
	}
	return o.Capacity.Value()
}

// watchCapacities starts the watch and waits for its first list.
func watchCapacities(t *testing.T, client kubernetes.Interface, want int) *watcher {
	t.Helper()
	w := &watcher{want: want, free: map[string]int64{}, names: map[string]string{}, done: make(chan struct{}), awaits: map[string]await{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	inf := factory.Storage().V1().CSIStorageCapacities().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.set(obj.(*storagev1.CSIStorageCapacity)) },
		UpdateFunc: func(old, obj any) {
			if capacityOf(old.(*storagev1.CSIStorageCapacity)) != capacityOf(obj.(*storagev1.CSIStorageCapacity)) {
				w.set(obj.(*storagev1.CSIStorageCapacity))
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(*storagev1.CSIStorageCapacity); ok {
				w.mu.Lock()
				w.events++
				if k := objectKey(o); w.names[k] == o.Name {
					delete(w.free, k)
					delete(w.names, k)
				}
				w.mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("the bench's watch of CSIStorageCapacity did not sync")
	}
	return w
}

func (w *watcher) set(o *storagev1.CSIStorageCapacity) {
	now := time.Now()
	k, free := objectKey(o), capacityOf(o)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	w.free[k], w.names[k] = free, o.Name
	if a, ok := w.awaits[k]; ok && a.free == free {
		a.seen <- now
		delete(w.awaits, k)
	}
	if w.complete.IsZero() && len(w.free) >= w.want {
		w.complete = now
		close(w.done)
	}
}

// counts returns the events seen so far and how many keys have an object.
func (w *watcher) counts() (events int64, objects int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.events, len(w.free)
}

func (w *watcher) completed() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.complete
}

// await returns a channel that gets the time the object of k first shows
// free from now on.
func (w *watcher) await(k string, free int64) <-chan time.Time {
	seen := make(chan time.Time, 1)
	w.mu.Lock()
	w.awaits[k] = await{free: free, seen: seen}
	w.mu.Unlock()
	return seen
}
