package request

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

func TestVolumeName(t *testing.T) {
	tests := []struct {
		prefix, uid string
		length      int
		want        string
	}{
		{"pvc", testUID, -1, "pvc-" + testUID},
		{"pvc", testUID, 0, "pvc-" + testUID},
		{"pvc", testUID, 8, "pvc-4f9d1c2e"},
		{"pvc", testUID, 1, "pvc-4"},
		{"pvc", testUID, 12, "pvc-4f9d1c2e6a1b"}, // dashes go before the cut, as in external-provisioner
		{"pvc", testUID, len(testUID), "pvc-4f9d1c2e6a1b4c8d9e0f112233445566"},
		{"pvc", testUID, len(testUID) + 10, "pvc-4f9d1c2e6a1b4c8d9e0f112233445566"},
		{"tether", "abc", 8, "tether-abc"},
		{"", "abc", -1, "-abc"},
	}
	for _, tt := range tests {
		if got := VolumeName(tt.prefix, tt.uid, tt.length); got != tt.want {
			t.Errorf("VolumeName(%q, %q, %d) = %q, want %q", tt.prefix, tt.uid, tt.length, got, tt.want)
		}
	}
}

// mountCap and blockCap are the CSI capabilities a claim should map to.
func mountCap(mode csi.VolumeCapability_AccessMode_Mode, fsType string, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: flags}},
	}
}

func blockCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	}
}

func capsEqual(a, b []*csi.VolumeCapability) bool {
	return slices.EqualFunc(a, b, func(x, y *csi.VolumeCapability) bool { return proto.Equal(x, y) })
}

const (
	sw   = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	ssw  = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	smw  = csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
	mnro = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	mnmw = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
)

