package request

import (
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

func volumeResp(id string, capacity int64, topology ...*csi.Topology) *csi.CreateVolumeResponse {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: capacity, AccessibleTopology: topology}}
}

func pvInput(claim *v1.PersistentVolumeClaim) PVInput {
	return PVInput{Name: "pvc-" + testUID, Driver: driverNm, Identity: "1700000000000-8081-" + driverNm, Claim: claim}
}

func TestBuildPV(t *testing.T) {
	claim := newClaim(modes(v1.ReadWriteOnce, v1.ReadOnlyMany))
	in := pvInput(claim)
	in.FSType = "xfs"
	in.MountOptions = []string{"noatime"}
	resp := volumeResp("vol-1", 2<<30)
	resp.Volume.VolumeContext = kv("pool", "gold", AnnProvisionerIdentity, "forged")
	ctxBefore := maps.Clone(resp.Volume.VolumeContext)

	pv, err := BuildPV(resp, in)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Name != in.Name {
		t.Errorf("name %q", pv.Name)
	}
	wantRef := &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: testNS, Name: testClaim, UID: claim.UID, ResourceVersion: "7"}
	if !reflect.DeepEqual(pv.Spec.ClaimRef, wantRef) {
		t.Errorf("claimRef %+v, want %+v", pv.Spec.ClaimRef, wantRef)
	}
	src := pv.Spec.CSI
	if src == nil || src.Driver != driverNm || src.VolumeHandle != "vol-1" || src.FSType != "xfs" {
		t.Fatalf("CSI source %+v", src)
	}
	if want := kv("pool", "gold", AnnProvisionerIdentity, in.Identity); !maps.Equal(src.VolumeAttributes, want) {
		t.Errorf("volume attributes %v, want %v", src.VolumeAttributes, want)
	}
	if !maps.Equal(resp.Volume.VolumeContext, ctxBefore) {
		t.Errorf("the response's volume context was changed: %v", resp.Volume.VolumeContext)
	}
	if got := pv.Spec.Capacity[v1.ResourceStorage]; got.Value() != 2<<30 {
		t.Errorf("capacity %s", got.String())
	}
	if !slices.Equal(pv.Spec.AccessModes, claim.Spec.AccessModes) || !slices.Equal(pv.Spec.MountOptions, in.MountOptions) {
		t.Errorf("access modes %v, mount options %v", pv.Spec.AccessModes, pv.Spec.MountOptions)
	}
	if pv.Spec.StorageClassName != testClass || pv.Spec.VolumeMode != nil || pv.Spec.NodeAffinity != nil ||
		pv.Spec.VolumeAttributesClassName != nil {
		t.Errorf("class %q, volumeMode %v, affinity %v, attributes class %v", pv.Spec.StorageClassName, pv.Spec.VolumeMode,
			pv.Spec.NodeAffinity, pv.Spec.VolumeAttributesClassName)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		t.Errorf("reclaim policy %q, want Delete by default", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if !slices.Equal(pv.Finalizers, []string{"external-provisioner.volume.kubernetes.io/finalizer"}) {
		t.Errorf("finalizers %v", pv.Finalizers)
	}
	if want := kv("pv.kubernetes.io/provisioned-by", driverNm, AnnDeletionSecretName, "", AnnDeletionSecretNamespace, ""); !maps.Equal(pv.Annotations, want) {
		t.Errorf("annotations %v, want %v", pv.Annotations, want)
	}
	if src.ControllerPublishSecretRef != nil || src.NodeStageSecretRef != nil || src.NodePublishSecretRef != nil ||
		src.ControllerExpandSecretRef != nil || src.NodeExpandSecretRef != nil {
		t.Errorf("secret refs without secrets: %+v", src)
	}
	// The PV owns its slices: changing them leaves the inputs alone.
	pv.Spec.AccessModes[0], pv.Spec.MountOptions[0] = v1.ReadWriteMany, "sync"
	if claim.Spec.AccessModes[0] != v1.ReadWriteOnce || in.MountOptions[0] != "noatime" {
		t.Error("the PV shares slices with its inputs")
	}
}

func TestBuildPVVariants(t *testing.T) {
	ref := func(n string) *v1.SecretReference { return &v1.SecretReference{Name: n, Namespace: "secrets"} }
	tests := []struct {
		name  string
		claim *v1.PersistentVolumeClaim
		edit  func(*PVInput)
		resp  *csi.CreateVolumeResponse
		check func(t *testing.T, pv *v1.PersistentVolume)
	}{
		{name: "block: volumeMode copied, no fsType", claim: newClaim(volumeMode(v1.PersistentVolumeBlock)),
			edit: func(in *PVInput) { in.FSType = "ext4" }, resp: volumeResp("v", 0),
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode != v1.PersistentVolumeBlock || pv.Spec.CSI.FSType != "" {
					t.Errorf("volumeMode %v, fsType %q", pv.Spec.VolumeMode, pv.Spec.CSI.FSType)
				}
			}},
		{name: "filesystem volumeMode copied, with fsType", claim: newClaim(volumeMode(v1.PersistentVolumeFilesystem)),
			edit: func(in *PVInput) { in.FSType = "ext4" }, resp: volumeResp("v", 0),
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode != v1.PersistentVolumeFilesystem || pv.Spec.CSI.FSType != "ext4" {
					t.Errorf("volumeMode %v, fsType %q", pv.Spec.VolumeMode, pv.Spec.CSI.FSType)
				}
			}},
		{name: "capacity 0: the request", claim: newClaim(requested("5Gi")), resp: volumeResp("v", 0),
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if q := pv.Spec.Capacity[v1.ResourceStorage]; q.Cmp(resource.MustParse("5Gi")) != 0 {
					t.Errorf("capacity %s, want 5Gi", q.String())
				}
			}},
		{name: "capacity equal to the request", claim: newClaim(requested("1G")), resp: volumeResp("v", 1e9),
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if q := pv.Spec.Capacity[v1.ResourceStorage]; q.Value() != 1e9 {
					t.Errorf("capacity %s", q.String())
				}
			}},
		{name: "huge capacity", claim: newClaim(), resp: volumeResp("v", 1<<62),
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if q := pv.Spec.Capacity[v1.ResourceStorage]; q.Value() != 1<<62 || q.String() != "4Ei" {
					t.Errorf("capacity %s", q.String())
				}
			}},
		{name: "largest capacity", claim: newClaim(), resp: volumeResp("v", math.MaxInt64),
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if q := pv.Spec.Capacity[v1.ResourceStorage]; q.Value() != math.MaxInt64 {
					t.Errorf("capacity %s", q.String())
				}
			}},
		{name: "Retain: no finalizer", claim: newClaim(), resp: volumeResp("v", 0),
			edit: func(in *PVInput) { in.ReclaimPolicy = v1.PersistentVolumeReclaimRetain },
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimRetain || len(pv.Finalizers) != 0 {
					t.Errorf("policy %q, finalizers %v", pv.Spec.PersistentVolumeReclaimPolicy, pv.Finalizers)
				}
			}},
		{name: "explicit Delete: finalizer", claim: newClaim(), resp: volumeResp("v", 0),
			edit: func(in *PVInput) { in.ReclaimPolicy = v1.PersistentVolumeReclaimDelete },
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if !slices.Equal(pv.Finalizers, []string{storagehelpers.PVDeletionProtectionFinalizer}) {
					t.Errorf("finalizers %v", pv.Finalizers)
				}
			}},
		{name: "secret refs by kind, deletion secret annotations", claim: newClaim(), resp: volumeResp("v", 0),
			edit: func(in *PVInput) {
				in.Secrets = map[SecretKind]*v1.SecretReference{
					ProvisionerSecret: ref("prov"), ControllerPublishSecret: ref("cp"), NodeStageSecret: ref("ns"),
					NodePublishSecret: ref("np"), ControllerExpandSecret: ref("ce"), NodeExpandSecret: ref("ne"),
				}
			},
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				s := pv.Spec.CSI
				got := []*v1.SecretReference{s.ControllerPublishSecretRef, s.NodeStageSecretRef, s.NodePublishSecretRef, s.ControllerExpandSecretRef, s.NodeExpandSecretRef}
				want := []*v1.SecretReference{ref("cp"), ref("ns"), ref("np"), ref("ce"), ref("ne")}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("secret refs %v, want %v", got, want)
				}
				if pv.Annotations[AnnDeletionSecretName] != "prov" || pv.Annotations[AnnDeletionSecretNamespace] != "secrets" {
					t.Errorf("annotations %v", pv.Annotations)
				}
			}},
		{name: "a controller-modify secret: its annotations, as EP writes them", claim: newClaim(), resp: volumeResp("v", 0),
			edit: func(in *PVInput) { in.Secrets = map[SecretKind]*v1.SecretReference{ControllerModifySecret: ref("cm")} },
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if pv.Annotations[AnnModifySecretName] != "cm" || pv.Annotations[AnnModifySecretNamespace] != "secrets" {
					t.Errorf("annotations %v", pv.Annotations)
				}
			}},
		{name: "no provisioner secret: empty deletion annotations, as EP writes them", claim: newClaim(), resp: volumeResp("v", 0),
			edit: func(in *PVInput) { in.Secrets = map[SecretKind]*v1.SecretReference{NodeStageSecret: ref("ns")} },
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				name, hasName := pv.Annotations[AnnDeletionSecretName]
				ns, hasNS := pv.Annotations[AnnDeletionSecretNamespace]
				_, hasModify := pv.Annotations[AnnModifySecretName]
				if !hasName || !hasNS || name != "" || ns != "" || hasModify || pv.Spec.CSI.NodeStageSecretRef.Name != "ns" {
					t.Errorf("annotations %v, node stage ref %v", pv.Annotations, pv.Spec.CSI.NodeStageSecretRef)
				}
			}},
		{name: "class from the beta annotation", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.StorageClassName = nil
		}, claimAnn(v1.BetaStorageClassAnnotation, "slow")), resp: volumeResp("v", 0),
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if pv.Spec.StorageClassName != "slow" {
					t.Errorf("class %q", pv.Spec.StorageClassName)
				}
			}},
		{name: "the claim's VolumeAttributesClass", claim: newClaim(vacName("gold")), resp: volumeResp("v", 0),
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if got := pv.Spec.VolumeAttributesClassName; got == nil || *got != "gold" {
					t.Errorf("attributes class %v, want gold", got)
				}
			}},
		{name: "an empty VolumeAttributesClass name is none", claim: newClaim(vacName("")), resp: volumeResp("v", 0),
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				if pv.Spec.VolumeAttributesClassName != nil {
					t.Errorf("attributes class %q, want none", *pv.Spec.VolumeAttributesClassName)
				}
			}},
		{name: "node affinity from accessible topology", claim: newClaim(),
			resp: volumeResp("v", 0, &csi.Topology{Segments: kv(zone, "a", rack, "1")}),
			check: func(t *testing.T, pv *v1.PersistentVolume) {
				want := affinity([]v1.NodeSelectorRequirement{nodeIn(rack, "1"), nodeIn(zone, "a")})
				if !reflect.DeepEqual(pv.Spec.NodeAffinity, want) {
					t.Errorf("affinity %v, want %v", pv.Spec.NodeAffinity, want)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := pvInput(tt.claim)
			if tt.edit != nil {
				tt.edit(&in)
			}
			pv, err := BuildPV(tt.resp, in)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, pv)
		})
	}
}

