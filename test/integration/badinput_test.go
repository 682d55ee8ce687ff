package integration

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/test/cluster"
)

// The drivers of the tour: the csi-test mock as is, the mock with a
// CreateVolume that outlasts the provisioner's timeout, and a fake driver
// written here that answers CreateVolume with garbage.
const (
	tourDriver    = "tour.csi.tether.dev"
	hangDriver    = "hang.csi.tether.dev"
	garbageDriver = "garbage.csi.tether.dev"
)

// hangHooks makes every CreateVolume of the mock busy-wait 5 s before it
// starts, past the provisioner's --timeout=500ms and its first retry (at
// 2 s, which waits for the same call: a call outlives its caller's
// timeout, pkg/csi's outlive.go).
const hangHooks = `createVolumeStart: |
  var start = new Date().getTime();
  while (new Date().getTime() - start < 5000) {}
  OK;
`

// TestBadInputTour feeds tether bad input on one control plane, with one
// binder and a provisioner per driver: malformed claims, bad classes, PVs
// with broken claimRefs, and drivers that hang, vanish or answer garbage.
// Each case checks the event (reason and message) or the API server's
// refusal; at the end every component is still running and normal claims
// still bind. Each case has classes of its own.
func TestBadInputTour(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	cs := c.Client
	pvcs, pvs := cs.CoreV1().PersistentVolumeClaims("default"), cs.CoreV1().PersistentVolumes()
	tour := startMock(t, c, tourDriver, "")
	hang := startMock(t, c, hangDriver, hangHooks)
	garbage := startGarbageDriver(t)
	procs := map[string]*cluster.Process{
		"binder":           startBinder(t, c),
		"provisioner-tour": startProvisioner(t, c, "tour", tour.Socket),
		// Its retries wait for the call at work (two calls never share
		// the mock's JavaScript VM).
		"provisioner-hang": startProvisioner(t, c, "hang", hang.Socket, "--timeout=500ms", "--retry-interval-start=1500ms", "--retry-interval-max=3s"),
		// Fast retries: past the library's default limit of 15 in a second or two.
		"provisioner-garbage": startProvisioner(t, c, "garbage", garbage.socket, "--retry-interval-start=10ms", "--retry-interval-max=200ms"),
	}
	var hugeCreated time.Time

	t.Run("malformed claims", func(t *testing.T) {
		createClass(t, cs, "tour-static", noProvisioner, storagev1.VolumeBindingImmediate, false)
		pv := hostPathPV("tour-static-pv", "tour-static", "1Gi")
		pv.Labels = map[string]string{"tier": "silver"}
		mustCreate(t, pvs.Create, pv)

		// The API server refuses these selectors, so the binder never sees them.
		for _, bad := range []struct {
			name, msg string
			req       metav1.LabelSelectorRequirement
		}{
			{"In without values", "must be specified when `operator` is 'In' or 'NotIn'",
				metav1.LabelSelectorRequirement{Key: "tier", Operator: metav1.LabelSelectorOpIn}},
			{"Exists with values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
				metav1.LabelSelectorRequirement{Key: "tier", Operator: metav1.LabelSelectorOpExists, Values: []string{"gold"}}},
			{"an unknown operator", "not a valid selector operator",
				metav1.LabelSelectorRequirement{Key: "tier", Operator: "Near", Values: []string{"gold"}}},
			{"an invalid label key", "name part must consist of alphanumeric characters",
				metav1.LabelSelectorRequirement{Key: "no such key!", Operator: metav1.LabelSelectorOpIn, Values: []string{"gold"}}},
		} {
			pvc := claim("sel-refused", "tour-static", "1Gi")
			pvc.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{bad.req}}
			_, err := pvcs.Create(t.Context(), pvc, metav1.CreateOptions{})
			expectInvalid(t, "a selector with "+bad.name, err, "spec.selector.matchExpressions[0]", bad.msg)
		}
		// One it accepts that fits no volume: the only volume, its size and
		// class right, is left alone.
		sel := claim("sel", "tour-static", "1Gi")
		sel.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"silver"}}}}
		mustCreate(t, pvcs.Create, sel)
		waitEvent(t, cs, "default", "sel", "FailedBinding", `no persistent volumes available for this claim, and storage class "tour-static" has no provisioner`)

		_, err := pvcs.Create(t.Context(), claim("zero", "tour-static", "0"), metav1.CreateOptions{})
		expectInvalid(t, "a zero request", err, "spec.resources[storage]", "must be greater than zero")

		mustCreate(t, pvcs.Create, claim("huge", "tour-static", "8Ei"))
		waitEvent(t, cs, "default", "huge", "FailedBinding", `no persistent volumes available for this claim, and storage class "tour-static" has no provisioner`)

		createCSIClass(t, c, "tour-huge", tourDriver, "Delete", storagev1.VolumeBindingImmediate)
		hugeCreated = time.Now()
		huge := mustCreate(t, pvcs.Create, claim("huge-csi", "tour-huge", "8Ei"))
		waitEvent(t, cs, "default", "huge-csi", "ProvisioningFailed", "OutOfRange", "exceeds maximum allowed")
		expectNoVolume(t, cs, huge)
		// A final code holds for that call only, so the record stays until
		// the claim goes (see "no retry storm" below).
		expectInFlight(t, cs, "huge-csi")

		// Past what a CSI request can carry: refused before any CreateVolume
		// (it used to go out as "no minimum", and the default size came back).
		tera := mustCreate(t, pvcs.Create, claim("tera", "tour-huge", "1e30"))
		waitEvent(t, cs, "default", "tera", "ProvisioningFailed", "requests 1e30, more than the 9223372036854775807 bytes")
		expectNoVolume(t, cs, tera)
		expectNoRequest(t, tour, tera)

		mustCreate(t, pvcs.Create, claim("ghost", "ghost", "1Gi"))
		waitEvent(t, cs, "default", "ghost", "ProvisioningFailed", `storageclass.storage.k8s.io "ghost" not found`)

		for _, name := range []string{"sel", "huge", "huge-csi", "tera", "ghost"} {
			expectPending(t, cs, name)
		}
		waitVolumePhase(t, cs, "tour-static-pv", corev1.VolumeAvailable)
	})

	t.Run("bad classes", func(t *testing.T) {
		createParamClass(t, cs, "tour-bogus", tourDriver, map[string]string{"csi.storage.k8s.io/bogus": "x"})
		bogus := mustCreate(t, pvcs.Create, claim("bogus", "tour-bogus", "1Gi"))
		waitEvent(t, cs, "default", "bogus", "ProvisioningFailed", `unknown parameter "csi.storage.k8s.io/bogus"`)

		createParamClass(t, cs, "tour-nosecret", tourDriver, map[string]string{
			"csi.storage.k8s.io/provisioner-secret-name": "absent", "csi.storage.k8s.io/provisioner-secret-namespace": "default"})
		nosecret := mustCreate(t, pvcs.Create, claim("nosecret", "tour-nosecret", "1Gi"))
		waitEvent(t, cs, "default", "nosecret", "ProvisioningFailed", "secret default/absent", `secrets "absent" not found`)

		for _, pvc := range []*corev1.PersistentVolumeClaim{bogus, nosecret} {
			expectNoVolume(t, cs, pvc)
			if got := getClaim(t, cs, pvc.Name); slices.Contains(got.Finalizers, provisioner.FinalizerInFlight) {
				t.Errorf("claim %s has an in-flight record, though no CreateVolume may be made", pvc.Name)
			}
			expectNoRequest(t, tour, pvc)
		}
	})

	t.Run("PVs with broken claimRefs", func(t *testing.T) {
		gone := func(name, namespace string, policy corev1.PersistentVolumeReclaimPolicy) *corev1.PersistentVolume {
			pv := hostPathPV(name, "tour-refs", "1Gi")
			pv.Spec.PersistentVolumeReclaimPolicy = policy
			pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: namespace, Name: "never-was", UID: "6b1e2f3a-0000-4000-8000-000000000001"}
			return pv
		}
		// A claim that never existed, in a namespace that exists or not:
		// Released (Retain keeps it so), or Failed when Delete has no deleter.
		mustCreate(t, pvs.Create, gone("ref-gone", "default", corev1.PersistentVolumeReclaimRetain))
		mustCreate(t, pvs.Create, gone("ref-nowhere", "nowhere", corev1.PersistentVolumeReclaimRetain))
		mustCreate(t, pvs.Create, gone("ref-gone-delete", "default", corev1.PersistentVolumeReclaimDelete))
		waitVolumePhase(t, cs, "ref-gone", corev1.VolumeReleased)
		waitVolumePhase(t, cs, "ref-nowhere", corev1.VolumeReleased)
		waitEvent(t, cs, "default", "ref-gone-delete", "VolumeFailedDelete", "no deleter for this volume")
		waitVolumePhase(t, cs, "ref-gone-delete", corev1.VolumeFailed)

		// The API server takes a claimRef without a name, or without a
		// namespace. For the first the binder used to ask it for the claim
		// named "", and retry its error for ever; no claim has that name,
		// so the volume is Released, as the other one is.
		nameless := gone("ref-nameless", "default", corev1.PersistentVolumeReclaimRetain)
		nameless.Spec.ClaimRef.Name = ""
		mustCreate(t, pvs.Create, nameless)
		nsless := gone("ref-nsless", "", corev1.PersistentVolumeReclaimRetain)
		mustCreate(t, pvs.Create, nsless)
		waitVolumePhase(t, cs, "ref-nameless", corev1.VolumeReleased)
		waitVolumePhase(t, cs, "ref-nsless", corev1.VolumeReleased)
	})

	t.Run("driver hangs", func(t *testing.T) {
		createCSIClass(t, c, "tour-hang", hangDriver, "Delete", storagev1.VolumeBindingImmediate)
		pvc := mustCreate(t, pvcs.Create, claim("hang", "tour-hang", "1Gi"))
		waitEvent(t, cs, "default", "hang", "ProvisioningFailed", "DeadlineExceeded")
		// It keeps trying, each time past the timeout, in the background.
		eventually(t, "a second timed-out CreateVolume", func(context.Context) (bool, error) {
			return strings.Count(cluster.Tail(procs["provisioner-hang"].LogPath, 100000), `outcome="in-background"`) >= 2, nil
		})
		expectPending(t, cs, "hang")
		expectNoVolume(t, cs, pvc)
		if got := getClaim(t, cs, "hang"); !slices.Contains(got.Finalizers, provisioner.FinalizerInFlight) {
			t.Errorf("no in-flight record while the driver may still make the volume: %v", got.Finalizers)
		}
		hang.Proc.Kill() // its busy waits cost a CPU
	})

	t.Run("driver answers garbage", func(t *testing.T) {
		createParamClass(t, cs, "tour-noid", garbageDriver, map[string]string{"answer": "no-id"})
		createParamClass(t, cs, "tour-negative", garbageDriver, map[string]string{"answer": "negative"})
		noID := mustCreate(t, pvcs.Create, claim("noid", "tour-noid", "1Gi"))
		negative := mustCreate(t, pvcs.Create, claim("negative", "tour-negative", "1Gi"))
		waitEvent(t, cs, "default", "noid", "ProvisioningFailed", "is unusable", "the driver returned a volume without an ID")
		waitEvent(t, cs, "default", "negative", "ProvisioningFailed", "is unusable", "the driver returned a negative capacity -1")
		// The volume with an ID is deleted again.
		eventually(t, "DeleteVolume of the volume with a negative capacity", func(context.Context) (bool, error) {
			return garbage.deleted("neg-pvc-" + string(negative.UID)), nil
		})
		for _, pvc := range []*corev1.PersistentVolumeClaim{noID, negative} {
			expectPending(t, cs, pvc.Name)
			expectNoVolume(t, cs, pvc)
		}
		// The volume without an ID may exist: the provisioner keeps trying,
		// past the 15 failures after which the library gives up by default.
		eventually(t, "more than 16 attempts", func(context.Context) (bool, error) {
			return garbage.creates("pvc-"+string(noID.UID)) > 16, nil
		})
		if !procs["provisioner-garbage"].Running() {
			t.Error("the provisioner of the garbage driver exited")
		}
	})

	t.Run("driver closes the socket", func(t *testing.T) {
		createCSIClass(t, c, "tour-socket", tourDriver, "Delete", storagev1.VolumeBindingImmediate)
		tour.Proc.Kill()
		mustCreate(t, pvcs.Create, claim("socket", "tour-socket", "1Gi"))
		waitEvent(t, cs, "default", "socket", "ProvisioningFailed", "Unavailable")
		if !procs["provisioner-tour"].Running() {
			t.Fatal("the provisioner exited when its driver went away")
		}
		expectPending(t, cs, "socket")
		if err := tour.Proc.Start(); err != nil {
			t.Fatal(err)
		}
		waitClaimBound(t, cs, "socket")
	})

	t.Run("still healthy", func(t *testing.T) {
		for name, p := range procs {
			if !p.Running() {
				t.Errorf("%s is not running", name)
			}
		}
		mustCreate(t, pvs.Create, hostPathPV("after-pv", "tour-after", "1Gi"))
		mustCreate(t, pvcs.Create, claim("after-static", "tour-after", "1Gi"))
		createCSIClass(t, c, "tour-after-csi", tourDriver, "Delete", storagev1.VolumeBindingImmediate)
		mustCreate(t, pvcs.Create, claim("after-csi", "tour-after-csi", "1Gi"))
		if got := waitClaimBound(t, cs, "after-static").Spec.VolumeName; got != "after-pv" {
			t.Errorf("after-static bound to %s, want after-pv", got)
		}
		waitClaimBound(t, cs, "after-csi")
	})

	t.Run("no retry storm", func(t *testing.T) {
		// huge-csi failed for good at every attempt; retries back off from
		// 200ms, so there can be at most one attempt per 200ms (and one
		// more at once after the binder's first write).
		// The mock logs each call as {"Method":"/csi.v1.Controller/CreateVolume","Request":{"name":...
		request := `/CreateVolume","Request":{"name":"pvc-` + string(getClaim(t, cs, "huge-csi").UID) + `"`
		calls, since := strings.Count(cluster.Tail(tour.Proc.LogPath, 1000000), request), time.Since(hugeCreated)
		if most := 2 + int(since/(200*time.Millisecond)); calls == 0 || calls > most {
			t.Errorf("%d CreateVolume calls for huge-csi in %s, want 1 to %d", calls, since.Round(time.Millisecond), most)
		}
		t.Logf("%d CreateVolume calls for huge-csi in %s", calls, since.Round(time.Millisecond))
		// The clean-up repeats the CreateVolume; its final code proves there
		// is no volume, and the claim goes.
		deleteClaimAndWaitCleanedUp(t, cs, "huge-csi")
	})
}

