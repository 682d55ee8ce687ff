package benchnodes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/test/cluster"
)

const (
	driverName  = cluster.LocalDriver
	topologyKey = cluster.LocalKey
	className   = "local-wffc"
	namespace   = "default"
	// epFinalizer is the PV finalizer of external-provisioner (and
	// tether's, which is EP's).
	epFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"
	// annSelectedNode is the scheduler's annotation on a WaitForFirstConsumer claim.
	annSelectedNode = "volume.kubernetes.io/selected-node"
	// protection finalizers, as the API server's StorageObjectInUseProtection
	// admission adds them (the bench turns it off and writes them itself on
	// the claims and PVs it makes as already provisioned: see startCluster).
	pvcProtection = "kubernetes.io/pvc-protection"
	pvProtection  = "kubernetes.io/pv-protection"
	volumeSize    = 1 << 30
)

// nodeName is the i-th node of the cluster.
func nodeName(i int) string { return fmt.Sprintf("node-%03d", i) }

// claimName is the i-th claim made before the provisioners start; it is
// on node i % clusterNodes.
func claimName(i int) string { return fmt.Sprintf("data-db-%06d", i) }

// writer is a client in the name of one component of the real stack: its
// user agent and field manager, so that the objects' managedFields are
// those a real cluster's objects carry; protobuf, as controllers write.
func writer(config *rest.Config, component string) kubernetes.Interface {
	c := rest.CopyConfig(config)
	c.QPS, c.Burst = 20000, 40000
	c.UserAgent = component
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfigOrDie(c)
}

// writers are the components whose writes make a provisioned claim: the
// StatefulSet controller and the binder (both kube-controller-manager), the
// scheduler (selected-node) and the provisioner.
type writers struct {
	kcm, provisioner kubernetes.Interface
}

func newWriters(config *rest.Config) writers {
	return writers{kcm: writer(config, "kube-controller-manager"), provisioner: writer(config, "csi-provisioner")}
}

// populate makes the CSIDriver, the class, the nodes (with CSINodes, as
// kubelet registers the driver) and n claims, each Bound to its PV as
// node-mode provisioning leaves them, spread over the nodes. It returns the
// names of the claims' PVs, by index.
func populate(ctx context.Context, w writers, n, nodes, conns int, progress func(done int64)) ([]string, error) {
	no, yes := false, true
	if _, err := w.kcm.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driverName},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no, StorageCapacity: &yes}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	mode, policy := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	if _, err := w.kcm.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: className},
		Provisioner: driverName, VolumeBindingMode: &mode, ReclaimPolicy: &policy}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if err := parallel(ctx, min(conns, nodes), nodes, func(i int) error {
		return cluster.AddFakeNode(ctx, w.kcm, cluster.FakeNode{Name: nodeName(i), Labels: map[string]string{topologyKey: nodeName(i)},
			Driver: driverName, TopologyKeys: []string{topologyKey}})
	}); err != nil {
		return nil, err
	}
	volumes := make([]string, n)
	var done atomic.Int64
	err := parallel(ctx, conns, n, func(i int) error {
		v, err := provisioned(ctx, w, i, nodeName(i%nodes))
		volumes[i] = v
		if d := done.Add(1); progress != nil && d%int64(max(1000, n/10)) == 0 {
			progress(d)
		}
		return err
	})
	return volumes, err
}

// provisioned makes the i-th claim and its PV as a real cluster holds them
// after node-mode provisioning: the StatefulSet controller's claim with the
// scheduler's selected-node, the binder's storage-provisioner and binding
// annotations and its volumeName; the provisioner's PV (its annotations
// and finalizer, the claimRef, the node affinity of the local driver's
// topology, the CSI source with the provisioner's identity); the binder's
// phases of both. Four writes where the real stack makes more: the claim
// is created bound, so its PV's name is pvc-<a UUID of the bench's> (the
// same length as pvc-<the claim's UID>, which is not known before the
// claim is made).
func provisioned(ctx context.Context, w writers, i int, node string) (string, error) {
	class := className
	fs := corev1.PersistentVolumeFilesystem
	size := resource.MustParse("1Gi")
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	volume := "pvc-" + string(uuid.NewUUID())
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claimName(i), Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "db", "app.kubernetes.io/instance": "db-" + node},
			Annotations: map[string]string{
				annSelectedNode:                          node,
				storagehelpers.AnnStorageProvisioner:     driverName,
				storagehelpers.AnnBetaStorageProvisioner: driverName,
				storagehelpers.AnnBindCompleted:          "yes",
				storagehelpers.AnnBoundByController:      "yes",
			},
			Finalizers: []string{pvcProtection}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: modes, VolumeMode: &fs, VolumeName: volume,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}},
	}
	claims := w.kcm.CoreV1().PersistentVolumeClaims(namespace)
	claim, err := claims.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	pv := provisionedPV(claim, volume, node, "1764270000000-4821-"+driverName+"-"+node)
	if pv, err = w.provisioner.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("PV of %s: %w", claim.Name, err)
	}
	claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: modes,
		Capacity: corev1.ResourceList{corev1.ResourceStorage: size}}
	if _, err = claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("phase of %s: %w", claim.Name, err)
	}
	pv.Status.Phase = corev1.VolumeBound
	if _, err = w.kcm.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("phase of %s: %w", pv.Name, err)
	}
	return volume, nil
}

// provisionedPV is the PV a node-mode provisioner writes for claim on
// node, named name, with its identity (EP's: start time in ms, a random number, the
// driver and the node).
func provisionedPV(claim *corev1.PersistentVolumeClaim, name, node, identity string) *corev1.PersistentVolume {
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{
				storagehelpers.AnnDynamicallyProvisioned:                     driverName,
				"volume.kubernetes.io/provisioner-deletion-secret-name":      "",
				"volume.kubernetes.io/provisioner-deletion-secret-namespace": "",
			},
			Finalizers: []string{epFinalizer, pvProtection}},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:                   claim.Spec.AccessModes,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(volumeSize, resource.BinarySI)},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              *claim.Spec.StorageClassName,
			VolumeMode:                    &fs,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace,
				Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driverName, VolumeHandle: name,
				VolumeAttributes: map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": identity}}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: topologyKey, Operator: corev1.NodeSelectorOpIn,
					Values: []string{node}}}}}}},
		},
	}
}

// seedDriver writes, in a local driver's --root, the volumes of the claims
// of one node, as the driver itself keeps them (examples/local-driver's
// README, "Layout on disk"): <root>/volumes/<id>.json and the folder
// <id>/. The driver reads them when it starts.
func seedDriver(root string, volumes []string) error {
	dir := filepath.Join(root, "volumes")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	for _, id := range volumes {
		meta, err := json.Marshal(map[string]any{"name": id, "capacityBytes": volumeSize})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, id+".json"), meta, 0o640); err != nil {
			return err
		}
		if err := os.Mkdir(filepath.Join(dir, id), 0o777); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return nil
}

// parallel runs fn(0..n-1) on conns goroutines and returns the first error.
func parallel(ctx context.Context, conns, n int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(conns, n)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					cancel(fmt.Errorf("%d: %w", i, err))
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// rate is a count over a duration, per second.
func rate(n int, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(n)/d.Seconds(), 'f', 0, 64)
}
