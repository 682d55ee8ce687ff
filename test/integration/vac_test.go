package integration

import (
	"context"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tether-csi/tether/test/cluster"
)

// The csi-test mock driver (v4.2.0, CSI 1.3) knows neither MODIFY_VOLUME
// nor mutable_parameters. capsProxy stands in front of its socket: it
// forwards what the provisioner calls, adds MODIFY_VOLUME to the
// controller capabilities, and keeps every CreateVolume request, so the
// test sees the mutable parameters as they reach the driver's socket.
type capsProxy struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	Socket string
	id     csi.IdentityClient
	ctrl   csi.ControllerClient

	mu      sync.Mutex
	creates []*csi.CreateVolumeRequest
}

func startCapsProxy(t *testing.T, target string) *capsProxy {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	dir, err := os.MkdirTemp("", "csi") // socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &capsProxy{Socket: filepath.Join(dir, "proxy.sock"), id: csi.NewIdentityClient(conn), ctrl: csi.NewControllerClient(conn)}
	lis, err := net.Listen("unix", p.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, p)
	csi.RegisterControllerServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return p
}

func (p *capsProxy) GetPluginInfo(ctx context.Context, r *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return p.id.GetPluginInfo(ctx, r)
}

func (p *capsProxy) GetPluginCapabilities(ctx context.Context, r *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return p.id.GetPluginCapabilities(ctx, r)
}

func (p *capsProxy) Probe(ctx context.Context, r *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return p.id.Probe(ctx, r)
}

// ControllerGetCapabilities is the driver's create/delete and clone
// capabilities, plus MODIFY_VOLUME (nothing more, so that the provisioner
// calls nothing this proxy does not forward).
func (p *capsProxy) ControllerGetCapabilities(ctx context.Context, r *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	resp, err := p.ctrl.ControllerGetCapabilities(ctx, r)
	if err != nil {
		return nil, err
	}
	var kept []*csi.ControllerServiceCapability
	for _, c := range resp.GetCapabilities() {
		if t := c.GetRpc().GetType(); t == csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME {
			kept = append(kept, c)
		}
	}
	kept = append(kept, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
		Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_MODIFY_VOLUME}}})
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: kept}, nil
}

func (p *capsProxy) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	p.mu.Lock()
	p.creates = append(p.creates, r)
	p.mu.Unlock()
	return p.ctrl.CreateVolume(ctx, r)
}

func (p *capsProxy) DeleteVolume(ctx context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return p.ctrl.DeleteVolume(ctx, r)
}

// created is the last CreateVolume request for the volume name, nil for none.
func (p *capsProxy) created(name string) *csi.CreateVolumeRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range slices.Backward(p.creates) {
		if r.GetName() == name {
			return r
		}
	}
	return nil
}

func vacClaim(name, class, vac string) *corev1.PersistentVolumeClaim {
	c := claim(name, class, "1Gi")
	c.Spec.VolumeAttributesClassName = &vac
	return c
}

func createVAC(t *testing.T, c *cluster.Cluster, name, driver string, params map[string]string) {
	t.Helper()
	mustCreate(t, c.Client.StorageV1().VolumeAttributesClasses().Create,
		&storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: driver, Parameters: params})
}

// checkVACBinding waits for the claim to bind and checks what a
// VolumeAttributesClass leaves: mutable_parameters in CreateVolume, the
// class's name on the PV and in the claim's status.
func checkVACBinding(t *testing.T, c *cluster.Cluster, proxy *capsProxy, name, vac string, params map[string]string) {
	t.Helper()
	pvc := waitClaimBound(t, c.Client, name)
	pv := getPV(t, c.Client, pvc.Spec.VolumeName)
	if got := ptr.Deref(pv.Spec.VolumeAttributesClassName, ""); got != vac {
		t.Errorf("%s: PV %s volumeAttributesClassName %q, want %q", name, pv.Name, got, vac)
	}
	if got := ptr.Deref(pvc.Status.CurrentVolumeAttributesClassName, ""); got != vac {
		t.Errorf("%s: status.currentVolumeAttributesClassName %q, want %q", name, got, vac)
	}
	req := proxy.created(pv.Name)
	if req == nil {
		t.Fatalf("%s: no CreateVolume for %s", name, pv.Name)
	}
	if !maps.Equal(req.GetMutableParameters(), params) {
		t.Errorf("%s: mutable_parameters %v, want %v", name, req.GetMutableParameters(), params)
	}
	if _, ok := req.GetParameters()["iops"]; ok {
		t.Errorf("%s: the attributes class's parameters leaked into parameters: %v", name, req.GetParameters())
	}
}

