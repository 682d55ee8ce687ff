package scope_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/scope"
)

// The generator draws claims and PVs field by field from what the scope
// and its readers look at. Each field is drawn by one function of the
// fields' list, so that a sequence of versions can draw one field again
// (a change of the object) and keep the rest.

const (
	genOther      = "other.csi.example.com"
	genPlugin     = "kubernetes.io/gce-pd" // the in-tree plugin a migrated scope takes over
	genPluginCSI  = "pd.csi.storage.gke.io"
	genNode       = "n1"
	genNodeKey    = "topology.local/node"
	genNS         = "ns"
	genPrefix     = "pvc"
	libFinalizer  = storagehelpers.PVDeletionProtectionFinalizer
	pvProtection  = "kubernetes.io/pv-protection"
	pvcProtection = "kubernetes.io/pvc-protection"
	anyFinalizer  = "example.com/mine"
	annSPBeta     = storagehelpers.AnnBetaStorageProvisioner
)

// genLabels are the labels of the node of a node-mode scope.
var genLabels = map[string]string{genNodeKey: genNode, "zone": "a"}

// genNow is the generator's clock.
var genNow = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// pick returns one of opts.
func pick[T any](r *rand.Rand, opts ...T) T { return opts[r.IntN(len(opts))] }

// some returns each of opts with probability one half, in order.
func some[T any](r *rand.Rand, opts ...T) []T {
	var out []T
	for _, o := range opts {
		if r.IntN(2) == 0 {
			out = append(out, o)
		}
	}
	return out
}

func setAnn(m map[string]string, k, v string, present bool) {
	if present {
		m[k] = v
	}
}

// pvGen is one PV's drawn fields.
type pvGen struct {
	phase      v1.PersistentVolumePhase
	policy     v1.PersistentVolumeReclaimPolicy
	finalizers []string
	provBy     string // "" absent
	migTo      string
	released   bool // nodeloss.AnnReleased
	deleting   bool
	source     string // a CSI driver, "in-tree" (the migrated plugin's), "host" (another plugin's)
	handle     string
	claimRef   bool
	affinity   int
}

// pvFields draws each field of a PV for a scope of driver.
var pvFields = []func(r *rand.Rand, g *pvGen, driver string){
	func(r *rand.Rand, g *pvGen, _ string) {
		g.phase = pick(r, v1.VolumePending, v1.VolumeAvailable, v1.VolumeBound, v1.VolumeBound, v1.VolumeReleased, v1.VolumeFailed, "")
	},
	func(r *rand.Rand, g *pvGen, _ string) {
		g.policy = pick(r, v1.PersistentVolumeReclaimDelete, v1.PersistentVolumeReclaimDelete, v1.PersistentVolumeReclaimRetain, v1.PersistentVolumeReclaimRecycle, "")
	},
	func(r *rand.Rand, g *pvGen, _ string) {
		g.finalizers = some(r, pvProtection, libFinalizer, anyFinalizer)
	},
	func(r *rand.Rand, g *pvGen, driver string) { g.provBy = pick(r, "", "", driver, genOther, genPlugin) },
	func(r *rand.Rand, g *pvGen, driver string) { g.migTo = pick(r, "", "", "", driver, genOther) },
	func(r *rand.Rand, g *pvGen, _ string) { g.released = r.IntN(8) == 0 },
	func(r *rand.Rand, g *pvGen, _ string) { g.deleting = r.IntN(4) == 0 },
	func(r *rand.Rand, g *pvGen, driver string) {
		g.source = pick(r, driver, driver, genOther, "in-tree", "host")
		g.handle = pick(r, "h1", "projects/p/zones/z/disks/pvc-1")
	},
	func(r *rand.Rand, g *pvGen, _ string) { g.claimRef = r.IntN(3) != 0 },
	func(r *rand.Rand, g *pvGen, _ string) { g.affinity = r.IntN(len(affinities)) },
}

// affinities are the node affinities a PV may have, against genLabels.
var affinities = []*v1.VolumeNodeAffinity{
	nil,
	affinity(v1.NodeSelectorRequirement{Key: genNodeKey, Operator: v1.NodeSelectorOpIn, Values: []string{genNode}}),
	affinity(v1.NodeSelectorRequirement{Key: genNodeKey, Operator: v1.NodeSelectorOpIn, Values: []string{"n2"}}),
	affinity(v1.NodeSelectorRequirement{Key: "rack", Operator: v1.NodeSelectorOpIn, Values: []string{"r9"}}),
	affinity(v1.NodeSelectorRequirement{Key: "zone", Operator: v1.NodeSelectorOpNotIn, Values: []string{"a"}}),
	{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
		{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{genNode}}}}}}},
}

