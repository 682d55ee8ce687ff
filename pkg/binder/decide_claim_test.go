package binder

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

const csiDriver = "ebs.csi.example.com"

var (
	classGold    = newClass("gold", csiDriver)
	classLocal   = newClass("local", storagehelpers.NotSupportedProvisioner)
	classWFFC    = newClass("wffc", csiDriver, wffc())
	classLocalWF = newClass("local-wffc", storagehelpers.NotSupportedProvisioner, wffc())
	classGP2     = newClass("gp2", "kubernetes.io/aws-ebs")
)

type wantClaim struct {
	op          ClaimOp
	volume      string
	provisioner string
	class       string
	migratedTo  string
	event       wantEvent
}

func checkClaimDecision(t *testing.T, d ClaimDecision, want wantClaim) {
	t.Helper()
	if d.Op != want.op {
		t.Errorf("Op = %s, want %s", d.Op, want.op)
	}
	if got := nameOf(d.Volume); got != want.volume {
		t.Errorf("Volume = %q, want %q", got, want.volume)
	}
	if d.MigratedTo != want.migratedTo {
		t.Errorf("MigratedTo = %q, want %q", d.MigratedTo, want.migratedTo)
	}
	if d.Provisioner != want.provisioner {
		t.Errorf("Provisioner = %q, want %q", d.Provisioner, want.provisioner)
	}
	if d.Class != want.class {
		t.Errorf("Class = %q, want %q", d.Class, want.class)
	}
	checkEvent(t, "claim", d.Event, want.event)
}

