package benchprov

import (
	"context"
	"hash/fnv"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// slowBackend is a CSI controller of the bench's own, put in front of the
// csi-test mock driver (whose JavaScript hooks crash under overlapping
// calls), that behaves like a cloud backend that needs latency for every
// CreateVolume and DeleteVolume:
//
//   - it takes any number of calls at once;
//   - a call's work goes on after its caller gave up (deadline or
//     cancellation): the volume is still made, or still deleted, and the
//     answer goes nowhere;
//   - it looks a name up among the volumes it has finished: a CreateVolume
//     that finds its volume made answers at once with it (idempotent by
//     name, as CSI asks), and a DeleteVolume of a volume it does not hold
//     answers at once that it is gone; but a call that comes while another
//     for the same volume is still at work starts a making (or a deletion)
//     of its own, as backends do whose name lookup sees only finished
//     volumes (vsphere-csi-driver issue 3024: retries pile up, duplicates
//     are made).
//
// It counts, per volume name, the calls, the operations started (volumes
// made, deletions) and the most calls at work at once. The making itself
// is the mock's CreateVolume (idempotent by name), after the latency; the
// deletion the mock's DeleteVolume.
type slowBackend struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	// Socket is where the backend serves.
	Socket  string
	id      csi.IdentityClient
	ctrl    csi.ControllerClient
	latency time.Duration
	// jitter spreads each operation's latency over latency x (1 +- jitter),
	// by a hash of the volume's name (0: every operation takes latency).
	jitter float64
	// after is time.After; the unit test holds the work with its own.
	after func(time.Duration) <-chan time.Time

	mu      sync.Mutex
	volumes map[string]*csi.Volume // finished volumes by name
	names   map[string]string      // volume ID -> name
	creates map[string]*opCounts   // by volume name
	deletes map[string]*opCounts   // by volume name
	// busy is how many calls are at work now; peak the most at once.
	busy, peak int
	// trace, if set, gets each volume's first DeleteVolume at work: its
	// arrival and its finish.
	trace *deleteTrace
}

func (b *slowBackend) setTrace(d *deleteTrace) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trace = d
}

// opCounts is what one volume's CreateVolume (or DeleteVolume) calls did.
type opCounts struct {
	calls   int // calls received
	started int // makings (or deletions) started: a call that found its work done starts none
	// atWork is how many of the calls are at work now (a call is at work
	// from its arrival until the backend is done with it, whether or not
	// its caller still waits); maxAtWork the most at once.
	atWork, maxAtWork int
}

// startSlowBackend serves a slowBackend in front of the driver at target.
func startSlowBackend(t *testing.T, target string, latency time.Duration) *slowBackend {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	dir, err := os.MkdirTemp("", "slow") // socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := newSlowBackend(csi.NewIdentityClient(conn), csi.NewControllerClient(conn), latency)
	b.Socket = filepath.Join(dir, "slow.sock")
	lis, err := net.Listen("unix", b.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, b)
	csi.RegisterControllerServer(srv, b)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return b
}

func newSlowBackend(id csi.IdentityClient, ctrl csi.ControllerClient, latency time.Duration) *slowBackend {
	return &slowBackend{id: id, ctrl: ctrl, latency: latency, after: time.After,
		volumes: map[string]*csi.Volume{}, names: map[string]string{}, creates: map[string]*opCounts{}, deletes: map[string]*opCounts{}}
}

// arrive counts a call for name in ops and says whether its work is to be
// done; the caller holds b.mu.
func (b *slowBackend) arrive(ops map[string]*opCounts, name string, work bool) *opCounts {
	c := ops[name]
	if c == nil {
		c = &opCounts{}
		ops[name] = c
	}
	c.calls++
	if work {
		c.started++
	}
	c.atWork++
	c.maxAtWork = max(c.maxAtWork, c.atWork)
	b.busy++
	b.peak = max(b.peak, b.busy)
	return c
}