func TestBuildPVErrors(t *testing.T) {
	tests := []struct {
		name    string
		claim   *v1.PersistentVolumeClaim
		resp    *csi.CreateVolumeResponse
		wantErr string
	}{
		{name: "nil response", resp: nil, wantErr: "no volume"},
		{name: "nil volume", resp: &csi.CreateVolumeResponse{}, wantErr: "no volume"},
		{name: "empty volume ID", resp: volumeResp("", 1<<30), wantErr: "without an ID"},
		{name: "negative capacity", resp: volumeResp("v", -1), wantErr: "negative capacity -1"},
		{name: "smallest capacity", resp: volumeResp("v", math.MinInt64), wantErr: "negative capacity"},
		{name: "capacity below the request", resp: volumeResp("v", 1<<30-1), wantErr: "less than the 1Gi requested"},
		{name: "capacity below a decimal request", claim: newClaim(requested("1G")), resp: volumeResp("v", 999_999_999), wantErr: "less than the 1G requested"},
		{name: "empty topology key", resp: volumeResp("v", 0, &csi.Topology{Segments: kv("", "a")}), wantErr: "empty key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := tt.claim
			if claim == nil {
				claim = newClaim()
			}
			pv, err := BuildPV(tt.resp, pvInput(claim))
			checkErr(t, err, tt.wantErr)
			if pv != nil {
				t.Errorf("a PV with an error: %v", pv)
			}
		})
	}
}

