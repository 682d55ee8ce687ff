package provisioner

import (
	"errors"
	"maps"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tether-csi/tether/pkg/provisioner/libv8"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// failingVACs is a VolumeAttributesClass lister whose reads fail.
type failingVACs struct {
	storagelisters.VolumeAttributesClassLister
}

func (failingVACs) Get(string) (*storagev1.VolumeAttributesClass, error) {
	return nil, errors.New("cache not synced")
}

// prepare with a claim's VolumeAttributesClass: what the request carries,
// or why there is none.
func TestPrepareVolumeAttributesClass(t *testing.T) {
	vacs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, v := range []*storagev1.VolumeAttributesClass{
		newVAC("gold", driverNm, kv("iops", "3000", "throughput", "125")),
		newVAC("foreign", "other.csi", kv("iops", "1")),
	} {
		if err := vacs.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	lister := storagelisters.NewVolumeAttributesClassLister(vacs)
	tests := []struct {
		name        string
		claim       *v1.PersistentVolumeClaim
		noLister    bool
		lister      storagelisters.VolumeAttributesClassLister
		noModify    bool
		cleanUp     bool
		wantMutable map[string]string
		wantErr     string
	}{
		{name: "no attributes class", claim: newClaim()},
		{name: "the class's parameters", claim: newClaim(vacName("gold")), wantMutable: kv("iops", "3000", "throughput", "125")},
		// As external-provisioner: an error, which the library retries.
		{name: "a class that does not exist", claim: newClaim(vacName("platinum")),
			wantErr: `reading the VolumeAttributesClass platinum: volumeattributesclass.storage.k8s.io "platinum" not found`},
		{name: "a class of another driver", claim: newClaim(vacName("foreign")), wantErr: `is for the driver "other.csi"`},
		{name: "a driver without MODIFY_VOLUME", claim: newClaim(vacName("gold")), noModify: true, wantErr: "MODIFY_VOLUME"},
		{name: "a failing read", claim: newClaim(vacName("gold")), lister: failingVACs{}, wantErr: "cache not synced"},
		{name: "no lister", claim: newClaim(vacName("gold")), noLister: true, wantErr: "this provisioner does not read those"},
		{name: "a selector", claim: newClaim(selector), wantErr: "claim Selector is not supported"},
		// The clean-up of a deleted claim only has to find its volume again.
		{name: "clean-up: the class's parameters", claim: newClaim(vacName("gold")), cleanUp: true,
			wantMutable: kv("iops", "3000", "throughput", "125")},
		{name: "clean-up: a class that is gone", claim: newClaim(vacName("platinum")), cleanUp: true},
		{name: "clean-up: a class of another driver", claim: newClaim(vacName("foreign")), cleanUp: true},
		{name: "clean-up: a driver without MODIFY_VOLUME", claim: newClaim(vacName("gold")), noModify: true, cleanUp: true,
			wantMutable: kv("iops", "3000", "throughput", "125")},
		{name: "clean-up: a selector", claim: newClaim(selector), cleanUp: true},
		{name: "clean-up: a failing read", claim: newClaim(vacName("gold")), lister: failingVACs{}, cleanUp: true, wantErr: "cache not synced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Driver: cloneDriver{}, ModifyVolume: !tt.noModify, VolumeAttributesClasses: lister,
				Request: request.Options{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: -1}}
			if tt.lister != nil {
				o.VolumeAttributesClasses = tt.lister
			}
			if tt.noLister {
				o.VolumeAttributesClasses = nil
			}
			p := &Provisioner{o: o}
			prep, err := p.prepare(t.Context(), prepareInput{Claim: tt.claim, Class: newClass(kv("type", "ssd")), Name: "pvc-" + testUID,
				CleanUp: tt.cleanUp})
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			got := prep.req.MutableParameters
			if (got == nil) != (tt.wantMutable == nil) || !maps.Equal(got, tt.wantMutable) {
				t.Errorf("mutable parameters %v, want %v", got, tt.wantMutable)
			}
			if !maps.Equal(prep.req.Parameters, kv("type", "ssd")) {
				t.Errorf("parameters %v", prep.req.Parameters)
			}
		})
	}
}

