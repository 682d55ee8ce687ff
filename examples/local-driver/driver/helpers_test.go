package driver

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const gi = int64(1) << 30

// testDriver is a driver on a fresh root with the given capacity, and its
// services as the gRPC server calls them (locks included).
type testDriver struct {
	t    *testing.T
	d    *Driver
	root string
	ctrl *controllerServer
	node *nodeServer
	id   *identityServer
}

func newTestDriver(t *testing.T, capacity int64) *testDriver {
	t.Helper()
	return openTestDriver(t, t.TempDir(), capacity)
}

func openTestDriver(t *testing.T, root string, capacity int64) *testDriver {
	t.Helper()
	d, err := New(Config{Name: DefaultName, NodeID: "node-a", Root: root, Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	return &testDriver{t: t, d: d, root: root, ctrl: &controllerServer{d: d}, node: &nodeServer{d: d}, id: &identityServer{d: d}}
}

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func createReq(name string, required, limit int64) *csi.CreateVolumeRequest {
	req := &csi.CreateVolumeRequest{
		Name:               name,
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	}
	if required != 0 || limit != 0 {
		req.CapacityRange = &csi.CapacityRange{RequiredBytes: required, LimitBytes: limit}
	}
	return req
}

func (td *testDriver) create(name string, required int64) (*csi.Volume, error) {
	resp, err := td.ctrl.CreateVolume(context.Background(), createReq(name, required, 0))
	return resp.GetVolume(), err
}

func (td *testDriver) mustCreate(name string, required int64) *csi.Volume {
	td.t.Helper()
	v, err := td.create(name, required)
	if err != nil {
		td.t.Fatalf("CreateVolume %s: %v", name, err)
	}
	return v
}

func (td *testDriver) mustDelete(id string) {
	td.t.Helper()
	if _, err := td.ctrl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		td.t.Fatalf("DeleteVolume %s: %v", id, err)
	}
}

func (td *testDriver) capacity(topo *csi.Topology) int64 {
	td.t.Helper()
	resp, err := td.ctrl.GetCapacity(context.Background(), &csi.GetCapacityRequest{AccessibleTopology: topo})
	if err != nil {
		td.t.Fatal(err)
	}
	return resp.GetAvailableCapacity()
}

// list returns every volume ID and capacity, page by page.
func (td *testDriver) list(pageSize int32) map[string]int64 {
	td.t.Helper()
	out := map[string]int64{}
	token := ""
	for {
		resp, err := td.ctrl.ListVolumes(context.Background(), &csi.ListVolumesRequest{MaxEntries: pageSize, StartingToken: token})
		if err != nil {
			td.t.Fatal(err)
		}
		for _, e := range resp.GetEntries() {
			id := e.GetVolume().GetVolumeId()
			if _, dup := out[id]; dup {
				td.t.Fatalf("volume %s listed twice", id)
			}
			out[id] = e.GetVolume().GetCapacityBytes()
		}
		if token = resp.GetNextToken(); token == "" {
			return out
		}
	}
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got code %s (%v), want %s", got, err, want)
	}
}
