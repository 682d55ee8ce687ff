package capacity

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// blockingDriver holds every GetCapacity call until want calls run at
// once, and counts the most that ran at once.
type blockingDriver struct {
	fakeDriver
	want int

	mu      sync.Mutex
	running int
	most    int
	full    chan struct{}
	once    sync.Once
}

func (d *blockingDriver) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	d.mu.Lock()
	d.running++
	d.most = max(d.most, d.running)
	if d.running == d.want {
		d.once.Do(func() { close(d.full) })
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.running--
		d.mu.Unlock()
	}()
	select {
	case <-d.full:
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%d calls never ran at once", d.want)
	}
	return d.fakeDriver.GetCapacity(ctx, req)
}

// Threads calls run at once, never more; 1 makes one call at a time.
func TestThreads(t *testing.T) {
	for _, threads := range []int{1, 3} {
		t.Run(fmt.Sprint(threads), func(t *testing.T) {
			free := map[string]int64{}
			var segments []map[string]string
			for i := range 7 {
				n := fmt.Sprint("n", i)
				free[n] = 1 << 30
				segments = append(segments, map[string]string{"node": n})
			}
			drv := &blockingDriver{fakeDriver: fakeDriver{free: free}, want: threads, full: make(chan struct{})}
			p, client := newPublisher(t, drv, func() ([]map[string]string, error) { return segments, nil })
			p.o.Threads = threads
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if drv.most != threads {
				t.Errorf("%d calls ran at once, want %d", drv.most, threads)
			}
			if got := published(t, client); len(got) != len(segments) {
				t.Errorf("published %v", got)
			}
		})
	}
}

// The failures that end a refresh are counted in the order the calls
// return, whatever the number of threads.
func TestThreadsFailing(t *testing.T) {
	var segments []map[string]string
	drv := &failingDriver{fakeDriver: fakeDriver{free: map[string]int64{}}, fail: map[string]bool{}}
	for i := range 20 {
		n := fmt.Sprint("n", i)
		segments = append(segments, map[string]string{"node": n})
		drv.fail[n] = true
	}
	p, client := newPublisher(t, drv, func() ([]map[string]string, error) { return segments, nil })
	p.o.Threads = 4
	if err := p.Sync(t.Context()); err == nil {
		t.Error("failed calls were not reported")
	}
	// Up to Threads-1 calls more than maxFailing may have started
	// before the maxFailing-th failed.
	if drv.calls < maxFailing || drv.calls > maxFailing+3 {
		t.Errorf("%d GetCapacity calls, want %d to %d", drv.calls, maxFailing, maxFailing+3)
	}
	if got := published(t, client); len(got) != 0 {
		t.Errorf("published %v", got)
	}
}