// TestVolumeAttributesClass: our binder and our provisioner on a driver
// with MODIFY_VOLUME. A claim with a VolumeAttributesClass binds, with the
// class on its PV and in its status; a class that does not exist, or is
// another driver's, gives ProvisioningFailed and no CreateVolume; a driver
// without MODIFY_VOLUME refuses the claim with ProvisioningFailed.
func TestVolumeAttributesClass(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	mock := startMock(t, c, mockName, "")
	proxy := startCapsProxy(t, mock.Socket)
	startProvisioner(t, c, "mock", proxy.Socket)
	const plainName = "plain.csi.tether.dev"
	plain := startMock(t, c, plainName, "")
	startProvisioner(t, c, "plain", plain.Socket)
	startBinder(t, c)

	createCSIClass(t, c, "vac", mockName, "Delete", storagev1.VolumeBindingImmediate)
	createCSIClass(t, c, "plain", plainName, "Delete", storagev1.VolumeBindingImmediate)
	params := map[string]string{"iops": "3000", "throughput": "125"}
	createVAC(t, c, "gold", mockName, params)
	createVAC(t, c, "foreign", "other.csi.tether.dev", map[string]string{"iops": "1"})
	createVAC(t, c, "plain-gold", plainName, map[string]string{"iops": "1"})

	mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, vacClaim("vac-gold", "vac", "gold"))
	mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, vacClaim("vac-missing", "vac", "platinum"))
	mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, vacClaim("vac-foreign", "vac", "foreign"))
	mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, vacClaim("vac-plain", "plain", "plain-gold"))

	checkVACBinding(t, c, proxy, "vac-gold", "gold", params)
	waitEvent(t, c.Client, "default", "vac-missing", "ProvisioningFailed", "VolumeAttributesClass platinum", "not found")
	waitEvent(t, c.Client, "default", "vac-foreign", "ProvisioningFailed", `is for the driver "other.csi.tether.dev"`)
	waitEvent(t, c.Client, "default", "vac-plain", "ProvisioningFailed", "MODIFY_VOLUME")
	for _, name := range []string{"vac-missing", "vac-foreign"} {
		pvc := getClaim(t, c.Client, name)
		if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
			t.Errorf("%s: phase %s, volume %q; want Pending without volume", name, pvc.Status.Phase, pvc.Spec.VolumeName)
		}
		if req := proxy.created("pvc-" + string(pvc.UID)); req != nil {
			t.Errorf("%s: CreateVolume was called: %v", name, req)
		}
	}
	if vols := plain.Volumes(t); len(vols) != 0 {
		t.Errorf("the driver without MODIFY_VOLUME made volumes: %v", vols)
	}

	// The missing class appears: the retry provisions the claim.
	createVAC(t, c, "platinum", mockName, map[string]string{"iops": "9000"})
	checkVACBinding(t, c, proxy, "vac-missing", "platinum", map[string]string{"iops": "9000"})
}

// TestVolumeAttributesClassKCMBinder: the same claim with KCM's binder and
// our provisioner; KCM writes the claim's current attributes class.
func TestVolumeAttributesClassKCMBinder(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: append([]string{"persistentvolume-binder-controller"}, protectionControllers...)})
	mock := startMock(t, c, mockName, "")
	proxy := startCapsProxy(t, mock.Socket)
	startProvisioner(t, c, "mock", proxy.Socket)

	createCSIClass(t, c, "vac", mockName, "Delete", storagev1.VolumeBindingImmediate)
	params := map[string]string{"iops": "3000"}
	createVAC(t, c, "gold", mockName, params)
	mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, vacClaim("vac-kcm", "vac", "gold"))
	checkVACBinding(t, c, proxy, "vac-kcm", "gold", params)
}