func createParamClass(t *testing.T, cs kubernetes.Interface, name, driver string, params map[string]string) {
	t.Helper()
	mode := storagev1.VolumeBindingImmediate
	mustCreate(t, cs.StorageV1().StorageClasses().Create, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Provisioner: driver, Parameters: params, VolumeBindingMode: &mode})
}

// expectInvalid checks that the API server refused an object as invalid,
// with a message that has every one of parts.
func expectInvalid(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("the API server accepted %s", what)
	case !apierrors.IsInvalid(err) || !containsAll(err.Error(), parts):
		t.Errorf("%s: got %v, want Invalid mentioning %q", what, err, parts)
	}
}

func expectPending(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if pvc := getClaim(t, cs, name); pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		t.Errorf("claim %s: phase %s, volume %q; want Pending and unbound", name, pvc.Status.Phase, pvc.Spec.VolumeName)
	}
}

// expectNoVolume checks that no PV names the claim.
func expectNoVolume(t *testing.T, cs kubernetes.Interface, pvc *corev1.PersistentVolumeClaim) {
	t.Helper()
	list, err := cs.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range list.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && (ref.UID == pvc.UID || ref.Name == pvc.Name) {
			t.Errorf("PV %s was made for claim %s", pv.Name, pvc.Name)
		}
	}
}

