package upgrade

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// The example local driver has no CLONE_VOLUME (it refuses volume content
// sources), so clones go to the csi-test mock driver, as in test/chaos: its
// own class and its own provisioner, behind a delay proxy of its own.
const (
	mockName  = "mock.csi.tether.dev"
	mockClass = "slow-mock"
)

// mockDriver is the mock as the checks read it. It keeps its volumes in
// memory: it holds what ListVolumes returns (those named pvc-..., not its
// own three), and its log of every call says what it made and deleted.
type mockDriver struct {
	*cluster.MockDriver
	slow string // the proxy's socket in front of it
}

// startMock starts the mock (without PUBLISH_UNPUBLISH_VOLUME: no pod
// uses the volumes), its delay proxy and its class.
func (e *env) startMock() {
	e.t.Helper()
	m := &mockDriver{MockDriver: cluster.StartMockDriver(e.t, e.c, mockName, "", "-disable-attach")}
	m.slow = filepath.Join(filepath.Dir(m.Socket), "slow.sock")
	proxy, err := cluster.StartUnixDelayProxy(m.slow, m.Socket, e.latency/2)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = proxy.Close() })
	binding, policy := storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete
	if _, err := e.c.Client.StorageV1().StorageClasses().Create(e.t.Context(), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: mockClass},
		Provisioner: mockName, VolumeBindingMode: &binding, ReclaimPolicy: &policy}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.mock = m
}

// mockProvisioner starts a provisioner of version b for the mock
// (centralised: the mock has no topology).
func (e *env) mockProvisioner(b Binaries) {
	e.t.Helper()
	e.run("provisioner-mock", b, b.Provisioner, []string{"--kubeconfig=" + e.c.Kubeconfig, "--csi-address=" + e.mock.slow,
		"--retry-interval-start=200ms", "--retry-interval-max=5s", fmt.Sprintf("--worker-threads=%d", workers), "-v=4", "--leader-election=false"})
}

func (m *mockDriver) name() string      { return "mock" }
func (m *mockDriver) logs() []string    { return []string{m.Proc.LogPath} }
func (m *mockDriver) where(kind) string { return "its memory, " + m.Socket }
func (m *mockDriver) held(t cluster.T, k kind) []string {
	t.Helper()
	if k != volumeKind {
		return nil
	}
	return m.Volumes(t)
}

// mockCall is the part of a line of the mock's log of each call
// ("gRPCCall: {...}", csi-test's driver.logGRPC) that says which volume a
// CreateVolume made or a DeleteVolume deleted.
type mockCall struct {
	Method  string
	Request struct {
		VolumeID string `json:"volume_id"`
	}
	Response struct {
		Volume struct {
			VolumeID string `json:"volume_id"`
		} `json:"volume"`
	}
	Error string
}

// logged reads the mock's log: the volumes its CreateVolume calls answered
// (one repeated for the same name answers the same volume) and those its
// DeleteVolume calls deleted (or found gone), each without error.
func (m *mockDriver) logged(t cluster.T, k kind) (made, deleted map[string]bool) {
	t.Helper()
	made, deleted = map[string]bool{}, map[string]bool{}
	if k != volumeKind {
		return made, deleted
	}
	data, err := os.ReadFile(m.Proc.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		_, js, ok := strings.Cut(line, "gRPCCall: ")
		var c mockCall
		if !ok || json.Unmarshal([]byte(js), &c) != nil || c.Error != "" {
			continue
		}
		switch {
		case strings.HasSuffix(c.Method, "/CreateVolume") && c.Response.Volume.VolumeID != "":
			made[c.Response.Volume.VolumeID] = true
		case strings.HasSuffix(c.Method, "/DeleteVolume"):
			deleted[c.Request.VolumeID] = true
		}
	}
	return made, deleted
}