func (b *slowBackend) leave(c *opCounts) {
	b.mu.Lock()
	c.atWork--
	b.busy--
	b.mu.Unlock()
}

// workContext bounds the mock's own call, which does not wait for the
// caller: the work goes on after the caller gave up.
func workContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

func (b *slowBackend) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	b.mu.Lock()
	made := b.volumes[name]
	c := b.arrive(b.creates, name, made == nil)
	b.mu.Unlock()
	defer b.leave(c)
	if made != nil {
		return &csi.CreateVolumeResponse{Volume: made}, nil
	}
	<-b.after(b.delay("create/" + name))
	ctx, cancel := workContext()
	defer cancel()
	resp, err := b.ctrl.CreateVolume(ctx, req)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.volumes[name] == nil {
		b.volumes[name] = resp.GetVolume()
		b.names[resp.GetVolume().GetVolumeId()] = name
	}
	b.mu.Unlock()
	return resp, nil
}

func (b *slowBackend) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	b.mu.Lock()
	name, held := b.names[id]
	if !held {
		name = id
	}
	c := b.arrive(b.deletes, name, held)
	trace := b.trace
	b.mu.Unlock()
	defer b.leave(c)
	if !held {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if trace != nil {
		trace.mark(trace.deleteArrived, name, time.Now())
		defer func() { trace.mark(trace.deleteFinished, name, time.Now()) }()
	}
	<-b.after(b.delay("delete/" + name))
	ctx, cancel := workContext()
	defer cancel()
	if _, err := b.ctrl.DeleteVolume(ctx, req); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.names[id] == name {
		delete(b.names, id)
		delete(b.volumes, name)
	}
	b.mu.Unlock()
	return &csi.DeleteVolumeResponse{}, nil
}

// delay is the latency of the operation key (its kind and volume name):
// latency, spread by jitter over +-jitter x latency by the key's hash.
func (b *slowBackend) delay(key string) time.Duration {
	if b.jitter == 0 {
		return b.latency
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	u := float64(h.Sum64()%2001)/1000 - 1 // -1 to 1
	return time.Duration(float64(b.latency) * (1 + b.jitter*u))
}

// backendFigures sums a backend's counts over its volumes.
type backendFigures struct {
	volumes int // volumes that got a call
	// calls, started: totals; maxCalls, maxStarted, maxAtWork: the most
	// for one volume; multiStarted: volumes with more than one operation
	// started; multiAtWork: volumes that had two calls at work at once.
	calls, maxCalls, started, maxStarted, multiStarted, maxAtWork, multiAtWork int
}

func (f backendFigures) perVolume(v int) float64 {
	if f.volumes == 0 {
		return 0
	}
	return float64(v) / float64(f.volumes)
}

func sumOps(ops map[string]*opCounts) backendFigures {
	var f backendFigures
	for _, c := range ops {
		f.volumes++
		f.calls += c.calls
		f.started += c.started
		f.maxCalls, f.maxStarted, f.maxAtWork = max(f.maxCalls, c.calls), max(f.maxStarted, c.started), max(f.maxAtWork, c.maxAtWork)
		if c.started > 1 {
			f.multiStarted++
		}
		if c.maxAtWork > 1 {
			f.multiAtWork++
		}
	}
	return f
}

// figures returns the counts of CreateVolume and DeleteVolume calls, the
// volumes the backend holds and the calls at work now, and the most calls
// at work at once.
func (b *slowBackend) figures() (creates, deletes backendFigures, held, busy, peak int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return sumOps(b.creates), sumOps(b.deletes), len(b.volumes), b.busy, b.peak
}

func (b *slowBackend) GetPluginInfo(ctx context.Context, r *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return b.id.GetPluginInfo(ctx, r)
}

func (b *slowBackend) GetPluginCapabilities(ctx context.Context, r *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return b.id.GetPluginCapabilities(ctx, r)
}

func (b *slowBackend) Probe(ctx context.Context, r *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return b.id.Probe(ctx, r)
}

func (b *slowBackend) ControllerGetCapabilities(ctx context.Context, r *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return b.ctrl.ControllerGetCapabilities(ctx, r)
}

func (b *slowBackend) ListVolumes(ctx context.Context, r *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	return b.ctrl.ListVolumes(ctx, r)
}

func (b *slowBackend) GetCapacity(ctx context.Context, r *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	return b.ctrl.GetCapacity(ctx, r)
}

// fakeController is the mock driver for TestSlowBackend: idempotent by
// name, as the mock is.
type fakeController struct {
	csi.ControllerClient
	mu   sync.Mutex
	made map[string]bool
}

func (f *fakeController) CreateVolume(_ context.Context, r *csi.CreateVolumeRequest, _ ...grpc.CallOption) (*csi.CreateVolumeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.made[r.GetName()] = true
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "id-" + r.GetName()}}, nil
}

