package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// requireMounts skips the test where bind mounts are refused: only there,
// since publishing is a bind mount. It needs root with CAP_SYS_ADMIN.
func requireMounts(t *testing.T) {
	t.Helper()
	src, dst := t.TempDir(), t.TempDir()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			t.Skipf("bind mounts are not permitted here (need root with CAP_SYS_ADMIN): %v", err)
		}
		t.Fatalf("test bind mount: %v", err)
	}
	if err := unix.Unmount(dst, 0); err != nil {
		t.Fatal(err)
	}
}

// target is a publish target path whose mounts are undone when the test
// ends, whatever happened.
func target(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mnt", "target")
	t.Cleanup(func() { _ = unmountAll(p) })
	return p
}

func publishReq(id, target string, mode csi.VolumeCapability_AccessMode_Mode, readOnly bool) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: mountCap(mode), Readonly: readOnly}
}

func TestPublishUnpublish(t *testing.T) {
	requireMounts(t)
	td := newTestDriver(t, 10*gi)
	td.mustCreate("pvc-pub", gi)
	ctx := context.Background()
	rw, ro, roMode := target(t), target(t), target(t)
	const writer = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

	for range 2 { // the second time is a retry: same answer
		if _, err := td.node.NodePublishVolume(ctx, publishReq("pvc-pub", rw, writer, false)); err != nil {
			t.Fatalf("publish read-write: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(rw, "hello"), []byte("hi"), 0o644); err != nil {
		t.Fatalf("write through the mount: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(td.root, "volumes", "pvc-pub", "hello")); string(b) != "hi" {
		t.Fatalf("file in the volume folder: %q, %v", b, err)
	}

	for range 2 {
		if _, err := td.node.NodePublishVolume(ctx, publishReq("pvc-pub", ro, writer, true)); err != nil {
			t.Fatalf("publish read-only: %v", err)
		}
	}
	if _, err := td.node.NodePublishVolume(ctx, publishReq("pvc-pub", roMode, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, false)); err != nil {
		t.Fatalf("publish reader-only mode: %v", err)
	}
	for _, p := range []string{ro, roMode} {
		if b, err := os.ReadFile(filepath.Join(p, "hello")); string(b) != "hi" {
			t.Fatalf("read through %s: %q, %v", p, b, err)
		}
		err := os.WriteFile(filepath.Join(p, "nope"), nil, 0o644)
		if !errors.Is(err, unix.EROFS) {
			t.Fatalf("write through read-only %s: %v, want EROFS", p, err)
		}
	}
	// Read-write where read-only is mounted is a conflict.
	_, err := td.node.NodePublishVolume(ctx, publishReq("pvc-pub", ro, writer, false))
	wantCode(t, err, codes.AlreadyExists)
	// So is another volume at a used target.
	td.mustCreate("pvc-other", gi)
	_, err = td.node.NodePublishVolume(ctx, publishReq("pvc-other", rw, writer, false))
	wantCode(t, err, codes.AlreadyExists)

	// A published volume is not deleted.
	_, err = td.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-pub"})
	wantCode(t, err, codes.FailedPrecondition)

	for _, p := range []string{rw, ro, roMode} {
		for range 2 {
			if _, err := td.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-pub", TargetPath: p}); err != nil {
				t.Fatalf("unpublish %s: %v", p, err)
			}
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("target %s after unpublish: %v", p, err)
		}
	}
	td.mustDelete("pvc-pub")
	if _, err := os.Stat(filepath.Join(td.root, "volumes", "pvc-pub")); !os.IsNotExist(err) {
		t.Fatalf("volume folder after delete: %v", err)
	}
}

// TestPublishFinishesReadOnly: a publish cut between its bind and its
// read-only remount is finished by the retry.
func TestPublishFinishesReadOnly(t *testing.T) {
	requireMounts(t)
	td := newTestDriver(t, 10*gi)
	td.mustCreate("v", gi)
	p := target(t)
	if err := os.MkdirAll(p, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := bindMount(td.d.store.path("v"), p, false); err != nil {
		t.Fatal(err)
	}
	if _, err := td.node.NodePublishVolume(context.Background(), publishReq("v", p, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, true)); err != nil {
		t.Fatal(err)
	}
	if ro, err := isReadOnlyMount(p); err != nil || !ro {
		t.Fatalf("read-only %v, %v", ro, err)
	}
	if mounts, err := mountsOf(td.d.store.path("v")); err != nil || len(mounts) != 1 || mounts[0] != canonical(p) {
		t.Fatalf("mounts of the volume %v, %v; want [%s]", mounts, err, p)
	}
}

// TestPublishReadOnlyReachesPeers: a read-only publish is read-only in
// every copy of the target that mount propagation makes, as in kubelet's
// mount namespace, where the container runtime makes the pod's mount. The
// peer here is a bind of a shared folder, in the test's own namespace.
func TestPublishReadOnlyReachesPeers(t *testing.T) {
	requireMounts(t)
	td := newTestDriver(t, 10*gi)
	td.mustCreate("v", gi)
	shared, peer := t.TempDir(), t.TempDir()
	for _, step := range []struct {
		source, target string
		flags          uintptr
	}{
		{shared, shared, unix.MS_BIND},
		{"", shared, unix.MS_PRIVATE},
		{"", shared, unix.MS_SHARED},
		{shared, peer, unix.MS_BIND},
	} {
		if err := unix.Mount(step.source, step.target, "", step.flags, ""); err != nil {
			t.Fatalf("mount %s at %s (flags %#x): %v", step.source, step.target, step.flags, err)
		}
	}
	t.Cleanup(func() { _ = unmountAll(peer); _ = unmountAll(shared) })
	p := filepath.Join(shared, "target")
	t.Cleanup(func() { _ = unmountAll(p); _ = unmountAll(filepath.Join(peer, "target")) })
	if _, err := td.node.NodePublishVolume(context.Background(), publishReq("v", p, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, true)); err != nil {
		t.Fatal(err)
	}
	copyOf := filepath.Join(peer, "target")
	if mounted, err := isMountPoint(copyOf); err != nil || !mounted {
		t.Fatalf("the publish did not propagate to %s: %v, %v", copyOf, mounted, err)
	}
	for _, at := range []string{p, copyOf} {
		if err := os.WriteFile(filepath.Join(at, "nope"), nil, 0o644); !errors.Is(err, unix.EROFS) {
			t.Errorf("write through %s: %v, want EROFS", at, err)
		}
	}
	if _, err := td.node.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: p}); err != nil {
		t.Fatal(err)
	}
	if mounted, err := isMountPoint(copyOf); err != nil || mounted {
		t.Errorf("the copy at %s after unpublish: mounted %v, %v", copyOf, mounted, err)
	}
}

func TestNodeRefusals(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	td.mustCreate("v", gi)
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "target")
	block := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	for _, tc := range []struct {
		name string
		req  *csi.NodePublishVolumeRequest
		code codes.Code
	}{
		{"no volume ID", &csi.NodePublishVolumeRequest{TargetPath: p, VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}, codes.InvalidArgument},
		{"no target", &csi.NodePublishVolumeRequest{VolumeId: "v", VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}, codes.InvalidArgument},
		{"no capability", &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: p}, codes.InvalidArgument},
		{"block", &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: p, VolumeCapability: block}, codes.InvalidArgument},
		{"multi-node", publishReq("v", p, csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER, false), codes.InvalidArgument},
		{"missing volume", publishReq("nope", p, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false), codes.NotFound},
	} {
		_, err := td.node.NodePublishVolume(ctx, tc.req)
		if err == nil {
			t.Fatalf("%s: published", tc.name)
		}
		wantCode(t, err, tc.code)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("a refused publish made the target: %v", err)
	}
	_, err := td.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "v"})
	wantCode(t, err, codes.InvalidArgument)
	// Not mounted, not there, or a volume that is gone: already unpublished.
	if _, err := td.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "nope", TargetPath: p}); err != nil {
		t.Fatal(err)
	}
	// A target with files in it is not a mount to undo; its files stay.
	if err := os.MkdirAll(p, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = td.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: p})
	wantCode(t, err, codes.Internal)
	if _, err := os.Stat(filepath.Join(p, "keep")); err != nil {
		t.Fatal(err)
	}
}