func TestVolumeCapabilities(t *testing.T) {
	tests := []struct {
		name                  string
		claim                 *v1.PersistentVolumeClaim
		fsType, defaultFSType string
		mountOptions          []string
		snmw                  bool // the driver has SINGLE_NODE_MULTI_WRITER
		want                  []*csi.VolumeCapability
		wantErr               string
	}{
		{name: "RWO", claim: newClaim(), fsType: "ext4", want: []*csi.VolumeCapability{mountCap(sw, "ext4")}},
		// As external-provisioner: a driver without SINGLE_NODE_MULTI_WRITER
		// knows no single-writer mode; kubelet keeps RWOP to one pod.
		{name: "RWOP", claim: newClaim(modes(v1.ReadWriteOncePod)), fsType: "ext4", want: []*csi.VolumeCapability{mountCap(sw, "ext4")}},
		{name: "RWO, SINGLE_NODE_MULTI_WRITER", claim: newClaim(), fsType: "ext4", snmw: true, want: []*csi.VolumeCapability{mountCap(smw, "ext4")}},
		{name: "RWOP, SINGLE_NODE_MULTI_WRITER", claim: newClaim(modes(v1.ReadWriteOncePod)), fsType: "ext4", snmw: true,
			want: []*csi.VolumeCapability{mountCap(ssw, "ext4")}},
		{name: "ROX and RWX, SINGLE_NODE_MULTI_WRITER", claim: newClaim(modes(v1.ReadOnlyMany, v1.ReadWriteMany)), snmw: true,
			want: []*csi.VolumeCapability{mountCap(mnro, ""), mountCap(mnmw, "")}},
		{name: "block RWO and RWOP, SINGLE_NODE_MULTI_WRITER", claim: newClaim(volumeMode(v1.PersistentVolumeBlock), modes(v1.ReadWriteOnce, v1.ReadWriteOncePod)),
			snmw: true, want: []*csi.VolumeCapability{blockCap(smw), blockCap(ssw)}},
		{name: "ROX", claim: newClaim(modes(v1.ReadOnlyMany)), fsType: "ext4", want: []*csi.VolumeCapability{mountCap(mnro, "ext4")}},
		{name: "RWX", claim: newClaim(modes(v1.ReadWriteMany)), fsType: "ext4", want: []*csi.VolumeCapability{mountCap(mnmw, "ext4")}},
		{name: "several modes, in order", claim: newClaim(modes(v1.ReadWriteMany, v1.ReadWriteOnce, v1.ReadOnlyMany)), fsType: "xfs",
			want: []*csi.VolumeCapability{mountCap(mnmw, "xfs"), mountCap(sw, "xfs"), mountCap(mnro, "xfs")}},
		{name: "explicit Filesystem", claim: newClaim(volumeMode(v1.PersistentVolumeFilesystem)), fsType: "ext4",
			want: []*csi.VolumeCapability{mountCap(sw, "ext4")}},
		{name: "default fsType", claim: newClaim(), defaultFSType: "ext4", want: []*csi.VolumeCapability{mountCap(sw, "ext4")}},
		{name: "class fsType wins over the default", claim: newClaim(), fsType: "xfs", defaultFSType: "ext4",
			want: []*csi.VolumeCapability{mountCap(sw, "xfs")}},
		{name: "no fsType at all", claim: newClaim(), want: []*csi.VolumeCapability{mountCap(sw, "")}},
		{name: "mount options", claim: newClaim(modes(v1.ReadWriteOnce, v1.ReadOnlyMany)), fsType: "ext4", mountOptions: []string{"noatime", "discard"},
			want: []*csi.VolumeCapability{mountCap(sw, "ext4", "noatime", "discard"), mountCap(mnro, "ext4", "noatime", "discard")}},
		{name: "block has no fsType or flags", claim: newClaim(volumeMode(v1.PersistentVolumeBlock), modes(v1.ReadWriteOnce, v1.ReadWriteMany)),
			fsType: "ext4", defaultFSType: "xfs", mountOptions: []string{"noatime"},
			want: []*csi.VolumeCapability{blockCap(sw), blockCap(mnmw)}},
		{name: "block RWOP", claim: newClaim(volumeMode(v1.PersistentVolumeBlock), modes(v1.ReadWriteOncePod)),
			want: []*csi.VolumeCapability{blockCap(sw)}},
		{name: "unknown access mode", claim: newClaim(modes(v1.ReadWriteOnce, "ReadSometimes")), wantErr: `unknown access mode "ReadSometimes"`},
		{name: "unknown volumeMode", claim: newClaim(volumeMode("Object")), wantErr: `unknown volumeMode "Object"`},
		{name: "empty volumeMode", claim: newClaim(volumeMode("")), wantErr: `unknown volumeMode ""`},
		{name: "no access modes", claim: newClaim(modes()), wantErr: "no access modes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := VolumeCapabilities(tt.claim, CapabilityOptions{FSType: tt.fsType, DefaultFSType: tt.defaultFSType,
				MountOptions: tt.mountOptions, SingleNodeMultiWriter: tt.snmw})
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if !capsEqual(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestBuildRequestCapabilities(t *testing.T) {
	tests := []struct {
		name    string
		claim   *v1.PersistentVolumeClaim
		class   *storagev1.StorageClass
		opts    Options
		want    []*csi.VolumeCapability
		wantErr string
	}{
		{name: "fsType from the class key", claim: newClaim(), class: newClass(kv("csi.storage.k8s.io/fstype", "xfs")),
			opts: Options{DefaultFSType: "ext4"}, want: []*csi.VolumeCapability{mountCap(sw, "xfs")}},
		{name: "fsType from the deprecated key", claim: newClaim(), class: newClass(kv("fstype", "ext3")),
			opts: Options{DefaultFSType: "ext4"}, want: []*csi.VolumeCapability{mountCap(sw, "ext3")}},
		{name: "default fsType", claim: newClaim(), class: newClass(nil),
			opts: Options{DefaultFSType: "ext4"}, want: []*csi.VolumeCapability{mountCap(sw, "ext4")}},
		{name: "class mount options", claim: newClaim(modes(v1.ReadWriteMany)), class: newClass(nil, "noatime", "nfsvers=4.1"),
			want: []*csi.VolumeCapability{mountCap(mnmw, "", "noatime", "nfsvers=4.1")}},
		{name: "block ignores fsType and mount options", claim: newClaim(volumeMode(v1.PersistentVolumeBlock)),
			class: newClass(kv("csi.storage.k8s.io/fstype", "xfs"), "noatime"), opts: Options{DefaultFSType: "ext4"},
			want: []*csi.VolumeCapability{blockCap(sw)}},
		{name: "SINGLE_NODE_MULTI_WRITER from the options", claim: newClaim(modes(v1.ReadWriteOnce, v1.ReadWriteOncePod)), class: newClass(nil),
			opts: Options{SingleNodeMultiWriter: true}, want: []*csi.VolumeCapability{mountCap(smw, ""), mountCap(ssw, "")}},
		{name: "unknown volumeMode", claim: newClaim(volumeMode("Tape")), class: newClass(nil), wantErr: "unknown volumeMode"},
		{name: "no access modes", claim: newClaim(modes()), class: newClass(nil), wantErr: "no access modes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params, err := ParseClassParams(tt.class.Parameters)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Build(Input{Claim: tt.claim, Class: tt.class, Params: params}, tt.opts)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if !capsEqual(got.VolumeCapabilities, tt.want) {
				t.Errorf("got %v\nwant %v", got.VolumeCapabilities, tt.want)
			}
		})
	}
}

