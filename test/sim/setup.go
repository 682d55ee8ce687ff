package sim

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The classes of the simulated cluster.
const (
	classImmediate = "imm"
	classWFFC      = "wffc"
	classSecret    = "ns-secret" // its provisioner secret is in the claim's namespace
	classRetain    = "keep"
	vacGold        = "gold"
	secretName     = "sim-secret"
)

var nodeNames = []string{"node-1", "node-2"}

func (w *World) create(obj runtime.Object) {
	if _, err := w.api.Create(obj); err != nil {
		panic(err)
	}
}

// setup makes the cluster every schedule starts from.
func (w *World) setup() {
	for _, ns := range []string{"kube-system"} {
		w.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	w.addNamespace()
	w.addNamespace()
	for _, c := range []string{classImmediate, classWFFC, classSecret, classRetain} {
		w.create(w.class(c, 0))
	}
	for _, n := range nodeNames {
		w.addNode(n)
	}
	w.create(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driverName}})
	w.create(&storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: vacGold}, DriverName: driverName,
		Parameters: map[string]string{"iops": "100"}})
}

func (w *World) addNamespace() string {
	w.nsSeq++
	name := fmt.Sprintf("ns-%d", w.nsSeq)
	w.create(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	w.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: name}, Data: map[string][]byte{"key": []byte("v")}})
	return name
}

// zoneKey is the zone label of the simulated nodes: node-1 is alone in
// zone-a, node-2 in zone-b, until the autoscaler adds a node to either.
const zoneKey = "topology.kubernetes.io/zone"

func zoneOf(node string) string {
	if node == "node-1" {
		return "zone-a"
	}
	return "zone-b"
}

func (w *World) addNode(name string) {
	w.create(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodeLabels(name)}})
	w.create(&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{
		Drivers: []storagev1.CSINodeDriver{{Name: driverName, NodeID: name, TopologyKeys: []string{topologyKey}}}}})
}

// class is one of the classes, at a generation (a re-created class may
// carry other parameters).
func (w *World) class(name string, gen int) *storagev1.StorageClass {
	mode := storagev1.VolumeBindingImmediate
	policy := v1.PersistentVolumeReclaimDelete
	params := map[string]string{"type": "ssd"}
	if gen > 0 {
		params["gen"] = fmt.Sprint(gen)
	}
	if w.cfg.Node {
		// Node-local volumes: every class waits for the scheduler's node.
		mode = storagev1.VolumeBindingWaitForFirstConsumer
	}
	switch name {
	case classWFFC:
		mode = storagev1.VolumeBindingWaitForFirstConsumer
	case classSecret:
		params["csi.storage.k8s.io/provisioner-secret-name"] = secretName
		params["csi.storage.k8s.io/provisioner-secret-namespace"] = "${pvc.namespace}"
	case classRetain:
		policy = v1.PersistentVolumeReclaimRetain
	}
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: policyAnnotations(name)}, Provisioner: driverName,
		Parameters: params, ReclaimPolicy: &policy, VolumeBindingMode: &mode}
}

func (w *World) newClaim(ns, class string, size string) *v1.PersistentVolumeClaim {
	w.claimSeq++
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", w.claimSeq), Namespace: ns},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &class,
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}}},
	}
}
