package sim

import (
	"context"
	"errors"
	"fmt"

	"github.com/tether-csi/tether/pkg/provisioner/libv8"
	"github.com/tether-csi/tether/pkg/provisioner/records"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

// library models sig-storage-lib-external-provisioner v8's
// ProvisionController as tether configures it (cmd/provisioner/main.go:
// AddFinalizer, CreateProvisionedPVLimiter, FailedProvisionThreshold 0,
// QuietClaims and CopyingVolumes informers, SelectedNodes), written after
// its source (controller/controller.go and volume_store.go of v8.0.0), not
// copied: its goroutines and wall-clock retries become the simulator's
// queues. What it keeps:
//   - syncClaim: a claim is provisioned when it has no volumeName, the
//     Qualifier (ShouldProvision) agrees, its storage-provisioner
//     annotation (or the beta one) names the driver, its class can be read,
//     and, for a WaitForFirstConsumer class, it has a selected node;
//   - provisionClaimOperation: skip when a PV of the library's name
//     (pvc-<uid>) is in the volume cache; the class's provisioner must be
//     the driver; the selected node from the node lister (an error is
//     NoChange); then Provision, whose state decides: an IgnoredError stops;
//     Reschedule with a selected node removes the annotation with an Update
//     of the library's claim copy and puts that copy in the claim store;
//     InBackground keeps the claim in memory (claimsInProgress) for
//     retries after it is gone from the cache; errors are retried;
//   - a returned PV gets the claimRef of the library's claim copy, the
//     deletion finalizer, pv.kubernetes.io/provisioned-by and the class
//     name, and is saved by the queue store: one Create; on failure the
//     PV is kept in memory and retried on a rate-limited queue, and in both
//     cases added, resourceVersion-less, to the volume store;
//   - syncVolume: the deletion finalizer is added to a Delete PV (not being
//     deleted) and removed from a Retain one, with an Update; a Released
//     Delete PV of this provisioner that ShouldDelete accepts is deleted
//     through Provisioner.Delete, then the PV is deleted and its finalizer
//     removed from the cache's copy with an Update.
type library struct {
	p *provProc
	// prov is the provisioner the library calls: tether's, or the model
	// of external-provisioner's (upstream.go).
	prov     libProvisioner
	client   kubernetes.Interface
	claimQ   *queue // claim UIDs
	volumeQ  *queue // PV names
	saveQ    *queue // unsaved PV names
	unsaved  map[string]*v1.PersistentVolume
	progress map[string]*v1.PersistentVolumeClaim
	claims   cache.SharedIndexInformer // QuietClaims
	volumes  *libv8.Volumes            // CopyingVolumes
}

const finalizerPV = "external-provisioner.volume.kubernetes.io/finalizer"

// libProvisioner is what the library calls of a provisioner.
type libProvisioner interface {
	ShouldProvision(context.Context, *v1.PersistentVolumeClaim) bool
	Provision(context.Context, controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error)
	Delete(context.Context, *v1.PersistentVolume) error
	ShouldDelete(context.Context, *v1.PersistentVolume) bool
}

func newLibrary(p *provProc, prov libProvisioner, client kubernetes.Interface) *library {
	w := p.w
	l := &library{p: p, prov: prov, client: client,
		claimQ: newQueue(w, "library-claims"+p.suffix()), volumeQ: newQueue(w, "library-volumes"+p.suffix()),
		saveQ:   newQueue(w, "library-save"+p.suffix()),
		unsaved: map[string]*v1.PersistentVolume{}, progress: map[string]*v1.PersistentVolumeClaim{},
		claims:  libv8.QuietClaims(p.caches.inf[rClaims]),
		volumes: libv8.CopyingVolumes(p.caches.inf[rVolumes])}
	enqueueClaim := func(obj any) {
		if c, ok := obj.(*v1.PersistentVolumeClaim); ok {
			l.claimQ.Add(string(c.UID))
		}
	}
	_, _ = l.claims.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueueClaim,
		UpdateFunc: func(_, obj any) { enqueueClaim(obj) }})
	enqueueVolume := func(obj any) {
		if pv, ok := obj.(*v1.PersistentVolume); ok {
			l.volumeQ.Add(pv.Name)
		}
	}
	_, _ = l.volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueueVolume,
		UpdateFunc: func(_, obj any) { enqueueVolume(obj) }})
	return l
}