func (f *fakeController) DeleteVolume(_ context.Context, r *csi.DeleteVolumeRequest, _ ...grpc.CallOption) (*csi.DeleteVolumeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.made, r.GetVolumeId()[len("id-"):])
	return &csi.DeleteVolumeResponse{}, nil
}

// TestSlowBackend: the bench's backend goes on after its caller gave up,
// starts a second making for a call that comes during the first, finds a
// made volume at once, and counts all of it. Its latency is held by the
// test (no clock).
func TestSlowBackend(t *testing.T) {
	fake := &fakeController{made: map[string]bool{}}
	b := newSlowBackend(nil, fake, time.Hour)
	works := make(chan chan time.Time, 4) // each operation's latency, released by the test
	b.after = func(time.Duration) <-chan time.Time {
		ch := make(chan time.Time, 1)
		works <- ch
		return ch
	}
	gone, cancel := context.WithCancel(t.Context())
	cancel() // the caller gave up before the backend answered
	req := &csi.CreateVolumeRequest{Name: "pvc-1"}
	done := make(chan error, 2)
	create := func() {
		_, err := b.CreateVolume(gone, req)
		done <- err
	}
	go create()
	first := <-works
	go create() // a retry while the first is at work
	second := <-works
	if c, _, _, busy, _ := b.figures(); c.started != 2 || c.maxAtWork != 2 || busy != 2 {
		t.Fatalf("two calls at work: creates %+v, busy %d", c, busy)
	}
	first <- time.Time{}
	second <- time.Time{}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// Made: a third call finds it at once, with no latency.
	resp, err := b.CreateVolume(gone, req)
	if err != nil || resp.GetVolume().GetVolumeId() != "id-pvc-1" {
		t.Fatalf("third call: %v, %v", resp, err)
	}
	c, _, held, busy, peak := b.figures()
	if c != (backendFigures{volumes: 1, calls: 3, maxCalls: 3, started: 2, maxStarted: 2, multiStarted: 1, maxAtWork: 2, multiAtWork: 1}) || held != 1 || busy != 0 || peak != 2 {
		t.Fatalf("creates %+v, held %d, busy %d, peak %d", c, held, busy, peak)
	}

	go func() {
		_, err := b.DeleteVolume(gone, &csi.DeleteVolumeRequest{VolumeId: "id-pvc-1"})
		done <- err
	}()
	(<-works) <- time.Time{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Gone: a second DeleteVolume answers at once.
	if _, err := b.DeleteVolume(gone, &csi.DeleteVolumeRequest{VolumeId: "id-pvc-1"}); err != nil {
		t.Fatal(err)
	}
	_, d, held, _, _ := b.figures()
	if d.calls != 2 || d.started != 1 || d.maxAtWork != 1 || held != 0 || fake.made["pvc-1"] {
		t.Fatalf("deletes %+v, held %d, mock holds it: %v", d, held, fake.made["pvc-1"])
	}
}
