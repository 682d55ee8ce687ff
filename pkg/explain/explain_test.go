package explain

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/tether-csi/tether/pkg/binder"
	"github.com/tether-csi/tether/pkg/inflight"
)

const (
	rwo = v1.ReadWriteOnce
	rwx = v1.ReadWriteMany
)

func TestExplain(t *testing.T) {
	manual := class("manual", "kubernetes.io/no-provisioner", false, false)
	staticWFFC := class("local-static", "kubernetes.io/no-provisioner", true, false)
	dynamic := class("fast", driver, false, false)
	dynamicWFFC := class("topo", driver, true, false)
	nodes := []*storagev1.CSINode{csiNode("node-1"), csiNode("node-2")}
	tests := []struct {
		name string
		in   Input
		// want is the cause's reason ("" for none); the other fields, when
		// set, must hold too.
		want          string
		phase         string
		best, onceSch string
		words         []string // fragments of the state, cause or action
		candidate     map[string]string
	}{
		{name: "bound claim", want: "", phase: "Bound",
			in:    Input{Claim: newClaim("c", "manual", "1Gi", bound("pv-1")), Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi", pvClaimRef("default", "c"))}, Classes: []*storagev1.StorageClass{manual}},
			words: []string{"Bound to pv-1 (1Gi, ReadWriteOnce)"}},
		{name: "lost: the volume is gone", want: CauseLost, phase: "Lost",
			in:    Input{Claim: newClaim("c", "manual", "1Gi", bound("pv-gone")), Volumes: []*v1.PersistentVolume{}, Classes: []*storagev1.StorageClass{manual}},
			words: []string{"lost its PersistentVolume", `restore PV "pv-gone"`}},
		{name: "terminating, held by a pod", want: CauseTerminating, phase: "Terminating",
			in:    Input{Claim: newClaim("c", "manual", "1Gi", deleting("kubernetes.io/pvc-protection")), Pods: []*v1.Pod{pod("app", "c", "node-1", "")}},
			words: []string{"held by kubernetes.io/pvc-protection", "pods use the claim: app", "delete the pods"}},
		{name: "terminating, held by the in-flight record", want: CauseTerminating,
			in:    Input{Claim: newClaim("c", "fast", "1Gi", inFlight("pvc-uid-c"), deleting(inflight.Finalizer))},
			words: []string{"may still be creating volume \"pvc-uid-c\"", "keep the provisioner"}},
		{name: "terminating, held by an in-flight record of a newer format", want: CauseTerminating,
			in:    Input{Claim: newClaim("c", "fast", "1Gi", inFlight("pvc-uid-c"), ann(inflight.AnnFormat, "2"), deleting(inflight.Finalizer))},
			words: []string{`of format "2", which this kubectl-tether does not read (it reads 1 to 1)`, "docs/upgrade.md"}},
		{name: "invalid claim", want: CauseInvalidClaim,
			in:    Input{Claim: newClaim("c", "manual", "1Gi", claimModes()), Classes: []*storagev1.StorageClass{manual}},
			words: []string{"no access modes"}},
		{name: "no volume of the class", want: CauseNoVolumeOfClass,
			in: Input{Claim: newClaim("c", "manual", "1Gi"), Classes: []*storagev1.StorageClass{manual},
				Volumes: []*v1.PersistentVolume{newPV("pv-other", "gold", "1Gi")}},
			words: []string{`no PersistentVolume has class "manual"`, `create a PV of class "manual" with at least 1Gi`}},
		{name: "too small", want: string(binder.MismatchSize),
			in: Input{Claim: newClaim("c", "manual", "5Gi"), Classes: []*storagev1.StorageClass{manual},
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi"), newPV("pv-2", "manual", "2Gi")}},
			words:     []string{"too small", "at least 5Gi", "at most 2Gi (pv-2"},
			candidate: map[string]string{"pv-1": string(binder.MismatchSize), "pv-2": string(binder.MismatchSize)}},
		{name: "access modes", want: string(binder.MismatchAccessModes),
			in: Input{Claim: newClaim("c", "manual", "1Gi", claimModes(rwx)), Classes: []*storagev1.StorageClass{manual},
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi")}},
			words: []string{"incompatible access modes (volume ReadWriteOnce, claim ReadWriteMany)", "with access modes ReadWriteMany"}},
		{name: "selector", want: string(binder.MismatchSelector),
			in: Input{Claim: newClaim("c", "manual", "1Gi", selector("tier", "gold")), Classes: []*storagev1.StorageClass{manual},
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi", pvLabels("tier", "silver"))}},
			words: []string{"do not match the claim's selector", "fix the claim's selector (tier=gold)"}},
		{name: "volume mode", want: string(binder.MismatchVolumeMode),
			in: Input{Claim: newClaim("c", "manual", "1Gi", block()), Classes: []*storagev1.StorageClass{manual},
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi")}},
			words: []string{"volume Filesystem, claim Block", "volumeMode Block"}},
		{name: "volume attributes class", want: string(binder.MismatchVAC),
			in: Input{Claim: newClaim("c", "manual", "1Gi", claimVAC("gold")), Classes: []*storagev1.StorageClass{manual},
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi", pvVAC("silver"))}},
			words: []string{`volume "silver", claim "gold"`}},
		{name: "claimed by another claim", want: string(binder.MismatchClaimed),
			in: Input{Claim: newClaim("c", "manual", "1Gi"), Classes: []*storagev1.StorageClass{manual},
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi", pvClaimRef("default", "other"))}},
			words: []string{"claimed by default/other", "create another PV"}},
		{name: "node affinity against the selected node", want: string(binder.MismatchNodeAffinity),
			in: Input{Claim: newClaim("c", "local-static", "1Gi", selectedNode("node-2")), Classes: []*storagev1.StorageClass{staticWFFC},
				SelectedNode: node("node-2"), Volumes: []*v1.PersistentVolume{newPV("pv-n1", "local-static", "1Gi", pvNode("node-1"))}},
			words: []string{"node affinity excludes the selected node", "node node-2 can reach"}},
		{name: "a match the binder has not bound yet", want: CauseBinderNotActed, best: "pv-2",
			in: Input{Claim: newClaim("c", "manual", "2Gi"), Classes: []*storagev1.StorageClass{manual},
				Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi"), newPV("pv-2", "manual", "3Gi"), newPV("pv-3", "manual", "5Gi")}},
			words:     []string{"volume pv-2 matches", "binds the claim to volume pv-2"},
			candidate: map[string]string{"pv-1": string(binder.MismatchSize), "pv-2": "", "pv-3": ""}},
		{name: "WaitForFirstConsumer with no pod", want: CauseWaitForFirstConsumer, onceSch: "pv-a",
			in: Input{Claim: newClaim("c", "local-static", "1Gi"), Classes: []*storagev1.StorageClass{staticWFFC},
				Volumes: []*v1.PersistentVolume{newPV("pv-a", "local-static", "1Gi", pvNode("node-1"))}},
			words: []string{"no pod uses the claim", "volume pv-a would then be bound", "create a pod that uses claim c"}},
		{name: "WaitForFirstConsumer, the pod scheduled, no node on the claim yet", want: string(binder.MismatchNoNode), onceSch: "pv-a",
			in: Input{Claim: newClaim("c", "local-static", "1Gi"), Classes: []*storagev1.StorageClass{staticWFFC},
				Pods:    []*v1.Pod{pod("app", "c", "node-1", "")},
				Volumes: []*v1.PersistentVolume{newPV("pv-a", "local-static", "1Gi", pvNode("node-1"))}},
			words: []string{"its only one, pv-a, is passed over for WaitingForNode", "kube-scheduler sets volume.kubernetes.io/selected-node"}},
		{name: "WaitForFirstConsumer, pod unschedulable for capacity", want: CauseNoCapacity,
			in: Input{Claim: newClaim("c", "topo", "20Gi"), Classes: []*storagev1.StorageClass{dynamicWFFC}, CSINodes: nodes,
				Pods:       []*v1.Pod{pod("app", "c", "", "0/2 nodes are available: 2 node(s) did not have enough free storage.")},
				Capacities: []*storagev1.CSIStorageCapacity{capacity("topo", "node-1", "10Gi"), capacity("topo", "node-2", "8Gi")}},
			words: []string{"no topology segment has room for 20Gi", "kubernetes.io/hostname=node-1 has 10Gi", "ask for at most 10Gi", "did not have enough free storage"}},
		{name: "WaitForFirstConsumer, pod unschedulable otherwise", want: CausePodNotScheduled,
			in: Input{Claim: newClaim("c", "topo", "1Gi"), Classes: []*storagev1.StorageClass{dynamicWFFC},
				Pods: []*v1.Pod{pod("app", "c", "", "0/2 nodes are available: 2 Insufficient cpu.")}},
			words: []string{"pod app is not scheduled: 0/2 nodes are available: 2 Insufficient cpu."}},
		{name: "not handed to the provisioner", want: CauseNotAnnotated,
			in:    Input{Claim: newClaim("c", "fast", "1Gi"), Classes: []*storagev1.StorageClass{dynamic}},
			words: []string{"not yet handed to provisioner", "binder runs"}},
		{name: "no provisioner running", want: CauseNoProvisioner,
			in:    Input{Claim: newClaim("c", "fast", "1Gi", annotated()), Classes: []*storagev1.StorageClass{dynamic}},
			words: []string{"no provisioner for \"disk.csi.example.com\" is seen running", "start the provisioner for driver \"disk.csi.example.com\""}},
		{name: "an expired lease is no provisioner", want: CauseNoProvisioner,
			in: Input{Claim: newClaim("c", "fast", "1Gi", annotated()), Classes: []*storagev1.StorageClass{dynamic},
				Leases: []*coordinationv1.Lease{lease("disk-csi-example-com", "old", time.Hour)}},
			words: []string{"no Lease for the driver is held"}},
		{name: "a migrated in-tree class goes to its CSI driver", want: CauseNoProvisioner,
			in: Input{Claim: newClaim("c", "ebs", "1Gi", ann("volume.kubernetes.io/storage-provisioner", "ebs.csi.aws.com")),
				Classes: []*storagev1.StorageClass{class("ebs", "kubernetes.io/aws-ebs", false, false)}},
			words: []string{`start the provisioner for driver "ebs.csi.aws.com"`}},
		{name: "provisioner running, waiting", want: CauseWaitingForProvisioner,
			in: Input{Claim: newClaim("c", "fast", "1Gi", annotated()), Classes: []*storagev1.StorageClass{dynamic},
				Leases: []*coordinationv1.Lease{lease("disk-csi-example-com", "p-1", time.Second)}},
			words: []string{"Lease kube-system/disk-csi-example-com is held by p-1"}},
		{name: "leases unreadable", want: CauseUnknown,
			in: Input{Claim: newClaim("c", "fast", "1Gi", annotated()), Classes: []*storagev1.StorageClass{dynamic},
				Unreadable: []Gap{{Resource: "leases", Error: "forbidden"}}},
			words: []string{"cannot be told", "leases could not be read"}},
		{name: "a final driver error", want: CauseProvisioningFailed,
			in: Input{Claim: newClaim("c", "fast", "1Gi", annotated()), Classes: []*storagev1.StorageClass{dynamic},
				Events: []*v1.Event{event("c", "ProvisioningFailed", "failed to provision volume with StorageClass \"fast\": rpc error: code = InvalidArgument desc = bad parameter", driver+"_host", 3)}},
			words: []string{"code = InvalidArgument", "failed 3 time(s)", "refused the request as it stands", "tries again at once when the claim", "fix what driver"}},
		{name: "a final driver error that may pass", want: CauseProvisioningFailed,
			in: Input{Claim: newClaim("c", "fast", "1Gi", annotated()), Classes: []*storagev1.StorageClass{dynamic},
				Events: []*v1.Event{event("c", "ProvisioningFailed", "failed to provision volume with StorageClass \"fast\": rpc error: code = Internal desc = backend down", driver+"_host", 2)}},
			words: []string{"code = Internal", "failed 2 time(s)", "the driver's answer was final", "fix what driver"}},
		{name: "the driver is out of space", want: CauseNoCapacity,
			in: Input{Claim: newClaim("c", "fast", "1Gi", annotated()), Classes: []*storagev1.StorageClass{dynamic},
				Events: []*v1.Event{event("c", "ProvisioningFailed", "rpc error: code = ResourceExhausted desc = no space", driver+"_host", 1)}},
			words: []string{"the driver says: rpc error: code = ResourceExhausted"}},
		{name: "in flight", want: CauseProvisioning,
			in: Input{Claim: newClaim("c", "fast", "1Gi", annotated(), inFlight("pvc-uid-c")), Classes: []*storagev1.StorageClass{dynamic},
				Events: []*v1.Event{event("c", "Provisioning", "External provisioner is provisioning volume for claim", driver+"_host", 1)}},
			words: []string{`is creating volume "pvc-uid-c"`, "first attempt 5s ago"}},
		{name: "Immediate class with no capacity anywhere", want: CauseNoCapacity,
			in: Input{Claim: newClaim("c", "fast", "20Gi", annotated()), Classes: []*storagev1.StorageClass{dynamic},
				Capacities: []*storagev1.CSIStorageCapacity{capacity("fast", "node-1", "10Gi")}},
			words: []string{"no topology segment has room for 20Gi"}},
		{name: "node-deployment: no provisioner on the selected node", want: CauseNoNodeProvisioner,
			in: Input{Claim: newClaim("c", "topo", "1Gi", annotated(), selectedNode("node-2")), Classes: []*storagev1.StorageClass{dynamicWFFC},
				SelectedNode: node("node-2"), CSINodes: nodes, Leases: []*coordinationv1.Lease{lease("disk-csi-example-com-node-1", "p-1", time.Second)}},
			words: []string{"no node-deployment provisioner holds a Lease for node node-2", "on node node-2"}},
		{name: "class not found", want: CauseClassNotFound,
			in:    Input{Claim: newClaim("c", "nope", "1Gi"), Classes: []*storagev1.StorageClass{manual}},
			words: []string{`StorageClass "nope" does not exist`}},
		{name: "named volume missing", want: CauseVolumeNameMissing,
			in:    Input{Claim: newClaim("c", "manual", "1Gi", volumeName("pv-x")), Classes: []*storagev1.StorageClass{manual}, Volumes: []*v1.PersistentVolume{}},
			words: []string{`create PV "pv-x"`}},
		{name: "named volume does not satisfy", want: CauseVolumeNameMismatch,
			in: Input{Claim: newClaim("c", "manual", "5Gi", volumeName("pv-x")), Classes: []*storagev1.StorageClass{manual},
				Volumes: []*v1.PersistentVolume{newPV("pv-x", "manual", "1Gi")}},
			words: []string{"too small"}},
		{name: "no class, no default, no volume without a class", want: CauseNoClass,
			in:    Input{Claim: newClaim("c", "", "1Gi", noClass()), Classes: []*storagev1.StorageClass{manual}, Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi")}},
			words: []string{"no default class"}},
		{name: "no class, a default class", want: CauseBinderNotActed,
			in:    Input{Claim: newClaim("c", "", "1Gi", noClass()), Classes: []*storagev1.StorageClass{class("std", driver, false, true)}},
			words: []string{`default class "std"`}},
		{name: "volumes unreadable", want: CauseUnknown,
			in: Input{Claim: newClaim("c", "manual", "1Gi"), Classes: []*storagev1.StorageClass{manual},
				Unreadable: []Gap{{Resource: "persistentvolumes", Error: "forbidden"}}},
			words: []string{"persistentvolumes could not be read", "| cannot tell: persistentvolumes could not be read"}},
		{name: "classes and volumes unreadable: the binder's move is not guessed", want: CauseUnknown,
			in: Input{Claim: newClaim("c", "manual", "1Gi"),
				Unreadable: []Gap{{Resource: "persistentvolumes", Error: "forbidden"}, {Resource: "storageclasses", Error: "forbidden"}}},
			words: []string{"cannot tell: storageclasses, persistentvolumes could not be read"}},
		{name: "capacity published: a provisioner likely runs", want: CauseWaitingForProvisioner,
			in: Input{Claim: newClaim("c", "fast", "1Gi", annotated()), Classes: []*storagev1.StorageClass{dynamic},
				Capacities: []*storagev1.CSIStorageCapacity{capacity("fast", "node-1", "10Gi")}},
			words: []string{"1 CSIStorageCapacity object(s) of class \"fast\" are published"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			e := Explain(tt.in)
			got := ""
			text := e.State + " | " + e.Binder
			if e.Cause != nil {
				got = e.Cause.Reason
				text += " | " + e.Cause.Message + " | " + e.Cause.Action
			}
			for _, h := range e.Finalizers {
				text += " | " + h.Why
			}
			if got != tt.want {
				t.Fatalf("cause %q, want %q\n%s", got, tt.want, text)
			}
			if tt.phase != "" && e.Phase != tt.phase {
				t.Errorf("phase %q, want %q", e.Phase, tt.phase)
			}
			if e.BestMatch != tt.best || e.BestMatchOnceScheduled != tt.onceSch {
				t.Errorf("best match %q / once scheduled %q, want %q / %q", e.BestMatch, e.BestMatchOnceScheduled, tt.best, tt.onceSch)
			}
			for _, w := range tt.words {
				if !strings.Contains(text, w) {
					t.Errorf("%q is not in:\n%s", w, text)
				}
			}
			for vol, reason := range tt.candidate {
				found := false
				for _, c := range e.Candidates {
					if c.Volume == vol {
						found = true
						if c.Reason != reason || c.Match != (reason == "") {
							t.Errorf("candidate %s: %q (match %v), want %q", vol, c.Reason, c.Match, reason)
						}
					}
				}
				if !found {
					t.Errorf("candidate %s not listed: %+v", vol, e.Candidates)
				}
			}
		})
	}
}

// TestExplanationJSON pins the JSON field names scripts rely on.
func TestExplanationJSON(t *testing.T) {
	e := Explain(Input{Now: now, Claim: newClaim("c", "manual", "5Gi"),
		Classes: []*storagev1.StorageClass{class("manual", "kubernetes.io/no-provisioner", false, false)},
		Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi"), newPV("pv-o", "gold", "1Gi")}})
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"claim":"default/c"`, `"phase":"Pending"`, `"state":`, `"storageClass":"manual"`, `"request":"5Gi"`,
		`"candidates":[{"volume":"pv-1","capacity":"1Gi","match":false,"reason":"TooSmall"`, `"volumesOfOtherClasses":{"gold":1}`,
		`"cause":{"reason":"TooSmall"`, `"action":`, `"binder":`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("%s not in %s", key, b)
		}
	}
}

// TestProvisioningPath checks the facts of the provisioning path.
func TestProvisioningPath(t *testing.T) {
	c := newClaim("c", "topo", "5Gi", annotated(), selectedNode("node-1"), inFlight("pvc-uid-c"))
	e := Explain(Input{Now: now, Claim: c, SelectedNode: node("node-1"),
		Classes:    []*storagev1.StorageClass{class("topo", driver, true, false)},
		CSINodes:   []*storagev1.CSINode{csiNode("node-1"), csiNode("node-2")},
		Leases:     []*coordinationv1.Lease{lease("disk-csi-example-com-node-1", "p-1", time.Second), lease("kube-node-1", "x", 0)},
		Capacities: []*storagev1.CSIStorageCapacity{capacity("topo", "node-1", "10Gi"), capacity("topo", "node-2", "1Gi"), capacity("other", "node-1", "1Ti")},
		Pods:       []*v1.Pod{pod("app", "c", "node-1", ""), pod("unrelated", "d", "", "")}})
	p := e.Provisioning
	if p == nil {
		t.Fatal("no provisioning path")
	}
	if !p.Annotated || !p.WaitForFirstConsumer || p.SelectedNode != "node-1" || p.ProvisionerRunning != "yes" {
		t.Errorf("provisioning %+v", p)
	}
	if len(p.Leases) != 1 || p.Leases[0].Node != "node-1" || !p.Leases[0].Held {
		t.Errorf("leases %+v, want the node-1 lease, held", p.Leases)
	}
	if !strings.HasPrefix(p.NodeProvisioner, "yes") {
		t.Errorf("node provisioner %q", p.NodeProvisioner)
	}
	if len(p.Capacity) != 2 || !p.Capacity[0].Enough || !p.Capacity[0].SelectedNode || p.Capacity[1].Enough {
		t.Errorf("capacity %+v", p.Capacity)
	}
	if len(p.Pods) != 1 || p.Pods[0].Name != "app" || !p.Pods[0].Scheduled {
		t.Errorf("pods %+v", p.Pods)
	}
	if p.InFlight == nil || p.InFlight.Volume != "pvc-uid-c" || p.InFlight.Driver != driver {
		t.Errorf("in-flight %+v", p.InFlight)
	}
	if len(p.DriverNodes) != 2 {
		t.Errorf("driver nodes %v", p.DriverNodes)
	}
}

func TestLeaseName(t *testing.T) {
	for _, tt := range []struct{ driver, node, want string }{
		{"local.csi.tether.dev", "", "local-csi-tether-dev"},
		{"local.csi.tether.dev", "node-1", "local-csi-tether-dev-node-1"},
		{"Example.com/Disk_v2", "Node.A", "example-com-disk-v2-node-a"},
	} {
		if got := LeaseName(tt.driver, tt.node); got != tt.want {
			t.Errorf("LeaseName(%q, %q) = %q, want %q", tt.driver, tt.node, got, tt.want)
		}
	}
}