func TestCapacityRange(t *testing.T) {
	tests := []struct {
		name    string
		claim   *v1.PersistentVolumeClaim
		want    *csi.CapacityRange
		wantErr string
	}{
		{name: "request", claim: newClaim(requested("10Gi")), want: &csi.CapacityRange{RequiredBytes: 10 << 30}},
		{name: "decimal request", claim: newClaim(requested("1G")), want: &csi.CapacityRange{RequiredBytes: 1e9}},
		{name: "fractional bytes round up", claim: newClaim(requested("1500m")), want: &csi.CapacityRange{RequiredBytes: 2}},
		{name: "zero request", claim: newClaim(requested("0")), want: &csi.CapacityRange{}},
		{name: "request and limit", claim: newClaim(requested("1Gi"), limit("2Gi")), want: &csi.CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 2 << 30}},
		{name: "limit equal to request", claim: newClaim(requested("1Gi"), limit("1Gi")), want: &csi.CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 1 << 30}},
		{name: "limit below request", claim: newClaim(requested("2Gi"), limit("1Gi")), wantErr: "storage limit 1Gi is below its request 2Gi"},
		{name: "negative limit", claim: newClaim(requested("1Gi"), limit("-1Gi")), wantErr: "below its request"},
		{name: "no request", claim: newClaim(noRequest()), wantErr: "requests no storage"},
		{name: "no request but a limit", claim: newClaim(noRequest(), limit("1Gi")), wantErr: "requests no storage"},
		{name: "negative request", claim: newClaim(requested("-1Gi")), wantErr: "negative size -1Gi"},
		// Found by the bad-input tour: the API server takes these, and
		// Value() turned them into 0 (no minimum) or a negative size.
		{name: "request past the int64 maximum", claim: newClaim(requested("1e30")), wantErr: "requests 1e30, more than the 9223372036854775807 bytes"},
		{name: "request one past the int64 maximum", claim: newClaim(requested("9223372036854775808")), wantErr: "more than the 9223372036854775807 bytes"},
		{name: "8Ei parses as the int64 maximum", claim: newClaim(requested("8Ei")), want: &csi.CapacityRange{RequiredBytes: 1<<63 - 1}},
		{name: "limit past the int64 maximum is no limit", claim: newClaim(requested("1Gi"), limit("9300000000000000000")), want: &csi.CapacityRange{RequiredBytes: 1 << 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Build(Input{Claim: tt.claim, Class: newClass(nil)}, Options{VolumeNamePrefix: "pvc"})
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if got.CapacityRange.RequiredBytes != tt.want.RequiredBytes || got.CapacityRange.LimitBytes != tt.want.LimitBytes {
				t.Errorf("got %v, want %v", got.CapacityRange, tt.want)
			}
		})
	}
}

