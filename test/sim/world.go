package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand"
	"strings"
	"time"

	"github.com/go-logr/logr"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/binder"
	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/pkg/provisioner/claimlock"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"github.com/tether-csi/tether/pkg/provisioner/scope"
	"github.com/tether-csi/tether/pkg/provisioner/static"
	"github.com/tether-csi/tether/pkg/provisioner/sweep"
	"github.com/tether-csi/tether/pkg/server"
)

// Config is what one schedule's world is built with (drawn from its seed).
type Config struct {
	// StrictParams: the driver compares parameters, not only the size, on
	// a repeated CreateVolume.
	StrictParams bool
	// Owner: the provisioner marks its volumes (and the sweep deletes).
	Owner bool
	// Steps is the number of steps with the actors on.
	Steps int
	// Node is node-deployment mode: one provisioner per node, each with
	// the driver of its node, whose volumes are local to it; every class
	// waits for the first consumer. Otherwise one provisioner for the
	// cluster and a backend shared by all nodes.
	Node bool
	// Attach: the driver has PUBLISH_UNPUBLISH_VOLUME (see attach.go).
	Attach bool
}

// World is one schedule: the API, the backend, the processes, the actors'
// memory, the trace and the violations found.
type World struct {
	seed  int64
	rng   *rand.Rand
	now   time.Time
	cfg   Config
	ctx   context.Context
	api   *API
	back  *backend
	provs []*provProc // one, or one per node in node mode
	// upstream: external-provisioner and KCM's binder run in tether's
	// place (upstream.go); handBackLeft: the last --hand-back left claims.
	upstream     bool
	handBackLeft bool
	// handover is a lost lease not yet taken over, or whose old leader's
	// call is not over (see lease.go).
	handover *handover
	bind     *bindProc
	// standby is a second binder waiting for the lease with warm caches
	// (binder.Controller.Start): its handlers run, its workers do not.
	standby *bindProc
	// failovers counts the standby's take-overs, failoversBehind those
	// where its caches had not caught up with the API yet.
	failovers, failoversBehind int
	// provRelease is the release of each provisioner process's image,
	// binderRelease the binder Deployment's (releases.go);
	// releaseChanges counts the upgrades and rollbacks, previousRecords
	// the records the previous release wrote.
	provRelease                     []release
	binderRelease                   release
	releaseChanges, previousRecords int
	// staleRetries counts the CreateVolumes tried again that the claim's
	// read refused (records.StaleError).
	staleRetries int
	// scoped counts what the provisioners' caches did not keep whole
	// (package scope), by resource.
	scoped map[string]int

	steps int

	trace      []string
	violations []string
	faults     bool
	actors     bool

	// deleting is the PV whose backend volume the library is deleting
	// through Provisioner.Delete; cleanup is the claim whose in-flight
	// record the reconciler is settling (nil otherwise).
	deleting string
	// who is the component at work, for the messages.
	who     string
	cleanup *v1.PersistentVolumeClaim

	claimNS  map[string]string // claim UID to namespace, for every claim ever made
	forged   map[string]bool   // claim UIDs whose record the tenant wrote
	stripped map[string]bool   // volume names whose record the tenant removed
	// unreadWritten counts the tenant's formats no reader reads;
	// unreadHeld the deleted claims such a format held until repair.
	unreadWritten, unreadHeld int
	// nsWaits counts the settling steps at which every Terminating
	// namespace waited for its objects' finalizers (namespaceWork).
	nsWaits  int
	events   []event
	seen     map[string]bool
	cloned   map[string]bool // volume names a CreateVolume with a source volume was sent for
	attached map[string]bool // PV names a VolumeAttachment ever named
	loss     lossState       // node loss (nodeloss.go)
	offered  map[string]bool // the actor moves offered (writers.go)
	snap     snapState       // VolumeSnapshots (snapshots.go)
	adm      adminState      // the admin's volumes, twin and refusals (admin_volumes.go)
	only     map[string]bool // when set, the only actors offered (snapshot_spec.go)
	// creates are the CreateVolume answers by volume name, recordedBy the
	// process that wrote each claim's record on a claim that held none,
	// caller the provisioner process whose client writes now, settler the
	// one whose in-flight reconciler works now (refused.go).
	creates                                            map[string][]createCall
	recordedBy                                         map[string]*provProc
	caller, settler                                    *provProc
	refusedCreates, classesWithClaims, infeasibleWaits int
	nsSeq                                              int
	claimSeq                                           int
}

