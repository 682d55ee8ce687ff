package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tether-csi/tether/test/cluster"
)

const refusingDriverName = "refusing.csi.tether.dev"

// refusingDriver is a CSI driver with MODIFY_VOLUME that refuses, with
// InvalidArgument, every CreateVolume whose mutable parameters ask for
// tier "bad" or whose class has the parameter answer=invalid, and answers
// Internal to a class with answer=internal; it makes every other volume. It counts the calls by
// volume name, with when each came.
type refusingDriver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	socket string
	mu     sync.Mutex
	calls  map[string][]time.Time
}

func startRefusingDriver(t *testing.T) *refusingDriver {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi") // socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &refusingDriver{socket: filepath.Join(dir, "csi.sock"), calls: map[string][]time.Time{}}
	lis, err := net.Listen("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return d
}

// created is the number of CreateVolume calls for the volume name, and
// when the last came.
func (d *refusingDriver) created(name string) (int, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	calls := d.calls[name]
	if len(calls) == 0 {
		return 0, time.Time{}
	}
	return len(calls), calls[len(calls)-1]
}

func (d *refusingDriver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: refusingDriverName, VendorVersion: "0.0.1"}, nil
}

func (d *refusingDriver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{Type: &csi.PluginCapability_Service_{
		Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}}}}, nil
}

func (d *refusingDriver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (d *refusingDriver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	rpc := func(t csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
		return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}}
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{
		rpc(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME), rpc(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME)}}, nil
}

func (d *refusingDriver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d.mu.Lock()
	d.calls[req.GetName()] = append(d.calls[req.GetName()], time.Now())
	d.mu.Unlock()
	if req.GetMutableParameters()["tier"] == "bad" {
		return nil, status.Error(codes.InvalidArgument, `mutable parameter tier: "bad" is not a tier`)
	}
	if req.GetParameters()["answer"] == "invalid" {
		return nil, status.Error(codes.InvalidArgument, `parameter answer: "invalid" is not taken`)
	}
	if req.GetParameters()["answer"] == "internal" {
		return nil, status.Error(codes.Internal, "the backend failed")
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "id-" + req.GetName(), CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}}, nil
}

func (d *refusingDriver) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

var infeasibleCount = regexp.MustCompile(`(?m)^tether_provisioner_infeasible_total (\d+)`)

