package request

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

// AnnProvisionerIdentity is the volume attribute that names the
// provisioner instance that made a volume, as external-provisioner sets it.
const AnnProvisionerIdentity = "storage.kubernetes.io/csiProvisionerIdentity"

// PVInput is what a PV is built from, besides the driver's answer.
type PVInput struct {
	Name          string
	Driver        string
	Identity      string
	Claim         *v1.PersistentVolumeClaim
	ReclaimPolicy v1.PersistentVolumeReclaimPolicy
	MountOptions  []string
	FSType        string
	// Secrets are the resolved references the PV carries, by kind.
	Secrets map[SecretKind]*v1.SecretReference
	// ControllerPublishReadOnly is Options.ControllerPublishReadOnly.
	ControllerPublishReadOnly bool
}

// PublishReadOnly reports whether the PV of a claim with these access
// modes gets csi.readOnly, the readonly field an attacher passes to
// ControllerPublishVolume. As external-provisioner: only with
// --controller-publish-readonly, and only when ReadOnlyMany is the claim's
// one access mode (its request's one capability is MULTI_NODE_READER_ONLY),
// whatever the volume mode. Kubelet does not read the field: the mount a
// pod gets is read-only by the pod's own readOnly, or by the driver.
func PublishReadOnly(modes []v1.PersistentVolumeAccessMode, controllerPublishReadOnly bool) bool {
	return controllerPublishReadOnly && len(modes) == 1 && modes[0] == v1.ReadOnlyMany
}

// BuildPV turns a CreateVolume answer into the PV to save. It is pure. The
// PV is pre-bound (claimRef with the claim's UID) so that only that claim
// can bind it; the binder completes the binding. A malformed answer is an
// error; the caller then deletes the volume, which it knows by name.
func BuildPV(resp *csi.CreateVolumeResponse, in PVInput) (*v1.PersistentVolume, error) {
	if resp == nil || resp.Volume == nil {
		return nil, errors.New("the driver returned no volume")
	}
	vol := resp.Volume
	if vol.VolumeId == "" {
		return nil, errors.New("the driver returned a volume without an ID")
	}
	requested := in.Claim.Spec.Resources.Requests[v1.ResourceStorage]
	size := requested.DeepCopy()
	switch {
	case vol.CapacityBytes < 0:
		return nil, fmt.Errorf("the driver returned a negative capacity %d", vol.CapacityBytes)
	case vol.CapacityBytes > 0:
		size = *resource.NewQuantity(vol.CapacityBytes, resource.BinarySI)
		if size.Cmp(requested) < 0 {
			return nil, fmt.Errorf("the driver made a volume of %s, less than the %s requested", size.String(), requested.String())
		}
	}
	affinity, err := nodeAffinity(vol.AccessibleTopology)
	if err != nil {
		return nil, err
	}
	attrs := maps.Clone(vol.VolumeContext)
	if attrs == nil {
		attrs = map[string]string{}
	}
	attrs[AnnProvisionerIdentity] = in.Identity
	source := &v1.CSIPersistentVolumeSource{
		Driver:                     in.Driver,
		VolumeHandle:               vol.VolumeId,
		VolumeAttributes:           attrs,
		ControllerPublishSecretRef: in.Secrets[ControllerPublishSecret],
		NodeStageSecretRef:         in.Secrets[NodeStageSecret],
		NodePublishSecretRef:       in.Secrets[NodePublishSecret],
		ControllerExpandSecretRef:  in.Secrets[ControllerExpandSecret],
		NodeExpandSecretRef:        in.Secrets[NodeExpandSecret],
		ReadOnly:                   PublishReadOnly(in.Claim.Spec.AccessModes, in.ControllerPublishReadOnly),
	}
	if !isBlock(in.Claim) {
		source.FSType = in.FSType
	}
	policy := in.ReclaimPolicy
	if policy == "" {
		policy = v1.PersistentVolumeReclaimDelete
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        in.Name,
			Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: in.Driver},
		},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: size},
			AccessModes:                   slices.Clone(in.Claim.Spec.AccessModes),
			PersistentVolumeReclaimPolicy: policy,
			MountOptions:                  slices.Clone(in.MountOptions),
			VolumeMode:                    copyMode(in.Claim.Spec.VolumeMode),
			NodeAffinity:                  affinity,
			StorageClassName:              storagehelpers.GetPersistentVolumeClaimClass(in.Claim),
			ClaimRef: &v1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: in.Claim.Namespace, Name: in.Claim.Name, UID: in.Claim.UID,
				ResourceVersion: in.Claim.ResourceVersion,
			},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: source},
		},
	}
	// As external-provisioner: the volume was made with the parameters of
	// the claim's VolumeAttributesClass, so the PV names it (the binder
	// matches on it, and copies it to the claim's status when it binds).
	if vac := in.Claim.Spec.VolumeAttributesClassName; vac != nil && *vac != "" {
		pv.Spec.VolumeAttributesClassName = ptr.To(*vac)
	}
	if policy == v1.PersistentVolumeReclaimDelete {
		pv.Finalizers = []string{storagehelpers.PVDeletionProtectionFinalizer}
	}
	// As external-provisioner: the deletion secret's annotations are always
	// written, empty for none (so that deletion does not read the class
	// again), and the modify secret's when the class names one.
	deletion := in.Secrets[ProvisionerSecret]
	if deletion == nil {
		deletion = &v1.SecretReference{}
	}
	pv.Annotations[AnnDeletionSecretName] = deletion.Name
	pv.Annotations[AnnDeletionSecretNamespace] = deletion.Namespace
	if ref := in.Secrets[ControllerModifySecret]; ref != nil {
		pv.Annotations[AnnModifySecretName] = ref.Name
		pv.Annotations[AnnModifySecretNamespace] = ref.Namespace
	}
	return pv, nil
}