func newWorld(seed int64) *World {
	w := &World{seed: seed, rng: rand.New(rand.NewSource(seed)), scoped: map[string]int{},
		now:     time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		claimNS: map[string]string{}, forged: map[string]bool{}, stripped: map[string]bool{}, seen: map[string]bool{},
		cloned: map[string]bool{}, attached: map[string]bool{}, loss: newLossState(), offered: map[string]bool{}, snap: newSnapState(),
		creates: map[string][]createCall{}, recordedBy: map[string]*provProc{},
		adm: adminState{used: map[string]bool{}, ns: map[string]string{}, seen: map[string]bool{}, unseenLeft: map[string]bool{}, saved: map[string]bool{}}}
	w.ctx = klog.NewContext(context.Background(), logr.Discard())
	w.cfg = Config{StrictParams: w.rng.Intn(2) == 0, Owner: w.rng.Intn(3) > 0, Steps: 30 + w.rng.Intn(50)}
	// The mode is drawn from a hash of the seed, not from the random
	// stream, so a centralised schedule stays what it was before node mode.
	h := fnv.New32a()
	fmt.Fprintf(h, "mode/%d", seed)
	w.cfg.Node = h.Sum32()%2 == 0 && !Disabled["node-mode"] || Disabled["central-mode"]
	w.cfg.Attach = drawAttach(seed)
	if w.cfg.Node {
		// A claim goes through more hands (the scheduler, two processes'
		// caches) before its CreateVolume.
		w.cfg.Steps += 40
	}
	w.provRelease = make([]release, w.provisioners())
	w.api = newAPI(w)
	w.back = newBackend(w)
	return w
}

func (w *World) clock() time.Time { return w.now }

func (w *World) tracef(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf(format, args...))
}

func (w *World) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if w.seen[msg] {
		return
	}
	w.seen[msg] = true
	w.violations = append(w.violations, fmt.Sprintf("step %d: %s", w.steps, msg))
	w.tracef("  VIOLATION: %s", msg)
}

func (w *World) changed(resource, key string) {
	for _, p := range w.provs {
		p.caches.changed(resource, key)
	}
	if w.bind != nil {
		w.bind.caches.changed(resource, key)
	}
	if w.standby != nil {
		w.standby.caches.changed(resource, key)
	}
}

func (w *World) gone(string, runtime.Object) {}

// event is one event a component recorded.
type event struct {
	kind, name, reason, message string
}

// recorder keeps the components' events in the world.
type recorder struct{ w *World }

func (r recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	if reason == "VolumeInFlightNodeGone" {
		r.w.checkNodeGoneEvent(obj)
	}
	if reason == provisioner.ReasonProvisioningInfeasible {
		r.w.infeasibleWaits++
	}
	if c, ok := obj.(*v1.PersistentVolumeClaim); ok && (reason == "ProvisioningCleanupFailed" || reason == provisioner.ReasonVolumeCleanupAbandoned) {
		r.w.checkNoneMadeCleanup(c, reason)
	}
	r.w.noteRestoreEvent(obj, reason)
	kind, name := describe(obj)
	r.w.events = append(r.w.events, event{kind, name, reason, message})
	r.w.tracef("  event %s %s: %s %s", kind, name, reason, message)
}