func TestBuildRequest(t *testing.T) {
	secrets := kv("user", "admin")
	topo := &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: kv("zone", "a")}}}
	source := &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "vol-1"}}}
	class := newClass(kv("type", "ssd", "csi.storage.k8s.io/fstype", "xfs",
		"csi.storage.k8s.io/provisioner-secret-name", "s", "csi.storage.k8s.io/provisioner-secret-namespace", "ns"))
	params, err := ParseClassParams(class.Parameters)
	if err != nil {
		t.Fatal(err)
	}
	driverBefore := maps.Clone(params.Driver)

	tests := []struct {
		name       string
		opts       Options
		wantName   string
		wantParams map[string]string
	}{
		{name: "plain", opts: Options{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: -1},
			wantName: "pvc-" + testUID, wantParams: kv("type", "ssd")},
		{name: "short name", opts: Options{VolumeNamePrefix: "tether", VolumeNameUUIDLen: 8},
			wantName: "tether-4f9d1c2e", wantParams: kv("type", "ssd")},
		{name: "extra create metadata", opts: Options{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: 8, ExtraCreateMetadata: true},
			wantName: "pvc-4f9d1c2e", wantParams: kv("type", "ssd", KeyPVCName, testClaim, KeyPVCNamespace, testNS, KeyPVName, "pvc-4f9d1c2e")},
		// The class has no reclaim policy: Delete.
		{name: "ownership mark", opts: Options{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: -1, Owner: "cluster-1"},
			wantName: "pvc-" + testUID, wantParams: kv("type", "ssd", OwnerKey, "Delete/cluster-1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := Build(Input{Claim: newClaim(), Class: class, Params: params,
				Secrets: secrets, Topology: topo, Source: source}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if req.Name != tt.wantName {
				t.Errorf("name %q, want %q", req.Name, tt.wantName)
			}
			if !maps.Equal(req.Parameters, tt.wantParams) {
				t.Errorf("parameters %v, want %v", req.Parameters, tt.wantParams)
			}
			if !maps.Equal(params.Driver, driverBefore) {
				t.Errorf("the class parameters were changed: %v", params.Driver)
			}
			for k := range req.Parameters {
				if metadata := k == KeyPVCName || k == KeyPVCNamespace || k == KeyPVName; !metadata && strings.HasPrefix(k, reservedPrefix) {
					t.Errorf("reserved key %q reached the driver", k)
				}
			}
			if !maps.Equal(req.Secrets, secrets) || req.AccessibilityRequirements != topo || req.VolumeContentSource != source {
				t.Errorf("secrets, topology or source not passed on: %v %v %v", req.Secrets, req.AccessibilityRequirements, req.VolumeContentSource)
			}
			if req.CapacityRange.GetRequiredBytes() != 1<<30 {
				t.Errorf("capacity %v", req.CapacityRange)
			}
			if want := []*csi.VolumeCapability{mountCap(sw, "xfs")}; !capsEqual(req.VolumeCapabilities, want) {
				t.Errorf("capabilities %v", req.VolumeCapabilities)
			}
		})
	}
}

func TestBuildRequestNoSecretsNoTopology(t *testing.T) {
	req, err := Build(Input{Claim: newClaim(), Class: newClass(nil), Params: ClassParams{}}, Options{VolumeNamePrefix: "pvc"})
	if err != nil {
		t.Fatal(err)
	}
	if req.Secrets != nil || req.AccessibilityRequirements != nil || req.VolumeContentSource != nil || len(req.Parameters) != 0 ||
		req.MutableParameters != nil {
		t.Errorf("unexpected extras: %v", req)
	}
}