func TestDecideClaim(t *testing.T) {
	pv1 := newPV("pv-1", "1Gi")
	tests := []struct {
		name         string
		claim        *v1.PersistentVolumeClaim
		class        *storagev1.StorageClass // the claim's class as the lister finds it
		defaultClass string
		volume       *v1.PersistentVolume // what spec.volumeName names
		match        *v1.PersistentVolume // what Reserve found
		waited       time.Duration        // the claim's age
		want         wantClaim
	}{
		// Unbound claims without volumeName.
		{name: "unbound claim with a match, bind",
			claim: newPVC("c", "1Gi"), match: pv1, defaultClass: "standard",
			want: wantClaim{op: ClaimBind, volume: "pv-1"}},
		{name: "unbound claim with a class and a match, bind",
			claim: newPVC("c", "1Gi", claimClass("gold")), class: classGold, match: newPV("pv-gold", "1Gi", pvClass("gold")),
			want: wantClaim{op: ClaimBind, volume: "pv-gold"}},
		{name: "unbound claim without class, no match, retroactive default class",
			claim: newPVC("c", "1Gi"), defaultClass: "standard",
			want: wantClaim{op: ClaimSetClass, class: "standard"}},
		{name: "unbound claim with storageClassName \"\", no match, default class not set",
			claim: newPVC("c", "1Gi", claimClass("")), defaultClass: "standard",
			want: wantClaim{op: ClaimPending, event: normalEvent(ReasonFailedBinding)}},
		{name: "unbound claim with beta class annotation \"\", no match, default class not set",
			claim: newPVC("c", "1Gi", claimAnn(v1.BetaStorageClassAnnotation, "")), defaultClass: "standard",
			want: wantClaim{op: ClaimPending, event: normalEvent(ReasonFailedBinding)}},
		{name: "unbound claim with beta class annotation, no match, provisioned, default class not set",
			claim: newPVC("c", "1Gi", claimAnn(v1.BetaStorageClassAnnotation, "gold")), class: classGold, defaultClass: "standard",
			waited: time.Minute, want: wantClaim{op: ClaimProvision, provisioner: csiDriver, event: normalEvent(ReasonExternalProvisioning)}},
		{name: "unbound claim with a class, no match, default class not set",
			claim: newPVC("c", "1Gi", claimClass("gold")), class: classGold, defaultClass: "standard",
			waited: time.Minute, want: wantClaim{op: ClaimProvision, provisioner: csiDriver, event: normalEvent(ReasonExternalProvisioning)}},
		{name: "unbound claim without class, no match, no default class",
			claim: newPVC("c", "1Gi"),
			want:  wantClaim{op: ClaimPending, event: wantEvent{typ: v1.EventTypeNormal, reason: ReasonFailedBinding, msg: "no storage class"}}},
		{name: "unbound claim, WaitForFirstConsumer without selected-node, pending",
			claim: newPVC("c", "1Gi", claimClass("wffc")), class: classWFFC,
			waited: time.Minute, want: wantClaim{op: ClaimPending, event: normalEvent(ReasonWaitForFirstConsumer)}},
		{name: "unbound claim, WaitForFirstConsumer no-provisioner class without selected-node, pending",
			claim: newPVC("c", "1Gi", claimClass("local-wffc")), class: classLocalWF,
			waited: time.Minute, want: wantClaim{op: ClaimPending, event: normalEvent(ReasonWaitForFirstConsumer)}},
		{name: "unbound claim, WaitForFirstConsumer with selected-node, no match, provisioned",
			claim: newPVC("c", "1Gi", claimClass("wffc"), claimSelectedNode("n1")), class: classWFFC,
			waited: time.Minute, want: wantClaim{op: ClaimProvision, provisioner: csiDriver, event: normalEvent(ReasonExternalProvisioning)}},
		{name: "unbound claim, WaitForFirstConsumer with selected-node and a match, bind",
			claim: newPVC("c", "1Gi", claimClass("wffc"), claimSelectedNode("n1")), class: classWFFC, match: pv1,
			want: wantClaim{op: ClaimBind, volume: "pv-1"}},
		{name: "unbound claim, class missing, provisioning failed",
			claim: newPVC("c", "1Gi", claimClass("gone")),
			want:  wantClaim{op: ClaimPending, event: wantEvent{typ: v1.EventTypeWarning, reason: ReasonProvisioningFailed, msg: `"gone" not found`}}},
		{name: "unbound claim, no-provisioner class, no match, failed binding",
			claim: newPVC("c", "1Gi", claimClass("local")), class: classLocal,
			want: wantClaim{op: ClaimPending, event: wantEvent{typ: v1.EventTypeNormal, reason: ReasonFailedBinding, msg: "no provisioner"}}},
		{name: "unbound claim, external class, provision",
			claim: newPVC("c", "1Gi", claimClass("gold")), class: classGold, waited: time.Minute,
			want: wantClaim{op: ClaimProvision, provisioner: csiDriver,
				event: wantEvent{typ: v1.EventTypeNormal, reason: ReasonExternalProvisioning, msg: csiDriver}}},
		{name: "unbound claim of a migrated in-tree class (gp2), provisioned by the CSI driver it is migrated to",
			claim: newPVC("c", "1Gi", claimClass("gp2")), class: classGP2, waited: time.Minute,
			want: wantClaim{op: ClaimProvision, provisioner: "ebs.csi.aws.com", migratedTo: "ebs.csi.aws.com",
				event: wantEvent{typ: v1.EventTypeNormal, reason: ReasonExternalProvisioning, msg: "ebs.csi.aws.com"}}},
		{name: "young claim of an external class, provision without the waiting notice",
			claim: newPVC("c", "1Gi", claimClass("gold")), class: classGold, waited: WaitingEventsAfter - time.Second,
			want: wantClaim{op: ClaimProvision, provisioner: csiDriver}},
		{name: "young WaitForFirstConsumer claim, pending without the waiting notice",
			claim: newPVC("c", "1Gi", claimClass("wffc")), class: classWFFC,
			want: wantClaim{op: ClaimPending}},

		// Unbound claims with volumeName.
		{name: "claim with volumeName, volume missing, pending without event",
			claim: newPVC("c", "1Gi", claimVolume("pv-1")), defaultClass: "standard",
			want: wantClaim{op: ClaimPending}},
		{name: "claim with volumeName, volume unclaimed and satisfies, bind",
			claim: newPVC("c", "1Gi", claimVolume("pv-1")), volume: pv1,
			want: wantClaim{op: ClaimBind, volume: "pv-1"}},
		{name: "claim with volumeName, volume unclaimed and larger, bind",
			claim: newPVC("c", "1Gi", claimVolume("pv-big")), volume: newPV("pv-big", "100Gi"),
			want: wantClaim{op: ClaimBind, volume: "pv-big"}},
		{name: "claim with volumeName, volume unclaimed and too small, volume mismatch",
			claim: newPVC("c", "2Gi", claimVolume("pv-1")), volume: pv1,
			want: wantClaim{op: ClaimPending, event: wantEvent{typ: v1.EventTypeWarning, reason: ReasonVolumeMismatch, msg: "too small"}}},
		{name: "claim with volumeName, volume unclaimed of another class, volume mismatch",
			claim: newPVC("c", "1Gi", claimClass("gold"), claimVolume("pv-1")), class: classGold, volume: pv1,
			want: wantClaim{op: ClaimPending, event: warningEvent(ReasonVolumeMismatch)}},
		{name: "claim with volumeName, volume unclaimed with another volumeMode, volume mismatch",
			claim: newPVC("c", "1Gi", claimVolume("pv-1")), volume: newPV("pv-1", "1Gi", pvVolumeMode(v1.PersistentVolumeBlock)),
			want: wantClaim{op: ClaimPending, event: warningEvent(ReasonVolumeMismatch)}},
		{name: "claim with volumeName, volume unclaimed but being deleted, volume mismatch",
			claim: newPVC("c", "1Gi", claimVolume("pv-1")), volume: newPV("pv-1", "1Gi", pvDeleting()),
			want: wantClaim{op: ClaimPending, event: warningEvent(ReasonVolumeMismatch)}},
		{name: "claim with volumeName, volume pre-bound to this claim without UID, bind",
			claim: newPVC("c", "1Gi", claimVolume("pv-1")), volume: newPV("pv-1", "1Gi", pvClaimRef("c", "")),
			want: wantClaim{op: ClaimBind, volume: "pv-1"}},
		{name: "claim with volumeName, volume pre-bound to this claim with its UID, bind",
			claim: newPVC("c", "1Gi", claimVolume("pv-1")), volume: newPV("pv-1", "1Gi", pvClaimRef("c", "uid-c")),
			want: wantClaim{op: ClaimBind, volume: "pv-1"}},
		{name: "claim with volumeName, volume bound to another claim, failed binding",
			claim: newPVC("c", "1Gi", claimVolume("pv-1")), volume: newPV("pv-1", "1Gi", pvClaimRef("other", "uid-other")),
			want: wantClaim{op: ClaimPending, event: wantEvent{typ: v1.EventTypeWarning, reason: ReasonFailedBinding, msg: "different claim"}}},
		{name: "claim with volumeName, volume bound to an older claim of the same name, failed binding",
			claim: newPVC("c", "1Gi", claimVolume("pv-1")), volume: newPV("pv-1", "1Gi", pvClaimRef("c", "uid-old")),
			want: wantClaim{op: ClaimPending, event: warningEvent(ReasonFailedBinding)}},

		// Bound claims (bind-completed).
		{name: "bound claim with volumeName \"\", lost",
			claim: newPVC("c", "1Gi", claimBound("")),
			want:  wantClaim{op: ClaimLost, event: warningEvent(ReasonClaimLost)}},
		{name: "bound claim, volume missing, lost",
			claim: newPVC("c", "1Gi", claimBound("pv-1")),
			want:  wantClaim{op: ClaimLost, event: wantEvent{typ: v1.EventTypeWarning, reason: ReasonClaimLost, msg: `"pv-1"`}}},
		{name: "bound claim, volume claimRef nil, bind",
			claim: newPVC("c", "1Gi", claimBound("pv-1")), volume: pv1,
			want: wantClaim{op: ClaimBind, volume: "pv-1"}},
		{name: "bound claim, volume claimRef with the claim's UID, bind",
			claim: newPVC("c", "1Gi", claimBound("pv-1")), volume: newPV("pv-1", "1Gi", pvClaimRef("c", "uid-c"), pvPhase(v1.VolumeBound)),
			want: wantClaim{op: ClaimBind, volume: "pv-1"}},
		{name: "bound claim, volume claimRef with another UID, misbound",
			claim: newPVC("c", "1Gi", claimBound("pv-1")), volume: newPV("pv-1", "1Gi", pvClaimRef("other", "uid-other")),
			want: wantClaim{op: ClaimLost, event: wantEvent{typ: v1.EventTypeWarning, reason: ReasonClaimMisbound, msg: `"pv-1"`}}},
		{name: "bound claim, volume smaller than the request, still bind (never re-checked)",
			claim: newPVC("c", "10Gi", claimBound("pv-1")), volume: newPV("pv-1", "1Gi", pvClaimRef("c", "uid-c")),
			want: wantClaim{op: ClaimBind, volume: "pv-1"}},
		{name: "bound claim with bad input, volume bound to it, bind",
			claim: newPVC("c", "1Gi", claimBound("pv-1"), claimNoRequest()), volume: newPV("pv-1", "1Gi", pvClaimRef("c", "uid-c")),
			want: wantClaim{op: ClaimBind, volume: "pv-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			needs, err := ParseClaim(tt.claim)
			d := DecideClaim(ClaimInput{Claim: tt.claim, Needs: needs, NeedsErr: err, Class: tt.class,
				DefaultClass: tt.defaultClass, Volume: tt.volume, Match: tt.match, Waited: tt.waited})
			checkClaimDecision(t, d, tt.want)
		})
	}
}