var errStop = errors.New("stop provisioning")

func (l *library) claimByUID(uid string) *v1.PersistentVolumeClaim {
	for _, obj := range l.claims.GetStore().List() {
		if c := obj.(*v1.PersistentVolumeClaim); string(c.UID) == uid {
			return c
		}
	}
	return l.progress[uid]
}

func (l *library) syncClaim(ctx context.Context, uid string) error {
	claim := l.claimByUID(uid)
	if claim == nil {
		return nil
	}
	should, err := l.shouldProvision(ctx, claim)
	if err != nil || !should {
		return err
	}
	state, err := l.provision(ctx, claim)
	if err == nil || state == controller.ProvisioningFinished {
		delete(l.progress, uid)
		if errors.Is(err, errStop) {
			return nil
		}
		return err
	}
	if state == controller.ProvisioningInBackground {
		l.progress[uid] = claim
	}
	return err
}

func (l *library) class(name string) (*storagev1.StorageClass, error) {
	obj, ok, err := l.p.caches.inf[rClasses].indexer.GetByKey(name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("storageClass %q not found", name)
	}
	return obj.(*storagev1.StorageClass), nil
}

func (l *library) shouldProvision(ctx context.Context, claim *v1.PersistentVolumeClaim) (bool, error) {
	if claim.Spec.VolumeName != "" || !l.prov.ShouldProvision(ctx, claim) {
		return false, nil
	}
	prov, found := claim.Annotations[storagehelpers.AnnStorageProvisioner]
	if !found {
		prov, found = claim.Annotations[storagehelpers.AnnBetaStorageProvisioner]
	}
	if !found || prov != driverName {
		return false, nil
	}
	class, err := l.class(storagehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil {
		return false, err
	}
	if class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
		return claim.Annotations[storagehelpers.AnnSelectedNode] != "", nil
	}
	return true, nil
}

func (l *library) provision(ctx context.Context, claim *v1.PersistentVolumeClaim) (controller.ProvisioningState, error) {
	pvName := "pvc-" + string(claim.UID)
	if _, exists, _ := l.volumes.GetStore().GetByKey(pvName); exists {
		return controller.ProvisioningFinished, errStop
	}
	className := storagehelpers.GetPersistentVolumeClaimClass(claim)
	class, err := l.class(className)
	if err != nil {
		return controller.ProvisioningFinished, err
	}
	if class.Provisioner != driverName {
		return controller.ProvisioningFinished, errStop
	}
	var node *v1.Node
	if name := claim.Annotations[storagehelpers.AnnSelectedNode]; name != "" {
		if node, err = libv8.SelectedNodes(l.p.nodeLister).Get(name); err != nil {
			return controller.ProvisioningNoChange, err
		}
	}
	pv, state, err := l.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: class, PVName: pvName, PVC: claim, SelectedNode: node})
	if err != nil {
		l.p.w.tracef("  library: Provision %s: %v (%v)", claim.Name, stateName(state), err)
		if errors.As(err, new(records.StaleError)) {
			l.p.w.staleRetries++
		}
		var ignored *controller.IgnoredError
		if errors.As(err, &ignored) {
			return controller.ProvisioningFinished, errStop
		}
		if _, ok := claim.Annotations[storagehelpers.AnnSelectedNode]; ok && state == controller.ProvisioningReschedule {
			c := claim.DeepCopy()
			delete(c.Annotations, storagehelpers.AnnSelectedNode)
			if _, uerr := l.client.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{}); uerr != nil {
				return controller.ProvisioningFinished, err
			}
			_ = l.claims.GetStore().Update(c)
			return controller.ProvisioningFinished, errStop
		}
		if state == controller.ProvisioningReschedule {
			state = controller.ProvisioningFinished
		}
		return state, err
	}
	pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace,
		Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion}
	if !hasString(pv.Finalizers, finalizerPV) {
		pv.Finalizers = append(pv.Finalizers, finalizerPV)
	}
	metav1.SetMetaDataAnnotation(&pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned, class.Provisioner)
	pv.Spec.StorageClassName = className
	if err := l.save(ctx, pv); err != nil {
		l.unsaved[pv.Name] = pv
		l.saveQ.Add(pv.Name)
	}
	_ = l.volumes.GetStore().Add(pv)
	return controller.ProvisioningFinished, nil
}