// scrapeInfeasible is the provisioner's tether_provisioner_infeasible_total,
// -1 while the endpoint does not answer.
func scrapeInfeasible(addr string) int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := infeasibleCount.FindSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestInfeasibleWaitsForAnEdit: a claim whose CreateVolume the driver
// refuses with InvalidArgument (its VolumeAttributesClass or StorageClass
// asks for what the driver does not take) gets a ProvisioningInfeasible Warning and is
// counted in tether_provisioner_infeasible_total; it is not retried at the
// normal backoff (a claim refused with Internal beside it is, several
// times in the same window), only after --retry-interval-max; an edit of
// the claim (an annotation: the API server keeps a pending claim's spec)
// retries it at once, and its StorageClass made again with other
// parameters retries it at once too, and it binds.
func TestInfeasibleWaitsForAnEdit(t *testing.T) {
	const window = 4 * time.Second
	c := cluster.Start(t, cluster.Options{})
	cs := c.Client
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	d := startRefusingDriver(t)
	addr := cluster.FreeAddr(t)
	// Backoff from 100ms: 5 or more calls in the window for a claim
	// retried normally. The wait for an edit is 60s.
	startProvisioner(t, c, "refusing", d.socket, "--retry-interval-start=100ms", "--retry-interval-max=60s", "--http-endpoint="+addr)
	startBinder(t, c)
	createCSIClass(t, c, "refusing", refusingDriverName, "Delete", storagev1.VolumeBindingImmediate)
	createParamClass(t, cs, "refusing-internal", refusingDriverName, map[string]string{"answer": "internal"})
	createVAC(t, c, "tier-bad", refusingDriverName, map[string]string{"tier": "bad"})
	createVAC(t, c, "tier-good", refusingDriverName, map[string]string{"tier": "good"})
	createParamClass(t, cs, "refusing-remade", refusingDriverName, map[string]string{"answer": "invalid"})

	edited := mustCreate(t, pvcs.Create, vacClaim("infeasible-edited", "refusing", "tier-bad"))
	remade := mustCreate(t, pvcs.Create, claim("infeasible-remade", "refusing-remade", "1Gi"))
	internal := mustCreate(t, pvcs.Create, claim("internal", "refusing-internal", "1Gi"))
	volume := func(pvc *corev1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

	for name, msg := range map[string]string{edited.Name: `"bad" is not a tier`, remade.Name: `"invalid" is not taken`} {
		waitEvent(t, cs, "default", name, "ProvisioningInfeasible", "InvalidArgument", msg,
			"waits for an edit of the claim, its StorageClass or its VolumeAttributesClass", "tried again without one in 1m0s")
	}
	eventually(t, "tether_provisioner_infeasible_total counts both claims", func(context.Context) (bool, error) {
		return scrapeInfeasible(addr) >= 2, nil
	})

	// The window: the refused claims are not called again; the one
	// answered Internal is, at the backoff.
	internalBefore, _ := d.created(volume(internal))
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, pvc := range []*corev1.PersistentVolumeClaim{edited, remade} {
			if n, _ := d.created(volume(pvc)); n != 1 {
				t.Fatalf("%s: %d CreateVolume calls, want 1 until an edit", pvc.Name, n)
			}
		}
	}
	internalAfter, _ := d.created(volume(internal))
	t.Logf("in %s: 0 more calls for each refused claim, %d for the claim answered Internal", window, internalAfter-internalBefore)
	if internalAfter-internalBefore < 3 {
		t.Errorf("the claim answered Internal was called %d times in %s, want 3 or more (the normal backoff)", internalAfter-internalBefore, window)
	}
	if got := scrapeInfeasible(addr); got != 2 {
		t.Errorf("tether_provisioner_infeasible_total = %d, want 2", got)
	}

	// The API server keeps a pending claim's spec as it is (its
	// VolumeAttributesClass and size included); an annotation is what a
	// user can change (a class's secret templates read annotations): the
	// claim is tried again at once, refused again, and waits again.
	fix := time.Now()
	cur := getClaim(t, cs, edited.Name)
	cur.Spec.VolumeAttributesClassName = ptr.To("tier-good")
	if _, err := pvcs.Update(t.Context(), cur, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a pending claim's VolumeAttributesClass changed: %v", err)
	}
	cur = getClaim(t, cs, edited.Name)
	metav1.SetMetaDataAnnotation(&cur.ObjectMeta, "example.com/retry", "please")
	if _, err := pvcs.Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a CreateVolume after the claim's edit", func(context.Context) (bool, error) {
		n, _ := d.created(volume(edited))
		return n == 2, nil
	})
	if _, last := d.created(volume(edited)); last.Sub(fix) > 5*time.Second {
		t.Errorf("%s: called again %s after the edit, want at once", edited.Name, last.Sub(fix).Round(time.Millisecond))
	}
	eventually(t, "the refusal counted again", func(context.Context) (bool, error) { return scrapeInfeasible(addr) == 3, nil })

	// The API server deletes no VolumeAttributesClass a claim names; a
	// StorageClass is made again with other parameters.
	fix = time.Now()
	if err := cs.StorageV1().StorageClasses().Delete(t.Context(), "refusing-remade", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createParamClass(t, cs, "refusing-remade", refusingDriverName, nil)
	waitClaimBound(t, cs, remade.Name)
	n, last := d.created(volume(remade))
	if n < 2 || last.Sub(fix) > 5*time.Second {
		t.Errorf("%s: %d calls, the last %s after the class was made again; want it at once", remade.Name, n, last.Sub(fix).Round(time.Millisecond))
	}
	if n, _ := d.created(volume(edited)); n != 2 {
		t.Errorf("%s: %d CreateVolume calls, want 2 (no more until the next edit or a minute)", edited.Name, n)
	}
}
