package driver

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestCapacityAccounting(t *testing.T) {
	td := newTestDriver(t, 5*gi)
	for i := range 5 {
		td.mustCreate(fmt.Sprintf("v%d", i), gi)
	}
	if got := td.capacity(nil); got != 0 {
		t.Fatalf("capacity when full = %d, want 0", got)
	}
	_, err := td.create("v5", gi)
	wantCode(t, err, codes.ResourceExhausted)
	_, err = td.create("tiny", 1)
	wantCode(t, err, codes.ResourceExhausted)

	td.mustDelete("v2")
	if got := td.capacity(nil); got != gi {
		t.Fatalf("capacity after a delete = %d, want %d", got, gi)
	}
	_, err = td.create("big", 2*gi)
	wantCode(t, err, codes.ResourceExhausted)
	td.mustCreate("v5", gi)
	if got := td.capacity(nil); got != 0 {
		t.Fatalf("capacity = %d, want 0", got)
	}
	// A failed create leaves nothing behind.
	if _, err := os.Stat(filepath.Join(td.root, "volumes", "big.json")); !os.IsNotExist(err) {
		t.Fatalf("refused volume has metadata: %v", err)
	}
}

func TestCapacityRange(t *testing.T) {
	td := newTestDriver(t, 100*gi)
	for _, tc := range []struct {
		name            string
		required, limit int64
		want            int64
		code            codes.Code
	}{
		{"no-range", 0, 0, DefaultVolumeSize, codes.OK},
		{"required", 3 * gi, 0, 3 * gi, codes.OK},
		{"required-equals-limit", 2 * gi, 2 * gi, 2 * gi, codes.OK},
		{"limit-below-default", 0, gi / 2, gi / 2, codes.OK},
		{"limit-above-default", 0, 5 * gi, DefaultVolumeSize, codes.OK},
		{"required-above-limit", 2 * gi, gi, 0, codes.InvalidArgument},
		{"negative", -1, 0, 0, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := td.ctrl.CreateVolume(context.Background(), createReq(tc.name, tc.required, tc.limit))
			wantCode(t, err, tc.code)
			if got := resp.GetVolume().GetCapacityBytes(); got != tc.want {
				t.Fatalf("capacity %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCreateIdempotent(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	v1 := td.mustCreate("pvc-1", 2*gi)
	v2 := td.mustCreate("pvc-1", 2*gi)
	if v1.GetVolumeId() != v2.GetVolumeId() || v2.GetCapacityBytes() != 2*gi {
		t.Fatalf("second create gave %v, first %v", v2, v1)
	}
	// A request the existing volume satisfies returns it too.
	resp, err := td.ctrl.CreateVolume(context.Background(), createReq("pvc-1", gi, 3*gi))
	if err != nil || resp.GetVolume().GetVolumeId() != v1.GetVolumeId() {
		t.Fatalf("compatible range: %v, %v", resp, err)
	}
	if _, err := td.ctrl.CreateVolume(context.Background(), createReq("pvc-1", 0, 0)); err != nil {
		t.Fatalf("no range: %v", err)
	}
	// Incompatible: too small, or above the limit.
	_, err = td.create("pvc-1", 3*gi)
	wantCode(t, err, codes.AlreadyExists)
	_, err = td.ctrl.CreateVolume(context.Background(), createReq("pvc-1", 0, gi))
	wantCode(t, err, codes.AlreadyExists)

	if got := td.list(0); len(got) != 1 {
		t.Fatalf("volumes %v, want one", got)
	}
	if got := td.capacity(nil); got != 8*gi {
		t.Fatalf("capacity %d, want %d", got, 8*gi)
	}
}

func TestCreateRefusals(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	other := &csi.Topology{Segments: map[string]string{TopologyKey(DefaultName): "node-b"}}
	block := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	for _, tc := range []struct {
		name   string
		change func(*csi.CreateVolumeRequest)
		code   codes.Code
	}{
		{"no name", func(r *csi.CreateVolumeRequest) { r.Name = "" }, codes.InvalidArgument},
		{"no capabilities", func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = nil }, codes.InvalidArgument},
		{"block", func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = []*csi.VolumeCapability{block} }, codes.InvalidArgument},
		{"multi-node", func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = append(r.VolumeCapabilities, mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY))
		}, codes.InvalidArgument},
		{"single-writer without the capability", func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)}
		}, codes.InvalidArgument},
		{"clone", func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "x"}}}
		}, codes.InvalidArgument},
		{"other node", func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{other}, Preferred: []*csi.Topology{other}}
		}, codes.ResourceExhausted},
		{"other node and this one", func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{other, td.d.topology()}}
		}, codes.OK},
		{"only preferred elsewhere", func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Preferred: []*csi.Topology{other}}
		}, codes.OK},
		{"reader-only mode", func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY)}
		}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := createReq("v-"+strings.ReplaceAll(tc.name, " ", "-"), gi, 0)
			tc.change(req)
			resp, err := td.ctrl.CreateVolume(context.Background(), req)
			wantCode(t, err, tc.code)
			if err == nil {
				topo := resp.GetVolume().GetAccessibleTopology()
				if len(topo) != 1 || topo[0].GetSegments()["topology.local.csi.tether.dev/node"] != "node-a" {
					t.Fatalf("accessible topology %v", topo)
				}
				td.mustDelete(resp.GetVolume().GetVolumeId())
			}
		})
	}
}