// A selected node that cannot take the volume (gone, without CSINode, or
// without the driver) makes Provision ask the scheduler to pick again,
// before any CreateVolume and without an in-flight record.
func TestProvisionReschedules(t *testing.T) {
	const nodeName = "node-1"
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: kv("topology.tether.dev/zone", "a")}}
	csiNode := func(drivers ...string) *storagev1.CSINode {
		cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		for _, d := range drivers {
			cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: nodeName,
				TopologyKeys: []string{"topology.tether.dev/zone"}})
		}
		return cn
	}
	tests := []struct {
		name      string
		node      *v1.Node
		csiNode   *storagev1.CSINode
		csiNodes  storagelisters.CSINodeLister // overrides csiNode
		topology  bool
		wantState controller.ProvisioningState
		wantErr   string
		wantCalls int
	}{
		{name: "the node has the driver", node: node, csiNode: csiNode(driverNm), topology: true,
			wantState: controller.ProvisioningFinished, wantCalls: 1},
		{name: "the node is gone", csiNode: csiNode(driverNm), topology: true,
			wantState: controller.ProvisioningReschedule, wantErr: "the selected node node-1 is gone"},
		{name: "the node and its CSINode are gone", topology: true,
			wantState: controller.ProvisioningReschedule, wantErr: "the selected node node-1 is gone"},
		{name: "no CSINode", node: node, topology: true,
			wantState: controller.ProvisioningReschedule, wantErr: "the selected node node-1 has no CSINode"},
		{name: "the driver is not on the node", node: node, csiNode: csiNode("other.csi"), topology: true,
			wantState: controller.ProvisioningReschedule, wantErr: "the driver csi.tether.dev is not registered on the selected node node-1"},
		{name: "a CSINode read that fails is retried in place", node: node, csiNodes: failingCSINodes{}, topology: true,
			wantState: controller.ProvisioningFinished, wantErr: "CSINode of the selected node node-1: the API is away"},
		// A driver without topology does not look at the node, as in
		// external-provisioner.
		{name: "without topology, a node that is gone", wantState: controller.ProvisioningFinished, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			csiNodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if tt.csiNode != nil {
				if err := csiNodes.Add(tt.csiNode); err != nil {
					t.Fatal(err)
				}
			}
			e := newEnv(t, func(o *Options) {
				o.Topology = tt.topology
				o.CSINodes = storagelisters.NewCSINodeLister(csiNodes)
				if tt.csiNodes != nil {
					o.CSINodes = tt.csiNodes
				}
			})
			if tt.node != nil {
				if err := e.nodes.Add(tt.node); err != nil {
					t.Fatal(err)
				}
			}
			claim := e.createClaim(newClaim(claimAnn(storagehelpers.AnnSelectedNode, nodeName)))
			// The library reads the selected node through SelectedNodes.
			selected, err := libv8.SelectedNodes(corelisters.NewNodeLister(e.nodes)).Get(nodeName)
			if err != nil {
				t.Fatal(err)
			}
			_, state, err := e.p.Provision(e.ctx, controller.ProvisionOptions{StorageClass: e.class, PVC: claim, SelectedNode: selected})
			if state != tt.wantState {
				t.Errorf("state %v, want %v", state, tt.wantState)
			}
			checkErr(t, err, tt.wantErr)
			if got := e.driver.createCount(); got != tt.wantCalls {
				t.Errorf("%d CreateVolume calls, want %d", got, tt.wantCalls)
			}
			if tt.wantCalls == 0 && inflight.Holds(e.apiClaim(testClaim)) {
				t.Error("an in-flight record without a CreateVolume")
			}
		})
	}
}

type failingCSINodes struct{ storagelisters.CSINodeLister }

func (failingCSINodes) Get(string) (*storagev1.CSINode, error) {
	return nil, errors.New("the API is away")
}
func (failingCSINodes) List(labels.Selector) ([]*storagev1.CSINode, error) {
	return nil, errors.New("the API is away")
}

// Provision of a claim with a VolumeAttributesClass: CreateVolume carries
// the class's parameters as mutable_parameters and the PV names the class.
func TestProvisionVolumeAttributesClass(t *testing.T) {
	vacs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := vacs.Add(newVAC("gold", driverNm, kv("iops", "3000"))); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *Options) {
		o.ModifyVolume = true
		o.VolumeAttributesClasses = storagelisters.NewVolumeAttributesClassLister(vacs)
	})
	claim := e.createClaim(newClaim(vacName("gold")))
	pv, state, err := e.provision(claim)
	if err != nil || state != controller.ProvisioningFinished {
		t.Fatalf("Provision: %v, %v", state, err)
	}
	if got := ptr.Deref(pv.Spec.VolumeAttributesClassName, ""); got != "gold" {
		t.Errorf("PV attributes class %q, want gold", got)
	}
	if got := e.driver.creates[0].MutableParameters; !maps.Equal(got, kv("iops", "3000")) {
		t.Errorf("mutable parameters %v", got)
	}

	missing := e.createClaim(newClaim(vacName("platinum"), func(c *v1.PersistentVolumeClaim) { c.Name, c.UID = "other", "uid-other" }))
	if _, _, err := e.provision(missing); err == nil {
		t.Fatal("a claim naming a missing VolumeAttributesClass was provisioned")
	}
	if n := e.driver.createCount(); n != 1 || inflight.Holds(e.apiClaim("other")) {
		t.Errorf("%d CreateVolume calls, in-flight record %v; want none for the missing class", n, inflight.Holds(e.apiClaim("other")))
	}
}

func TestSelectedNodes(t *testing.T) {
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	real := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "here", Labels: map[string]string{"a": "b"}}}
	if err := nodes.Add(real); err != nil {
		t.Fatal(err)
	}
	l := libv8.SelectedNodes(corelisters.NewNodeLister(nodes))
	if got, err := l.Get("here"); err != nil || got != real {
		t.Errorf("Get(here) = %v, %v; want the node", got, err)
	}
	got, err := l.Get("gone")
	if err != nil || got.Name != "gone" || len(got.Labels) != 0 {
		t.Errorf("Get(gone) = %v, %v; want a node with only its name", got, err)
	}
	if all, err := l.List(labels.Everything()); err != nil || len(all) != 1 {
		t.Errorf("List = %v, %v", all, err)
	}
	if state := prepareState(&rescheduleError{errors.New("x")}); state != controller.ProvisioningReschedule {
		t.Errorf("prepareState(reschedule) = %v", state)
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "n")
	if state := prepareState(notFound); state != controller.ProvisioningFinished {
		t.Errorf("prepareState(other) = %v", state)
	}
}
