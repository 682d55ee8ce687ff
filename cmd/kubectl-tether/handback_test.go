package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseHandBack(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		want    handBackOptions
		wantErr string
	}{
		{args: []string{"-n", "kube-system", "deployment/drv", "--image", "example.com/p:v1"},
			want: handBackOptions{namespace: "kube-system", container: "csi-provisioner", image: "example.com/p:v1", target: "deployment/drv"}},
		{args: []string{"daemonset/drv", "--container=provisioner", "--image=i", "--timeout=2m"},
			want: handBackOptions{container: "provisioner", image: "i", target: "daemonset/drv"}},
		{args: []string{"--image=i"}, wantErr: "give one target"},
		{args: []string{"--image=i", "a", "b"}, wantErr: "give one target"},
		{args: []string{"--image=i", "--timeout=0s", "pod/p"}, wantErr: "positive duration"},
		{args: []string{"--timeout=5", "pod/p"}, wantErr: "invalid argument"},
		{args: []string{"--as=someone", "--server=https://x", "--image=i", "pod/p"}, want: handBackOptions{container: "csi-provisioner", image: "i", target: "pod/p"}},
		{args: []string{"pod/p"}, wantErr: "give tether's provisioner image with --image"}, // a test binary is no release
	} {
		got, err := parseHandBack(tt.args)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		got.timeout, got.config = 0, nil
		if err != nil || got != tt.want {
			t.Errorf("%q: %+v (%v), want %+v", tt.args, got, err, tt.want)
		}
	}
}

func TestHandBackHelpAndBadArguments(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"hand-back", "--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "kubectl tether hand-back") {
		t.Errorf("hand-back --help: status %d, %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"hand-back", "--image=i"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "give one target") {
		t.Errorf("hand-back without a target: status %d, %q", code, errOut.String())
	}
}