// expectNoRequest checks that the mock driver, which logs every request
// with the volume's name, got none for the claim.
func expectNoRequest(t *testing.T, m *mockDriver, pvc *corev1.PersistentVolumeClaim) {
	t.Helper()
	if strings.Contains(cluster.Tail(m.Proc.LogPath, 1000000), "pvc-"+string(pvc.UID)) {
		t.Errorf("the driver got a request for claim %s", pvc.Name)
	}
}

// expectInFlight checks that a claim whose CreateVolume failed keeps its
// in-flight record: a final code says nothing of an earlier call that timed
// out while the driver went on.
func expectInFlight(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if !slices.Contains(getClaim(t, cs, name).Finalizers, provisioner.FinalizerInFlight) {
		t.Errorf("claim %s lost its in-flight record after a failed CreateVolume", name)
	}
}

// deleteClaimAndWaitCleanedUp deletes a claim and waits until the in-flight
// record has let it go (pvc-protection, where the cluster adds it, may stay:
// no KCM runs here to remove it).
func deleteClaimAndWaitCleanedUp(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	claims := cs.CoreV1().PersistentVolumeClaims("default")
	if err := claims.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the clean-up let "+name+" go", func(ctx context.Context) (bool, error) {
		pvc, err := claims.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && !slices.Contains(pvc.Finalizers, provisioner.FinalizerInFlight), err
	})
}