func TestVolumeIDs(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	for _, name := range []string{"../escape", "a/b", "name with spaces", ".hidden", string(make([]byte, 200))} {
		v := td.mustCreate(name, 1)
		id := v.GetVolumeId()
		if !validID(id) || id != volumeIDFor(name) || id[:2] != "x-" {
			t.Fatalf("name %q got ID %q", name, id)
		}
		if again := td.mustCreate(name, 1); again.GetVolumeId() != id {
			t.Fatalf("name %q: second ID %q, first %q", name, again.GetVolumeId(), id)
		}
	}
	// A hashed ID that another name took is refused, not shared.
	squatter := volumeIDFor("a/b")
	_, err := td.create(squatter, 1)
	wantCode(t, err, codes.AlreadyExists)
	// IDs that are not ours are not looked up.
	_, err = td.node.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: "../volumes", TargetPath: t.TempDir(), VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
	})
	wantCode(t, err, codes.NotFound)
	if _, err := td.ctrl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: "../volumes"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(td.root, "volumes")); err != nil {
		t.Fatalf("root damaged: %v", err)
	}
}

func TestConcurrentCreatesOfOneName(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	const n = 50
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			v, err := td.create("pvc-same", 3*gi)
			ids[i], errs[i] = v.GetVolumeId(), err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != "pvc-same" {
			t.Fatalf("create %d: %q, %v", i, ids[i], errs[i])
		}
	}
	if got := td.list(0); len(got) != 1 {
		t.Fatalf("volumes %v, want one", got)
	}
	if got := td.capacity(nil); got != 7*gi {
		t.Fatalf("capacity %d, want %d", got, 7*gi)
	}
	if td.d.locks.size() != 0 {
		t.Fatalf("%d key locks left", td.d.locks.size())
	}
}

func TestConcurrentCreatesShareCapacity(t *testing.T) {
	td := newTestDriver(t, 7*gi)
	const n = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	made := 0
	for i := range n {
		wg.Go(func() {
			_, err := td.create(fmt.Sprintf("pvc-%d", i), gi)
			if err == nil {
				mu.Lock()
				made++
				mu.Unlock()
			} else if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("create %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if made != 7 || len(td.list(3)) != 7 || td.capacity(nil) != 0 {
		t.Fatalf("made %d volumes, listed %d, capacity %d; want 7, 7, 0", made, len(td.list(3)), td.capacity(nil))
	}
}

func TestListVolumesPaging(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		td.mustCreate(n, gi)
	}
	resp, err := td.ctrl.ListVolumes(context.Background(), &csi.ListVolumesRequest{MaxEntries: 2})
	if err != nil || len(resp.GetEntries()) != 2 || resp.GetNextToken() == "" {
		t.Fatalf("first page %v, %v", resp, err)
	}
	// The page's last volume goes, and one appears before the cursor:
	// the next pages neither repeat nor skip the others.
	td.mustDelete("b")
	td.mustCreate("a0", gi)
	var rest []string
	for token := resp.GetNextToken(); token != ""; {
		page, err := td.ctrl.ListVolumes(context.Background(), &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.GetEntries() {
			rest = append(rest, e.GetVolume().GetVolumeId())
		}
		token = page.GetNextToken()
	}
	if fmt.Sprint(rest) != "[c d e]" {
		t.Fatalf("later pages %v, want [c d e]", rest)
	}
	if got := td.list(0); len(got) != 5 {
		t.Fatalf("full list %v", got)
	}
	for _, bad := range []string{"invalid-token", "after:../x", "3"} {
		_, err := td.ctrl.ListVolumes(context.Background(), &csi.ListVolumesRequest{StartingToken: bad})
		wantCode(t, err, codes.Aborted)
	}
	_, err = td.ctrl.ListVolumes(context.Background(), &csi.ListVolumesRequest{MaxEntries: -1})
	wantCode(t, err, codes.InvalidArgument)
}

func TestGetCapacityTopologyAndCapabilities(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	td.mustCreate("v", 4*gi)
	key := TopologyKey(DefaultName)
	for _, tc := range []struct {
		name string
		req  *csi.GetCapacityRequest
		want int64
	}{
		{"anywhere", &csi.GetCapacityRequest{}, 6 * gi},
		{"this node", &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: map[string]string{key: "node-a"}}}, 6 * gi},
		{"other node", &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: map[string]string{key: "node-b"}}}, 0},
		{"unknown key", &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: map[string]string{"zone": "z1"}}}, 0},
		{"mount", &csi.GetCapacityRequest{VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}}, 6 * gi},
		{"multi-node", &csi.GetCapacityRequest{VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}}, 0},
	} {
		resp, err := td.ctrl.GetCapacity(context.Background(), tc.req)
		if err != nil || resp.GetAvailableCapacity() != tc.want || resp.GetMaximumVolumeSize().GetValue() != tc.want {
			t.Errorf("%s: %v, %v; want %d", tc.name, resp, err, tc.want)
		}
	}
}