func TestBuildRequestOwnerMark(t *testing.T) {
	retain, del := v1.PersistentVolumeReclaimRetain, v1.PersistentVolumeReclaimDelete
	tests := []struct {
		name        string
		reclaim     *v1.PersistentVolumeReclaimPolicy
		classParams map[string]string
		owner       string
		want        map[string]string
	}{
		{name: "no owner: no mark", want: map[string]string{}},
		{name: "the class's parameter passes without an owner", classParams: kv(OwnerKey, "x"), want: kv(OwnerKey, "x")},
		{name: "default reclaim policy", owner: "c1", want: kv(OwnerKey, "Delete/c1")},
		{name: "Delete", reclaim: &del, owner: "c1", want: kv(OwnerKey, "Delete/c1")},
		{name: "Retain", reclaim: &retain, owner: "c1", want: kv(OwnerKey, "Retain/c1")},
		{name: "a class cannot forge the mark", classParams: kv(OwnerKey, "Delete/c1-forged", "type", "ssd"), owner: "c1",
			want: kv(OwnerKey, "Delete/c1", "type", "ssd")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := newClass(nil)
			class.ReclaimPolicy = tt.reclaim
			before := maps.Clone(tt.classParams)
			req, err := Build(Input{Claim: newClaim(), Class: class, Params: ClassParams{Driver: tt.classParams}},
				Options{VolumeNamePrefix: "pvc", Owner: tt.owner})
			if err != nil {
				t.Fatal(err)
			}
			if len(req.Parameters) != len(tt.want) || !maps.Equal(req.Parameters, tt.want) && len(tt.want) > 0 {
				t.Errorf("parameters %v, want %v", req.Parameters, tt.want)
			}
			if !maps.Equal(tt.classParams, before) {
				t.Errorf("the class parameters were changed: %v", tt.classParams)
			}
		})
	}
}

// A claim's VolumeAttributesClass parameters go as mutable_parameters,
// apart from the class's parameters and unchanged by the request's
// additions (metadata, ownership mark).
func TestBuildRequestMutableParameters(t *testing.T) {
	tests := []struct {
		name        string
		mutable     map[string]string
		opts        Options
		wantMutable map[string]string
		wantParams  map[string]string
	}{
		{name: "none", wantParams: kv("type", "ssd")},
		{name: "empty", mutable: map[string]string{}, wantMutable: map[string]string{}, wantParams: kv("type", "ssd")},
		{name: "the class's parameters", mutable: kv("iops", "3000", "type", "io2"), wantMutable: kv("iops", "3000", "type", "io2"),
			wantParams: kv("type", "ssd")},
		{name: "metadata and the mark go to parameters only", mutable: kv("iops", "3000"),
			opts:        Options{ExtraCreateMetadata: true, Owner: "c1"},
			wantMutable: kv("iops", "3000"),
			wantParams:  kv("type", "ssd", KeyPVCName, testClaim, KeyPVCNamespace, testNS, KeyPVName, "pvc-"+testUID, OwnerKey, "Delete/c1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.VolumeNamePrefix, tt.opts.VolumeNameUUIDLen = "pvc", -1
			before := maps.Clone(tt.mutable)
			req, err := Build(Input{Claim: newClaim(), Class: newClass(nil), Params: ClassParams{Driver: kv("type", "ssd")},
				Mutable: tt.mutable}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if (req.MutableParameters == nil) != (tt.wantMutable == nil) || !maps.Equal(req.MutableParameters, tt.wantMutable) {
				t.Errorf("mutable parameters %v, want %v", req.MutableParameters, tt.wantMutable)
			}
			if !maps.Equal(req.Parameters, tt.wantParams) {
				t.Errorf("parameters %v, want %v", req.Parameters, tt.wantParams)
			}
			if req.MutableParameters != nil {
				req.MutableParameters["x"] = "y"
			}
			if !maps.Equal(tt.mutable, before) {
				t.Errorf("the attributes class's parameters were changed: %v", tt.mutable)
			}
		})
	}
}