// nodeAffinity turns accessible topology into a required node affinity:
// one term per segment, one In expression per key. A segment with an empty
// key is malformed; an empty segment is skipped.
func nodeAffinity(topology []*csi.Topology) (*v1.VolumeNodeAffinity, error) {
	var terms []v1.NodeSelectorTerm
	for _, t := range topology {
		if t == nil || len(t.Segments) == 0 {
			continue
		}
		var exprs []v1.NodeSelectorRequirement
		for _, k := range slices.Sorted(maps.Keys(t.Segments)) {
			if k == "" {
				return nil, errors.New("the driver returned a topology segment with an empty key")
			}
			exprs = append(exprs, v1.NodeSelectorRequirement{Key: k, Operator: v1.NodeSelectorOpIn, Values: []string{t.Segments[k]}})
		}
		terms = append(terms, v1.NodeSelectorTerm{MatchExpressions: exprs})
	}
	if len(terms) == 0 {
		return nil, nil
	}
	return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: terms}}, nil
}

func copyMode(m *v1.PersistentVolumeMode) *v1.PersistentVolumeMode {
	if m == nil {
		return nil
	}
	c := *m
	return &c
}

// ChosenFSType is the filesystem a PV of a class records: the class's fstype
// parameter, else defaultFSType (--default-fstype).
func ChosenFSType(params ClassParams, defaultFSType string) string {
	if params.FSType != "" {
		return params.FSType
	}
	return defaultFSType
}

// ReclaimPolicy is the policy of a class's volumes: Delete when it names none.
func ReclaimPolicy(class *storagev1.StorageClass) v1.PersistentVolumeReclaimPolicy {
	if class.ReclaimPolicy == nil {
		return v1.PersistentVolumeReclaimDelete
	}
	return *class.ReclaimPolicy
}

// isBlock reports whether the claim asks for a raw block volume.
func isBlock(claim *v1.PersistentVolumeClaim) bool {
	return claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == v1.PersistentVolumeBlock
}