func TestValidateVolumeCapabilities(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	td.mustCreate("v", gi)
	ok := []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}
	resp, err := td.ctrl.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v", VolumeCapabilities: ok})
	if err != nil || len(resp.GetConfirmed().GetVolumeCapabilities()) != 1 {
		t.Fatalf("supported: %v, %v", resp, err)
	}
	bad := []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}
	resp, err = td.ctrl.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v", VolumeCapabilities: bad})
	if err != nil || resp.GetConfirmed() != nil || resp.GetMessage() == "" {
		t.Fatalf("unsupported: %v, %v", resp, err)
	}
	_, err = td.ctrl.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "nope", VolumeCapabilities: ok})
	wantCode(t, err, codes.NotFound)
	_, err = td.ctrl.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v"})
	wantCode(t, err, codes.InvalidArgument)
}

func TestIdentity(t *testing.T) {
	td := newTestDriver(t, gi)
	info, err := td.id.GetPluginInfo(context.Background(), &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != DefaultName || info.GetVendorVersion() == "" {
		t.Fatalf("plugin info %v, %v", info, err)
	}
	probe, err := td.id.Probe(context.Background(), &csi.ProbeRequest{})
	if err != nil || !probe.GetReady().GetValue() {
		t.Fatalf("probe %v, %v", probe, err)
	}
	ni, err := td.node.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	if err != nil || ni.GetNodeId() != "node-a" || ni.GetAccessibleTopology().GetSegments()[TopologyKey(DefaultName)] != "node-a" {
		t.Fatalf("node info %v, %v", ni, err)
	}
}

// TestOwnerMarkEchoed: tether's ownership mark comes back in the volume
// context of CreateVolume (also a repeated one) and ListVolumes, and after
// a restart; other parameters do not.
func TestOwnerMarkEchoed(t *testing.T) {
	if OwnerParameter != request.OwnerKey {
		t.Fatalf("the driver echoes %q, tether marks with %q", OwnerParameter, request.OwnerKey)
	}
	root := t.TempDir()
	td := openTestDriver(t, root, 10*gi)
	req := createReq("pvc-marked", gi, 0)
	req.Parameters = map[string]string{OwnerParameter: "Delete/cluster-a", "other": "x"}
	want := map[string]string{OwnerParameter: "Delete/cluster-a"}
	for range 2 {
		resp, err := td.ctrl.CreateVolume(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetVolume().GetVolumeContext(); !maps.Equal(got, want) {
			t.Fatalf("CreateVolume context %v, want %v", got, want)
		}
	}
	td.mustCreate("pvc-plain", gi)
	for _, d := range []*testDriver{td, openTestDriver(t, root, 10*gi)} {
		resp, err := d.ctrl.ListVolumes(context.Background(), &csi.ListVolumesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string]string{}
		for _, e := range resp.GetEntries() {
			got[e.GetVolume().GetVolumeId()] = e.GetVolume().GetVolumeContext()
		}
		if len(got) != 2 || !maps.Equal(got["pvc-marked"], want) || len(got["pvc-plain"]) != 0 {
			t.Fatalf("ListVolumes contexts %v", got)
		}
	}
}