func stateName(s controller.ProvisioningState) string {
	return string(s)
}

func (l *library) save(ctx context.Context, pv *v1.PersistentVolume) error {
	_, err := l.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// syncSave is one retry of the queue store.
func (l *library) syncSave(ctx context.Context, name string) error {
	pv := l.unsaved[name]
	if pv == nil {
		return nil
	}
	if err := l.save(ctx, pv); err != nil {
		return err
	}
	delete(l.unsaved, name)
	return nil
}

func (l *library) syncVolume(ctx context.Context, name string) error {
	obj, exists, err := l.volumes.GetStore().GetByKey(name)
	if err != nil || !exists {
		return err
	}
	pv := obj.(*v1.PersistentVolume)
	fins, modified := pv.Finalizers, false
	policy := pv.Spec.PersistentVolumeReclaimPolicy
	if policy == v1.PersistentVolumeReclaimRetain || policy == v1.PersistentVolumeReclaimRecycle {
		fins, modified = removeString(pv.Finalizers, finalizerPV)
	}
	if policy == v1.PersistentVolumeReclaimDelete && pv.DeletionTimestamp == nil && !hasString(pv.Finalizers, finalizerPV) {
		fins, modified = append(append([]string{}, pv.Finalizers...), finalizerPV), true
	}
	if modified && l.ours(pv) {
		pv.Finalizers = fins
		out, err := l.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("failed to modify finalizers: %w", err)
		}
		pv = out
	}
	if !l.shouldDelete(ctx, pv) {
		return nil
	}
	l.p.w.deleting = pv.Name
	err = l.prov.Delete(ctx, pv)
	l.p.w.deleting = ""
	if err != nil {
		var ignored *controller.IgnoredError
		if errors.As(err, &ignored) {
			return nil
		}
		return err
	}
	if err := l.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if len(pv.Finalizers) > 0 {
		obj, exists, err := l.volumes.GetStore().GetByKey(pv.Name)
		if err != nil || !exists {
			return err
		}
		cached := obj.(*v1.PersistentVolume)
		if fins, ok := removeString(cached.Finalizers, finalizerPV); ok {
			cached.Finalizers = fins
			if _, err := l.client.CoreV1().PersistentVolumes().Update(ctx, cached, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	_ = l.volumes.GetStore().Delete(pv)
	return nil
}

func (l *library) ours(pv *v1.PersistentVolume) bool {
	return pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] == driverName || pv.Annotations[storagehelpers.AnnMigratedTo] == driverName
}

func (l *library) shouldDelete(ctx context.Context, pv *v1.PersistentVolume) bool {
	if !l.prov.ShouldDelete(ctx, pv) {
		return false
	}
	if !hasString(pv.Finalizers, finalizerPV) && pv.DeletionTimestamp != nil {
		return false
	}
	return pv.Status.Phase == v1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete && l.ours(pv)
}

func hasString(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func removeString(s []string, x string) ([]string, bool) {
	var out []string
	found := false
	for _, v := range s {
		if v == x {
			found = true
		} else {
			out = append(out, v)
		}
	}
	return out, found
}