// fakeDriver is a CSI controller whose CreateVolume answers garbage, chosen
// by the class parameter "answer": "no-id" (a volume without an ID) or
// "negative" (a capacity of -1). DeleteVolume refuses an empty ID, as the
// spec asks, and records the others.
type fakeDriver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	socket string

	mu      sync.Mutex
	calls   map[string]int // CreateVolume calls by name
	deletes []string
}

func startGarbageDriver(t *testing.T) *fakeDriver {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi") // socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &fakeDriver{socket: filepath.Join(dir, "csi.sock"), calls: map[string]int{}}
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

func (d *fakeDriver) creates(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[name]
}

func (d *fakeDriver) deleted(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.deletes, id)
}

func (d *fakeDriver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: garbageDriver, VendorVersion: "0.0.1"}, nil
}

func (d *fakeDriver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{Type: &csi.PluginCapability_Service_{
		Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}}}}, nil
}

func (d *fakeDriver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil // no "ready": ready
}

func (d *fakeDriver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{Type: &csi.ControllerServiceCapability_Rpc{
		Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}}}}}, nil
}

func (d *fakeDriver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d.mu.Lock()
	d.calls[req.GetName()]++
	d.mu.Unlock()
	size := req.GetCapacityRange().GetRequiredBytes()
	switch answer := req.GetParameters()["answer"]; answer {
	case "no-id":
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{CapacityBytes: size}}, nil
	case "negative":
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "neg-" + req.GetName(), CapacityBytes: -1}}, nil
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown answer %q", answer)
	}
}

func (d *fakeDriver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "Volume ID cannot be empty")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deletes = append(d.deletes, req.GetVolumeId())
	return &csi.DeleteVolumeResponse{}, nil
}