func affinity(req v1.NodeSelectorRequirement) *v1.VolumeNodeAffinity {
	return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
		{MatchExpressions: []v1.NodeSelectorRequirement{req}}}}}
}

func newPVGen(r *rand.Rand, driver string) pvGen {
	var g pvGen
	for _, f := range pvFields {
		f(r, &g, driver)
	}
	return g
}

// build makes the PV of name and uid.
func (g pvGen) build(name string, uid types.UID) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid, ResourceVersion: "1", Annotations: map[string]string{},
			Finalizers: slices.Clone(g.finalizers)},
		Spec:   v1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: g.policy, NodeAffinity: affinities[g.affinity]},
		Status: v1.PersistentVolumeStatus{Phase: g.phase},
	}
	setAnn(pv.Annotations, storagehelpers.AnnDynamicallyProvisioned, g.provBy, g.provBy != "")
	setAnn(pv.Annotations, storagehelpers.AnnMigratedTo, g.migTo, g.migTo != "")
	setAnn(pv.Annotations, nodeloss.AnnReleased, genNow.Format(time.RFC3339), g.released)
	if g.deleting {
		pv.DeletionTimestamp = &metav1.Time{Time: genNow}
	}
	switch g.source {
	case "in-tree":
		pv.Spec.GCEPersistentDisk = &v1.GCEPersistentDiskVolumeSource{PDName: name}
	case "host":
		pv.Spec.HostPath = &v1.HostPathVolumeSource{Path: "/x"}
	default:
		pv.Spec.CSI = &v1.CSIPersistentVolumeSource{Driver: g.source, VolumeHandle: g.handle}
	}
	if g.claimRef {
		pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: genNS, Name: "c", UID: "c-uid"}
	}
	return pv
}

// claimGen is one claim's drawn fields.
type claimGen struct {
	volume       int // 0 unbound, 1 its own volume, 2 another
	sp, spBeta   string
	spSet, bSet  bool
	selected     string
	migTo        string
	record       int // see claimFields
	recordNode   string
	finalizers   []string
	deleting     bool
	source       int
	unreadFormat bool
}

// claimFields draws each field of a claim for a scope of driver and
// migrated plugin.
var claimFields = []func(r *rand.Rand, g *claimGen, driver, plugin string){
	func(r *rand.Rand, g *claimGen, _, _ string) { g.volume = pick(r, 0, 0, 1, 2) },
	func(r *rand.Rand, g *claimGen, driver, plugin string) {
		g.spSet, g.sp = r.IntN(4) != 0, pick(r, driver, driver, genOther, "", plugin)
		g.bSet, g.spBeta = r.IntN(3) == 0, pick(r, driver, genOther)
	},
	func(r *rand.Rand, g *claimGen, _, _ string) { g.selected = pick(r, "", "", genNode, "n2") },
	func(r *rand.Rand, g *claimGen, driver, _ string) { g.migTo = pick(r, "", "", "", driver) },
	func(r *rand.Rand, g *claimGen, _, _ string) {
		// 0 none, 1 the finalizer alone, 2 a whole record, 3 its
		// annotations without the finalizer, 4 a record of another volume.
		g.record = r.IntN(5)
		g.recordNode = pick(r, "", genNode, "n2")
		g.unreadFormat = r.IntN(6) == 0
	},
	func(r *rand.Rand, g *claimGen, _, _ string) {
		g.finalizers = some(r, pvcProtection, pvcProtection, protect.FinalizerCloneSource, anyFinalizer)
	},
	func(r *rand.Rand, g *claimGen, _, _ string) { g.deleting = r.IntN(4) == 0 },
	func(r *rand.Rand, g *claimGen, _, _ string) { g.source = r.IntN(6) },
}

func newClaimGen(r *rand.Rand, driver, plugin string) claimGen {
	var g claimGen
	for _, f := range claimFields {
		f(r, &g, driver, plugin)
	}
	return g
}