func nodeIn(key string, values ...string) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}
}

func affinity(terms ...[]v1.NodeSelectorRequirement) *v1.VolumeNodeAffinity {
	var ts []v1.NodeSelectorTerm
	for _, t := range terms {
		ts = append(ts, v1.NodeSelectorTerm{MatchExpressions: t})
	}
	return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: ts}}
}

func TestNodeAffinity(t *testing.T) {
	tests := []struct {
		name     string
		topology []*csi.Topology
		want     *v1.VolumeNodeAffinity
		wantErr  string
	}{
		{name: "none"},
		{name: "only empty segments", topology: []*csi.Topology{nil, {}, {Segments: map[string]string{}}}},
		{name: "one segment, keys sorted", topology: []*csi.Topology{{Segments: kv(zone, "a", host, "n1", rack, "1")}},
			want: affinity([]v1.NodeSelectorRequirement{nodeIn(host, "n1"), nodeIn(rack, "1"), nodeIn(zone, "a")})},
		{name: "one term per segment, in order, empty skipped",
			topology: []*csi.Topology{{Segments: kv(zone, "b")}, {}, {Segments: kv(zone, "a", rack, "2")}},
			want:     affinity([]v1.NodeSelectorRequirement{nodeIn(zone, "b")}, []v1.NodeSelectorRequirement{nodeIn(rack, "2"), nodeIn(zone, "a")})},
		{name: "an empty value is kept", topology: []*csi.Topology{{Segments: kv(zone, "")}},
			want: affinity([]v1.NodeSelectorRequirement{nodeIn(zone, "")})},
		{name: "empty key", topology: []*csi.Topology{{Segments: kv(zone, "a")}, {Segments: kv("", "x")}}, wantErr: "empty key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := nodeAffinity(tt.topology)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func FuzzBuildPV(f *testing.F) {
	f.Add(int64(1<<30), int64(1<<30), "vol-1", zone, "a", rack, "1")
	f.Add(int64(0), int64(5<<30), "vol-2", zone, "a", "", "")
	f.Add(int64(-1), int64(1), "", "", "x", zone, "b")
	f.Add(int64(1<<62), int64(1<<30), "v", zone, "", zone, "")
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), "v", "k", "v", "k", "w")
	f.Add(int64(999), int64(1000), "v", "", "", "", "")
	f.Fuzz(func(t *testing.T, capacity, requested int64, volumeID, k1, val1, k2, val2 string) {
		if requested < 0 {
			requested = -(requested + 1) // claims with negative requests never get this far
		}
		claim := newClaim()
		claim.Spec.Resources.Requests[v1.ResourceStorage] = *resource.NewQuantity(requested, resource.BinarySI)
		var topology []*csi.Topology
		if k1 != "" || val1 != "" {
			topology = append(topology, &csi.Topology{Segments: kv(k1, val1)})
		}
		if k2 != "" || val2 != "" {
			topology = append(topology, &csi.Topology{Segments: kv(k2, val2, k1, val2)})
		}
		pv, err := BuildPV(volumeResp(volumeID, capacity, topology...), pvInput(claim))
		if err != nil {
			if pv != nil {
				t.Errorf("a PV with the error %v", err)
			}
			return
		}
		got := pv.Spec.Capacity[v1.ResourceStorage]
		if got.Cmp(*resource.NewQuantity(requested, resource.BinarySI)) < 0 {
			t.Errorf("capacity %s below the request %d", got.String(), requested)
		}
		if capacity > 0 && got.Value() != capacity {
			t.Errorf("capacity %s, the driver said %d", got.String(), capacity)
		}
		if pv.Spec.CSI.VolumeHandle != volumeID || volumeID == "" {
			t.Errorf("handle %q for volume %q", pv.Spec.CSI.VolumeHandle, volumeID)
		}
		if pv.Spec.NodeAffinity == nil {
			return
		}
		for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
			if len(term.MatchExpressions) == 0 {
				t.Errorf("an empty node selector term: %v", pv.Spec.NodeAffinity)
			}
			for _, e := range term.MatchExpressions {
				if e.Key == "" || e.Operator != v1.NodeSelectorOpIn || len(e.Values) != 1 {
					t.Errorf("bad expression %+v", e)
				}
			}
		}
	})
}

func TestChosenFSType(t *testing.T) {
	for _, tt := range []struct{ class, def, want string }{
		{"xfs", "ext4", "xfs"},
		{"", "ext4", "ext4"},
		{"", "", ""},
	} {
		if got := ChosenFSType(ClassParams{FSType: tt.class}, tt.def); got != tt.want {
			t.Errorf("ChosenFSType(%q, %q) = %q, want %q", tt.class, tt.def, got, tt.want)
		}
	}
}
