package csi

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
)

func TestStripSecrets(t *testing.T) {
	req := &csi.CreateVolumeRequest{
		Name:       "pvc-1",
		Parameters: map[string]string{"type": "fast"},
		Secrets:    map[string]string{"user": "admin", "password": "hunter2"},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}
	orig := proto.Clone(req)
	out := StripSecrets(req)
	for _, want := range []string{"pvc-1", "fast", "SINGLE_NODE_WRITER", "user", "password", stripped} {
		if !strings.Contains(out, want) {
			t.Errorf("StripSecrets = %s; it lacks %q", out, want)
		}
	}
	for _, secret := range []string{"admin", "hunter2"} {
		if strings.Contains(out, secret) {
			t.Errorf("StripSecrets = %s; it shows the secret %q", out, secret)
		}
	}
	if !proto.Equal(req, orig) {
		t.Errorf("StripSecrets changed its argument: %v", req)
	}
}

func TestStripSecretsOtherMessages(t *testing.T) {
	for _, msg := range []proto.Message{
		&csi.DeleteVolumeRequest{VolumeId: "v1", Secrets: map[string]string{"k": "hunter2"}},
		&csi.ControllerPublishVolumeRequest{VolumeId: "v1", Secrets: map[string]string{"k": "hunter2"}},
		&csi.ListVolumesRequest{MaxEntries: 3},
	} {
		if out := StripSecrets(msg); strings.Contains(out, "hunter2") || !strings.Contains(out, "3") && !strings.Contains(out, "v1") {
			t.Errorf("StripSecrets(%T) = %s", msg, out)
		}
	}
	var nilReq *csi.CreateVolumeRequest
	if out := StripSecrets(nilReq); out != "null" {
		t.Errorf("StripSecrets(typed nil) = %q", out)
	}
	if out := StripSecrets(nil); out != "null" {
		t.Errorf("StripSecrets(nil) = %q", out)
	}
}