func TestDecideClaimBadInput(t *testing.T) {
	pv := newPV("pv-1", "1Gi", pvClass("gold"))
	for _, tt := range badClaims {
		for _, variant := range []struct {
			name  string
			claim *v1.PersistentVolumeClaim
		}{
			{"", tt.claim},
			{", with a class", withOpts(tt.claim, claimClass("gold"))},
			{", with volumeName", withOpts(tt.claim, claimClass("gold"), claimVolume("pv-1"))},
		} {
			t.Run(tt.name+variant.name, func(t *testing.T) {
				needs, err := ParseClaim(variant.claim)
				if err == nil {
					t.Fatal("ParseClaim: no error")
				}
				// The search and the volume check must not choke on it either.
				ix := indexOf(pv, newPV("pv-2", "1Gi"), newPV("pv-pre", "1Gi", pvClaimRef("bad", "")))
				_ = ix.Reserve(MatchQuery{Needs: needs})
				_ = Satisfies(pv, needs)
				d := DecideClaim(ClaimInput{Claim: variant.claim, Needs: needs, NeedsErr: err, Class: classGold,
					DefaultClass: "standard", Volume: pv, Match: nil})
				checkClaimDecision(t, d, wantClaim{op: ClaimPending,
					event: wantEvent{typ: v1.EventTypeWarning, reason: ReasonFailedBinding, msg: tt.want}})
				if d.Event != nil && !strings.Contains(d.Event.Message, err.Error()) {
					t.Errorf("event %q does not name the problem %q", d.Event.Message, err)
				}
			})
		}
	}
}

