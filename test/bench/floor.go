package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
)

// The floor: the API writes that a pipeline makes for one claim, made by a
// plain client with no controller, no cache and no decision, as many claims
// at once as the caller runs. The time they take is the least any
// controller making the same writes could take on the same API server, so
// a pipeline's rate as a fraction of the floor's says how much of its time
// is its own.

// WatchingFloor names the floor with a binder's watches: the floor's
// writes, made while informers on volumes and claims (a controller's least
// equipment) receive and decode every event they cause. What it costs the
// API server and the process beyond the floor is what any watching
// controller pays.
const WatchingFloor = "floor+watch"

// FloorClient is a client for the floor's writes in the name of one
// component of the pipeline: its own user agent, so that the API server
// records its writes under a field manager apart from the one that created
// the objects (as it does the binder's and the provisioner's), protobuf as
// theirs, and no client-side rate limit.
func FloorClient(config *rest.Config, component string) kubernetes.Interface {
	c := rest.CopyConfig(config)
	c.QPS, c.Burst = 20000, 40000
	c.UserAgent = "floor-" + component
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfigOrDie(c)
}

// ProvisionClients are the floor's two writers of a provisioned claim:
// what tether's binder writes and what its provisioner writes.
type ProvisionClients struct {
	Binder, Provisioner kubernetes.Interface
}

// BindWrites makes the four writes that bind a claim to an Available volume,
// in the order and with the content of the binder's (pkg/binder): the
// volume's claimRef, the volume's phase, the claim's volumeName and
// annotations, the claim's phase. Each write starts from the object the
// previous one returned, as the binder's does from its cache.
func BindWrites(ctx context.Context, cs kubernetes.Interface, pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	p := pv.DeepCopy()
	metav1.SetMetaDataAnnotation(&p.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
	p.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
		Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion}
	p, err := cs.CoreV1().PersistentVolumes().Update(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("volume %s claimRef: %w", pv.Name, err)
	}
	p.Status.Phase = corev1.VolumeBound
	if p, err = cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("volume %s phase: %w", pv.Name, err)
	}
	return bindClaim(ctx, cs, claim, p)
}

// bindClaim makes the claim's two writes of a binding: volumeName and
// annotations (and, when the provisioner's in-flight record is there, its
// removal), then phase, access modes and capacity.
func bindClaim(ctx context.Context, cs kubernetes.Interface, claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	c := claim.DeepCopy()
	c.Spec.VolumeName = pv.Name
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
	c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == inflight.Finalizer })
	delete(c.Annotations, inflight.AnnVolume)
	delete(c.Annotations, inflight.AnnDriver)
	c, err := cs.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("claim %s volumeName: %w", claim.Name, err)
	}
	c.Status.Phase = corev1.ClaimBound
	c.Status.AccessModes = pv.Spec.AccessModes
	c.Status.Capacity = maps.Clone(pv.Spec.Capacity)
	if _, err := cs.CoreV1().PersistentVolumeClaims(c.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("claim %s phase: %w", claim.Name, err)
	}
	return nil
}

// ProvisionWrites makes, for a claim just created, the writes that tether's
// binder and provisioner make to provision and bind it (counted by the
// provisioner bench): the binder's storage-provisioner annotations, the
// provisioner's in-flight record, the PV, the PV's phase, the claim's
// binding (which drops the record) and the claim's phase; with event, the
// provisioner's ProvisioningSucceeded event too.
func ProvisionWrites(ctx context.Context, cs ProvisionClients, claim *corev1.PersistentVolumeClaim, driver string, event bool) error {
	c := claim.DeepCopy()
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnStorageProvisioner, driver)
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnBetaStorageProvisioner, driver)
	c, err := cs.Binder.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("claim %s provisioner annotation: %w", claim.Name, err)
	}
	name := "pvc-" + string(c.UID)
	c.Finalizers = append(c.Finalizers, inflight.Finalizer)
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, inflight.AnnVolume, name)
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, inflight.AnnDriver, driver)
	if c, err = cs.Provisioner.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("claim %s in-flight record: %w", claim.Name, err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: driver},
			Finalizers:  []string{"external-provisioner.volume.kubernetes.io/finalizer"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      c.Spec.Resources.Requests,
			AccessModes:                   c.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              *c.Spec.StorageClassName,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: c.Namespace, Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: name, FSType: "ext4",
				VolumeAttributes: map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "floor-" + driver}}},
		},
	}
	if pv, err = cs.Provisioner.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	if event {
		e := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: c.Name + ".", Namespace: c.Namespace},
			InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			Reason:         "ProvisioningSucceeded", Type: corev1.EventTypeNormal,
			Message: "Successfully provisioned volume " + name, Source: corev1.EventSource{Component: driver},
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
		}
		if _, err := cs.Provisioner.CoreV1().Events(c.Namespace).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("event on claim %s: %w", c.Name, err)
		}
	}
	pv.Status.Phase = corev1.VolumeBound
	if pv, err = cs.Binder.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("volume %s phase: %w", name, err)
	}
	return bindClaim(ctx, cs.Binder, c, pv)
}