func (r recorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (r recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func describe(obj runtime.Object) (string, string) {
	if m, ok := obj.(interface {
		GetNamespace() string
		GetName() string
	}); ok {
		return fmt.Sprintf("%T", obj), objKey(m.GetNamespace(), m.GetName())
	}
	return fmt.Sprintf("%T", obj), ""
}

// abandoned reports whether a component reported the volume (by ID or
// name) as abandoned on a StorageClass or CSIDriver: for now, the one form
// in which "tracked by nothing" is allowed.
func (w *World) abandoned(v *backendVolume) bool {
	for _, e := range w.events {
		if e.reason == "VolumeCleanupAbandoned" && (strings.Contains(e.message, v.ID) || strings.Contains(e.message, v.Name)) {
			return true
		}
	}
	return false
}

// provProc is a running provisioner process: its caches, the Provisioner,
// the in-flight reconciler, the sweep and the library. In node mode node
// is its node ("" otherwise).
type provProc struct {
	w          *World
	node, name string
	drv        *driver
	client     kubernetes.Interface
	caches     *caches
	prov       *provisioner.Provisioner
	inflight   *provisioner.InFlight
	ifQ        *queue
	clones     *protect.CloneProtection
	cloneQ     *queue
	snapClient snapclientset.Interface
	snapshots  *protect.SnapshotProtection
	snapQ      *queue
	sweeper    *sweep.Sweeper
	lib        *library
	// static is the reclaimer of static PVs (package static), staticQ its
	// queue (unused by external-provisioner's process).
	static     *static.Reclaimer
	staticQ    *queue
	nodeLister corelisters.NodeLister
	// work is what cmd/provisioner runs under the lease (see lease.go).
	work *server.Work
	// upstream: the process is external-provisioner (upstream.go).
	upstream bool
	// release is the tether release it runs (releases.go).
	release release
}

// provisioners is how many provisioner processes run: one per node in
// node mode.
func (w *World) provisioners() int {
	if w.cfg.Node {
		return len(nodeNames)
	}
	return 1
}

// startProvisioner starts (or restarts, losing its memory) the i-th
// provisioner process.
func (w *World) startProvisioner(i int) { w.startProvisionerAs(i, false) }

// startProvisionerAs starts the i-th provisioner process; handBack: as
// `provisioner --hand-back` (newTether).
func (w *World) startProvisionerAs(i int, handBack bool) {
	if h := w.handover; h != nil && !h.started && i < len(w.provs) && w.provs[i] == h.old {
		w.killHandover() // the old leader crashes before its call is over
	}
	var p *provProc
	if w.upstream {
		p = w.newUpstream(i)
	} else {
		p = w.newTether(i, handBack)
	}
	for len(w.provs) <= i {
		w.provs = append(w.provs, nil)
	}
	w.provs[i] = p
	p.caches.fill()
}

// newTether builds the i-th tether provisioner process (its caches not
// filled yet). In node mode the current release lists its claims and PVs
// behind the watch when it starts (behind.go), but not as --hand-back
// (handBack), which reads every claim once, as cmd/provisioner does.
func (w *World) newTether(i int, handBack bool) *provProc {
	p := &provProc{w: w, name: "provisioner", work: &server.Work{}, release: w.provRelease[i]}
	if w.cfg.Node {
		p.node = nodeNames[i]
		p.name += "@" + p.node
	}
	p.drv = &driver{b: w.back, node: p.node}
	p.client = w.newClientAs(func() string { return p.name }, p, p.release)
	p.ifQ = newQueue(w, "in-flight"+p.suffix())
	p.caches = newCaches(w, rClaims, rVolumes, rClasses, rNodes, rCSINodes, rVAs, rVACs, rSnapshots)
	p.caches.release = p.release
	p.snapClient = w.newSnapClient(func() string { return p.name }, p)
	ix := func(r string) *informer { return p.caches.inf[r] }
	p.nodeLister = corelisters.NewNodeLister(ix(rNodes).indexer)
	// The current release keeps whole only the claims and PVs it answers
	// for (package scope); the previous one kept them all.
	var volumeNames *scope.Seen
	var claimNames *scope.Seen
	var goneClaims *scope.Gone
	if p.release == current {
		sc := scope.Scope{Driver: driverName, Node: p.node, NodeLabels: func() (map[string]string, bool) {
			n, err := p.nodeLister.Get(p.node)
			if err != nil {
				return nil, false
			}
			return n.Labels, true
		}}
		claims := sc.ClaimKeeper(func(uid string) string { return request.VolumeName(prefix, uid, -1) })
		volumes := sc.VolumeKeeper()
		p.caches.keep(rClaims, claims)
		p.caches.keep(rVolumes, volumes)
		if p.node != "" {
			p.caches.relabel = newRelabel(p.node)
		}
		if p.node != "" && !handBack {
			p.caches.behind = map[string]bool{}
			for _, r := range behindResources {
				p.caches.behind[r] = true
			}
		}
		claimNames, volumeNames, goneClaims = claims.Seen(), volumes.Seen(), claims.Gone()
	}
	classes := storagelisters.NewStorageClassLister(ix(rClasses).indexer)
	owner := ""
	if w.cfg.Owner {
		owner = thisOwner
	}
	var node *provisioner.NodeDeployment
	if p.node != "" {
		node = &provisioner.NodeDeployment{NodeName: p.node, BaseDelay: time.Second, MaxDelay: time.Second}
	}
	// The sweep shares the provisioner's request options and claim locks.
	reqOpts, locks := request.Options{VolumeNamePrefix: prefix, VolumeNameUUIDLen: -1, Owner: owner}, &claimlock.Set{}
	var err error
	p.prov, err = provisioner.New(provisioner.Options{Client: p.client, Driver: p.drv, Node: node, Locks: locks,
		Request:  reqOpts,
		Topology: true, ModifyVolume: true, Clone: true, PublishUnpublish: w.cfg.Attach, Identity: "sim",
		Snapshots: true, SnapshotClient: p.snapClient, PreventVolumeModeConversion: true,
		Claims:  corelisters.NewPersistentVolumeClaimLister(ix(rClaims).indexer),
		Volumes: corelisters.NewPersistentVolumeLister(ix(rVolumes).indexer), VolumeNames: names(volumeNames),
		GoneClaims: gone(goneClaims), Classes: classes, Nodes: p.nodeLister,
		CSINodes:                storagelisters.NewCSINodeLister(ix(rCSINodes).indexer),
		VolumeAttachments:       storagelisters.NewVolumeAttachmentLister(ix(rVAs).indexer),
		VolumeAttributesClasses: storagelisters.NewVolumeAttributesClassLister(ix(rVACs).indexer),
		Clock:                   w.clock,
	})
	if err != nil {
		panic(err)
	}
	w.forget(p.name)
	w.watchNodeHandler(ix(rNodes), p.name)
	p.inflight, err = p.prov.NewInFlight(provisioner.InFlightOptions{Claims: ix(rClaims), Volumes: ix(rVolumes),
		Classes: classes, Recorder: recorder{w}, Nodes: ix(rNodes), NodeLossGrace: simGrace,
		Queue: p.ifQ})
	if err != nil {
		panic(err)
	}
	p.cloneQ = newQueue(w, "clone-protection"+p.suffix())
	p.clones, err = protect.NewCloneProtection(protect.CloneProtectionOptions{Client: p.client, Claims: ix(rClaims), Queue: p.cloneQ})
	if err != nil {
		panic(err)
	}
	p.snapQ = newQueue(w, "snapshot-protection"+p.suffix())
	p.snapshots, err = protect.NewSnapshotProtection(protect.SnapshotProtectionOptions{Client: p.client, SnapshotClient: p.snapClient,
		Claims: ix(rClaims), Snapshots: ix(rSnapshots), Queue: p.snapQ})
	if err != nil {
		panic(err)
	}
	policy := sweep.Report
	if w.cfg.Owner {
		policy = sweep.Delete
	}
	// The simulator calls Sweep itself (run.go), so Interval only has to
	// be valid.
	p.sweeper, err = sweep.New(context.Background(), sweep.Options{Driver: p.drv, Client: p.client, Request: reqOpts, Locks: locks,
		Policy: policy, MinAge: time.Minute, Interval: 30 * time.Second, Recorder: recorder{w}, Clock: w.clock,
		Claims:  corelisters.NewPersistentVolumeClaimLister(ix(rClaims).indexer),
		Volumes: corelisters.NewPersistentVolumeLister(ix(rVolumes).indexer), VolumeEvents: ix(rVolumes),
		ClaimNames: names(claimNames), VolumeNames: names(volumeNames), SavePending: p.prov.SavePending})
	if err != nil {
		panic(err)
	}
	p.lib = newLibrary(p, p.prov, p.prov.LibraryClient(p.client))
	p.staticQ = newQueue(w, "static-volumes"+p.suffix())
	p.static, err = static.New(static.Options{Client: p.client, Driver: driverName, Deleter: p.prov, Volumes: ix(rVolumes), Queue: p.staticQ})
	if err != nil {
		panic(err)
	}
	// A PV whose deletion waited for a detach goes back to the library
	// once detached.
	if err := p.prov.WatchDetach(provisioner.DetachOptions{VolumeAttachments: ix(rVAs), Requeue: p.lib.volumes.Requeue,
		Recorder: recorder{w}}); err != nil {
		panic(err)
	}
	// A claim the driver refused as infeasible (a block claim) waits for
	// an edit, or is handed back after the interval, as cmd/provisioner's
	// timer and libv8.Claims.Requeue do, in the simulator's time; only
	// with WaitInfeasible (refused.go).
	if !WaitInfeasible {
		return p
	}
	if err := p.prov.WaitInfeasible(provisioner.InfeasibleOptions{Interval: time.Minute, Recorder: recorder{w},
		Requeue: func(key string, after time.Duration) {
			if obj, ok, _ := p.lib.claims.GetStore().GetByKey(key); ok {
				p.lib.claimQ.AddAfter(string(obj.(*v1.PersistentVolumeClaim).UID), after)
			}
		}, Classes: p.caches.inf[rClasses], AttributesClasses: p.caches.inf[rVACs]}); err != nil {
		panic(err)
	}
	return p
}

// suffix tells a node's process's queues apart in the trace.
func (p *provProc) suffix() string {
	if p.node == "" {
		return ""
	}
	return "@" + p.node
}

// bindProc is a running binder process.
type bindProc struct {
	w       *World
	caches  *caches
	ctrl    *binder.Controller
	claimQ  *queue
	volumeQ *queue
	// role is "binder" for the one that leads, "binder-standby" for one
	// that waits for the lease with its caches warm (its client's writes
	// go under this name).
	role string
	// firstPVs are the PVs of its first list.
	firstPVs []string
	// release is the tether release it runs (releases.go).
	release release
}

// startBinder starts a binder that leads at once, from a first list (a
// cold start).
func (w *World) startBinder() {
	w.bind = w.newBinder("binder")
}

// newBinder starts a binder process in a role: its caches list every
// object now, then follow the API with the simulator's lag.
func (w *World) newBinder(role string) *bindProc {
	b := &bindProc{w: w, role: role, claimQ: newQueue(w, role+"-claims"), volumeQ: newQueue(w, role+"-volumes"), release: w.binderRelease}
	b.caches = newCaches(w, rClaims, rVolumes, rClasses, rNodes)
	b.caches.release = b.release
	inf := b.caches.inf
	w.forget(role)
	w.watchNodeHandlerOf(inf[rNodes], func() string { return b.role })
	ctrl, err := binder.New(binder.Options{Client: w.newClientOf(func() string { return b.role }, b.release), Workers: 1,
		Recorder: recorder{w}, NodeLossGrace: simGrace, KeepRecords: w.upstream, Clock: w.clock,
		Inputs: &binder.Inputs{Claims: inf[rClaims], Volumes: inf[rVolumes], Classes: inf[rClasses],
			Nodes: corelisters.NewNodeLister(inf[rNodes].indexer), NodesSynced: inf[rNodes].HasSynced, NodeEvents: inf[rNodes],
			ClaimQueue: b.claimQ, VolumeQueue: b.volumeQ}})
	if err != nil {
		panic(err)
	}
	b.ctrl = ctrl
	b.caches.fill()
	b.firstPVs = w.api.keys(rVolumes)
	return b
}

// names is s as the readers take it: nil (every object cached whole) for a
// nil Seen.
func names(s *scope.Seen) sweep.Names {
	if s == nil {
		return nil
	}
	return s
}

// gone is g as the provisioner's GoneClaims: nil (every claim read from
// the API server) for the previous release, which had none.
func gone(g *scope.Gone) interface{ Has(types.UID) bool } {
	if g == nil {
		return nil
	}
	return g
}