func withOpts(c *v1.PersistentVolumeClaim, opts ...pvcOpt) *v1.PersistentVolumeClaim {
	c = c.DeepCopy()
	for _, o := range opts {
		o(c)
	}
	return c
}

// TestClaimSync runs a claim through what syncClaimOnce decides before it
// writes: parse, search the index (unbound claims without volumeName),
// decide.
func TestClaimSync(t *testing.T) {
	node1 := map[string]string{"host": "n1"}
	tests := []struct {
		name         string
		pvs          []*v1.PersistentVolume
		claim        *v1.PersistentVolumeClaim
		class        *storagev1.StorageClass
		defaultClass string
		node         map[string]string
		waited       time.Duration
		want         wantClaim
	}{
		{name: "unbound claim, smallest PV wins",
			pvs:   []*v1.PersistentVolume{newPV("pv-5g", "5Gi"), newPV("pv-2g", "2Gi"), newPV("pv-1g", "1Gi")},
			claim: newPVC("c", "2Gi"), want: wantClaim{op: ClaimBind, volume: "pv-2g"}},
		{name: "unbound claim, no PV fits, default class assigned",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi")},
			claim: newPVC("c", "2Gi"), defaultClass: "standard", want: wantClaim{op: ClaimSetClass, class: "standard"}},
		{name: "unbound claim of an external class, only a PV of another class, provision",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi")},
			claim: newPVC("c", "1Gi", claimClass("gold")), class: classGold,
			waited: time.Minute, want: wantClaim{op: ClaimProvision, provisioner: csiDriver, event: normalEvent(ReasonExternalProvisioning)}},
		{name: "unbound WaitForFirstConsumer claim without node, free PV not taken",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi", pvClass("wffc"))},
			claim: newPVC("c", "1Gi", claimClass("wffc")), class: classWFFC,
			waited: time.Minute, want: wantClaim{op: ClaimPending, event: normalEvent(ReasonWaitForFirstConsumer)}},
		{name: "unbound WaitForFirstConsumer claim without node, pre-bound PV bound",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi", pvClass("wffc")), newPV("pv-pre", "1Gi", pvClass("wffc"), pvClaimRef("c", ""))},
			claim: newPVC("c", "1Gi", claimClass("wffc")), class: classWFFC,
			want: wantClaim{op: ClaimBind, volume: "pv-pre"}},
		{name: "unbound WaitForFirstConsumer claim on node n1, PV on n1 bound",
			pvs: []*v1.PersistentVolume{newPV("pv-n2", "1Gi", pvClass("local-wffc"), pvNode("host", "n2")),
				newPV("pv-n1", "1Gi", pvClass("local-wffc"), pvNode("host", "n1"))},
			claim: newPVC("c", "1Gi", claimClass("local-wffc"), claimSelectedNode("n1")), class: classLocalWF, node: node1,
			want: wantClaim{op: ClaimBind, volume: "pv-n1"}},
		{name: "unbound WaitForFirstConsumer claim on node n1, only PV on n2, failed binding",
			pvs:   []*v1.PersistentVolume{newPV("pv-n2", "1Gi", pvClass("local-wffc"), pvNode("host", "n2"))},
			claim: newPVC("c", "1Gi", claimClass("local-wffc"), claimSelectedNode("n1")), class: classLocalWF, node: node1,
			want: wantClaim{op: ClaimPending, event: normalEvent(ReasonFailedBinding)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := indexOf(tt.pvs...)
			needs, err := ParseClaim(tt.claim)
			in := ClaimInput{Claim: tt.claim, Needs: needs, NeedsErr: err, Class: tt.class, DefaultClass: tt.defaultClass, Waited: tt.waited}
			if !BindCompleted(tt.claim) && tt.claim.Spec.VolumeName == "" && err == nil {
				in.Match = ix.Reserve(MatchQuery{Needs: needs, DelayBinding: DelayBinding(tt.class), NodeLabels: tt.node})
			}
			checkClaimDecision(t, DecideClaim(in), tt.want)
		})
	}
}

func TestClaimOpString(t *testing.T) {
	for op, want := range map[ClaimOp]string{ClaimPending: "pending", ClaimBind: "bind", ClaimLost: "lost",
		ClaimProvision: "provision", ClaimSetClass: "set-class"} {
		if got := op.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", op, got, want)
		}
	}
}

func TestDelayBinding(t *testing.T) {
	immediate := newClass("imm", csiDriver, func(sc *storagev1.StorageClass) {
		m := storagev1.VolumeBindingImmediate
		sc.VolumeBindingMode = &m
	})
	for _, tt := range []struct {
		name  string
		class *storagev1.StorageClass
		want  bool
	}{{"no class", nil, false}, {"mode unset", classGold, false}, {"Immediate", immediate, false}, {"WaitForFirstConsumer", classWFFC, true}} {
		if got := DelayBinding(tt.class); got != tt.want {
			t.Errorf("%s: DelayBinding = %v, want %v", tt.name, got, tt.want)
		}
	}
}