// ownVolume is the volume name a claim of uid is provisioned under.
func ownVolume(uid types.UID) string { return genPrefix + "-" + string(uid) }

// build makes the claim of name and uid.
func (g claimGen) build(name string, uid types.UID, driver string) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: genNS, Name: name, UID: uid, ResourceVersion: "1",
		Annotations: map[string]string{}, Finalizers: slices.Clone(g.finalizers)}}
	c.Spec.VolumeName = []string{"", ownVolume(uid), "pv-other"}[g.volume]
	setAnn(c.Annotations, storagehelpers.AnnStorageProvisioner, g.sp, g.spSet)
	setAnn(c.Annotations, annSPBeta, g.spBeta, g.bSet)
	setAnn(c.Annotations, storagehelpers.AnnSelectedNode, g.selected, g.selected != "")
	setAnn(c.Annotations, storagehelpers.AnnMigratedTo, g.migTo, g.migTo != "")
	if g.record == 1 || g.record == 2 || g.record == 4 {
		c.Finalizers = append(c.Finalizers, inflight.Finalizer)
	}
	if g.record >= 2 {
		vol := ownVolume(uid)
		if g.record == 4 {
			vol = "pvc-another"
		}
		c.Annotations[inflight.AnnVolume], c.Annotations[inflight.AnnDriver] = vol, driver
		setAnn(c.Annotations, inflight.AnnNode, g.recordNode, g.recordNode != "")
		setAnn(c.Annotations, inflight.AnnFormat, "9", g.unreadFormat)
	}
	if g.deleting {
		c.DeletionTimestamp = &metav1.Time{Time: genNow}
	}
	snapGroup, otherNS := snapv1.GroupName, "elsewhere"
	switch g.source {
	case 1:
		c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	case 2:
		c.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	case 3:
		c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "VolumeSnapshot", APIGroup: &snapGroup, Name: "snap"}
	case 4:
		c.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "VolumeSnapshot", APIGroup: &snapGroup, Name: "snap", Namespace: &otherNS}
	case 5:
		group := "populator.example.com"
		c.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "Thing", APIGroup: &group, Name: "x"}
	}
	return c
}

// describePV says what of a PV the scope and its readers read.
func describePV(pv *v1.PersistentVolume) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%q policy=%q finalizers=%v", pv.Status.Phase, pv.Spec.PersistentVolumeReclaimPolicy, pv.Finalizers)
	switch {
	case pv.Spec.CSI != nil:
		fmt.Fprintf(&b, " csi=%s handle=%s", pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
	case pv.Spec.GCEPersistentDisk != nil:
		b.WriteString(" in-tree gce-pd")
	default:
		b.WriteString(" hostPath")
	}
	fmt.Fprintf(&b, " annotations=%v deleting=%v claimRef=%v", pv.Annotations, pv.DeletionTimestamp != nil, pv.Spec.ClaimRef != nil)
	if pv.Spec.NodeAffinity != nil {
		fmt.Fprintf(&b, " affinity=%v", pv.Spec.NodeAffinity.Required.NodeSelectorTerms)
	}
	return b.String()
}

// describeClaim says what of a claim the scope and its readers read.
func describeClaim(c *v1.PersistentVolumeClaim) string {
	return fmt.Sprintf("volumeName=%q finalizers=%v annotations=%v deleting=%v dataSource=%v dataSourceRef=%v",
		c.Spec.VolumeName, c.Finalizers, c.Annotations, c.DeletionTimestamp != nil, c.Spec.DataSource, c.Spec.DataSourceRef)
}

// testScope is a scope with the node labels its readers read.
type testScope struct {
	name   string
	s      scope.Scope
	labels map[string]string // the node's labels in node-deployment mode
}

func testScopes(driver string) []testScope {
	known := func() (map[string]string, bool) { return genLabels, true }
	unknown := func() (map[string]string, bool) { return nil, false }
	return []testScope{
		{name: "centralised", s: scope.Scope{Driver: driver}},
		{name: "migrated", s: scope.Scope{Driver: genPluginCSI, Migrated: genPlugin}},
		{name: "node", s: scope.Scope{Driver: driver, Node: genNode, NodeLabels: known}, labels: genLabels},
		{name: "node, labels not known yet", s: scope.Scope{Driver: driver, Node: genNode, NodeLabels: unknown}, labels: genLabels},
	}
}
