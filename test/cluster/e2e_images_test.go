package cluster

import "testing"

func TestE2EImage(t *testing.T) {
	busybox := Image{Ref: BusyboxImage, Files: map[string]string{"bin/busybox": "/bin/busybox"}, Entrypoint: []string{"/bin/sh"}}
	pause := Image{Ref: PauseImage, Files: map[string]string{"pause": "/x/pause"}, Entrypoint: []string{"/pause"}}
	for _, tc := range []struct {
		ref        string
		ok         bool
		entrypoint string
		agnhost    bool
	}{
		{ref: "registry.k8s.io/e2e-test-images/agnhost:2.63.0", ok: true, entrypoint: "/agnhost", agnhost: true},
		{ref: "registry.k8s.io/e2e-test-images/busybox:1.37.0-1", ok: true, entrypoint: "/bin/sh"},
		{ref: "registry.k8s.io/e2e-test-images/nginx:1.15-4", ok: true, entrypoint: "/bin/sh"},
		{ref: "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0", ok: true, entrypoint: "/bin/sh"},
		{ref: "registry.k8s.io/pause:3.10.2", ok: true, entrypoint: "/pause"},
		{ref: "gcr.io/k8s-authenticated-test/agnhost:2.6"},
		{ref: "registry.k8s.io/sig-storage/hello-populator:v1.0.1"},
		{ref: "registry.k8s.io/e2e-test-images/volume/nfs:1.6.0"},
	} {
		img, ok := e2eImage(tc.ref, busybox, pause, "/x/agnhost")
		if ok != tc.ok {
			t.Errorf("%s: made %v, want %v", tc.ref, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if img.Ref != tc.ref || img.Entrypoint[0] != tc.entrypoint {
			t.Errorf("%s: ref %s, entrypoint %v", tc.ref, img.Ref, img.Entrypoint)
		}
		if got := img.Files["agnhost"] == "/x/agnhost"; got != tc.agnhost {
			t.Errorf("%s: has agnhost %v, want %v", tc.ref, got, tc.agnhost)
		}
		if tc.agnhost && img.Files["bin/busybox"] == "" {
			t.Errorf("%s: agnhost's image has no busybox for the specs' shell commands", tc.ref)
		}
	}
	if busybox.Files["agnhost"] != "" {
		t.Error("making agnhost's image changed busybox's files")
	}
}
