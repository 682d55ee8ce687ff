package sweep

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
)

func TestOwnershipOf(t *testing.T) {
	tests := []struct {
		name    string
		context map[string]string
		cluster string
		want    Ownership
	}{
		{"no context", nil, thisCluster, Unmarked},
		{"no mark", map[string]string{"name": volA}, thisCluster, Unmarked},
		{"ours, Delete", oursDelete, thisCluster, OwnedDelete},
		{"ours, Retain", oursRetain, thisCluster, OwnedRetain},
		{"ours, Recycle", ownerMark(thisCluster, v1.PersistentVolumeReclaimRecycle), thisCluster, OwnedRetain},
		{"another cluster's", ownerMark(otherCluster, v1.PersistentVolumeReclaimDelete), thisCluster, OtherCluster},
		{"a prefix of our ID is another cluster", ownerMark("cluster", v1.PersistentVolumeReclaimDelete), thisCluster, OtherCluster},
		{"a cluster ID with slashes", ownerMark("a/b", v1.PersistentVolumeReclaimDelete), "a/b", OwnedDelete},
		{"no policy", map[string]string{request.OwnerKey: "/" + thisCluster}, thisCluster, Unmarked},
		{"no cluster", map[string]string{request.OwnerKey: "Delete/"}, thisCluster, Unmarked},
		{"no slash", map[string]string{request.OwnerKey: thisCluster}, thisCluster, Unmarked},
		{"we have no ID (report policy)", oursDelete, "", Unmarked},
	}
	for _, tt := range tests {
		if got := ownershipOf(tt.context, tt.cluster); got != tt.want {
			t.Errorf("%s: ownershipOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// deletable is an orphan the sweep deletes; each row changes one fact.
	deletable := Facts{Policy: Delete, Mark: OwnedDelete, OrphanedSince: t0, Now: t0.Add(5 * time.Hour),
		MinAge: time.Hour, PV: PVNever, Born: true}
	tests := []struct {
		name       string
		change     func(*Facts)
		wantAction Action
		wantReason KeepReason
	}{
		{"ours, Delete, born while watched, never named by a PV, old enough", nil, ActionDelete, Deleting},
		{"exactly MinAge", func(f *Facts) { f.Now = t0.Add(time.Hour) }, ActionDelete, Deleting},
		{"first seen orphaned now", func(f *Facts) { f.Now = t0 }, ActionWatch, KeptWatching},
		{"first seen orphaned now, not ours", func(f *Facts) { f.Now, f.Mark = t0, Unmarked }, ActionWatch, KeptWatching},
		{"younger than MinAge", func(f *Facts) { f.Now = t0.Add(time.Minute) }, ActionReport, KeptYoung},
		{"report policy", func(f *Facts) { f.Policy = Report }, ActionReport, KeptReportPolicy},
		{"marked for a Retain class", func(f *Facts) { f.Mark = OwnedRetain }, ActionReport, KeptMark},
		{"another cluster's mark", func(f *Facts) { f.Mark = OtherCluster }, ActionReport, KeptMark},
		{"no mark", func(f *Facts) { f.Mark = Unmarked }, ActionReport, KeptMark},
		// The mark says Delete; what a PV said outranks it.
		{"a PV kept it with Retain", func(f *Facts) { f.PV = PVRetained }, ActionReport, KeptRetainedByPV},
		{"a Delete PV named it (CSI or in-tree)", func(f *Facts) { f.PV = PVNamed }, ActionReport, KeptNamedByPV},
		{"an in-tree PV of the driver could not be read", func(f *Facts) { f.UnreadablePV = true }, ActionReport, KeptUnreadablePV},
		{"there before the first listings", func(f *Facts) { f.Born = false }, ActionReport, KeptHistoryUnknown},
		{"abandoned", func(f *Facts) { f.GaveUp = true }, ActionReport, KeptAbandoned},
		{"abandoned, first seen now", func(f *Facts) { f.GaveUp, f.Now = true, t0 }, ActionReport, KeptAbandoned},
		{"retained and there before", func(f *Facts) { f.PV, f.Born = PVRetained, false }, ActionReport, KeptRetainedByPV},
		{"retained, young", func(f *Facts) { f.PV, f.Now = PVRetained, t0.Add(time.Minute) }, ActionReport, KeptRetainedByPV},
		{"not born, report policy", func(f *Facts) { f.Born, f.Policy = false, Report }, ActionReport, KeptReportPolicy},
	}
	for _, tt := range tests {
		f := deletable
		if tt.change != nil {
			tt.change(&f)
		}
		action, reason := Decide(f)
		if action != tt.wantAction || reason != tt.wantReason {
			t.Errorf("%s: Decide = %v, %q; want %v, %q", tt.name, action, reason, tt.wantAction, tt.wantReason)
		}
	}
}

// ebsPV is an in-tree AWS EBS PV of name for the volume of volumeID.
func ebsPV(name, volumeID string, reclaim v1.PersistentVolumeReclaimPolicy) *v1.PersistentVolume {
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: reclaim, PersistentVolumeSource: v1.PersistentVolumeSource{
			AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: volumeID}}}}
}

const ebsCSI = "ebs.csi.aws.com"

func TestVolumeKeys(t *testing.T) {
	tests := []struct {
		name    string
		pv      *v1.PersistentVolume
		driver  string
		want    []string
		wantErr bool
	}{
		{name: "a CSI PV of the driver", pv: sweepPV("p", driverNm, "vol-1"), driver: driverNm, want: []string{"p", "vol-1"}},
		{name: "a CSI PV of another driver", pv: sweepPV("p", "other.csi", "vol-1"), driver: driverNm, want: []string{"p"}},
		{name: "a handle with a path", pv: sweepPV("p", driverNm, "projects/x/zones/z/disks/d-1"), driver: driverNm,
			want: []string{"p", "projects/x/zones/z/disks/d-1", "d-1"}},
		{name: "an in-tree EBS PV, for the EBS driver", pv: ebsPV("p", "aws://us-east-1a/vol-0abc", v1.PersistentVolumeReclaimRetain), driver: ebsCSI,
			want: []string{"p", "vol-0abc"}},
		{name: "an in-tree EBS PV with a bare ID", pv: ebsPV("p", "vol-0abc", v1.PersistentVolumeReclaimRetain), driver: ebsCSI,
			want: []string{"p", "vol-0abc"}},
		{name: "an in-tree EBS PV, for another driver", pv: ebsPV("p", "vol-0abc", v1.PersistentVolumeReclaimRetain), driver: driverNm,
			want: []string{"p"}},
		{name: "an in-tree EBS PV that cannot be translated", pv: ebsPV("p", "aws://us-east-1a/a/b/c/vol-0abc", v1.PersistentVolumeReclaimRetain),
			driver: ebsCSI, want: []string{"p"}, wantErr: true},
		{name: "an NFS PV", pv: &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/x"}}}},
			driver: ebsCSI, want: []string{"p"}},
	}
	for _, tt := range tests {
		got, err := volumeKeys(ktesting.NewLogger(t, ktesting.NewConfig()), tt.pv, tt.driver)
		if !slices.Equal(got, tt.want) || (err != nil) != tt.wantErr {
			t.Errorf("%s: volumeKeys = %v, %v; want %v, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestPVMemory: what PVs named is never forgotten, and Retain outranks
// Delete whatever the order of the events.
func TestPVMemory(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	m := newPVMemory(ebsCSI)
	retained := ebsPV("kept", "aws://us-east-1a/vol-0aaa", v1.PersistentVolumeReclaimRetain)
	m.note(logger, ebsPV("kept", "aws://us-east-1a/vol-0aaa", v1.PersistentVolumeReclaimDelete))
	m.note(logger, retained) // patched to Retain
	m.note(logger, ebsPV("kept", "aws://us-east-1a/vol-0aaa", v1.PersistentVolumeReclaimDelete))
	m.note(logger, ebsPV("plain", "vol-0bbb", v1.PersistentVolumeReclaimDelete))
	tests := []struct {
		id, name string
		want     PVHistory
	}{
		{"vol-0aaa", "", PVRetained},
		{"x", "kept", PVRetained}, // by PV name
		{"vol-0bbb", "pvc-x", PVNamed},
		{"vol-0ccc", "pvc-y", PVNever},
	}
	for _, tt := range tests {
		if got := m.of(tt.id, tt.name); got != tt.want {
			t.Errorf("of(%q, %q) = %v, want %v", tt.id, tt.name, got, tt.want)
		}
	}
	if len(m.unreadable) != 0 {
		t.Errorf("unreadable: %v", m.unreadable)
	}
	m.note(logger, ebsPV("bad", "aws://a/b/c/d", v1.PersistentVolumeReclaimDelete))
	if _, ok := m.unreadable["bad"]; !ok {
		t.Errorf("an untranslatable EBS PV is not remembered as unreadable: %v", m.unreadable)
	}
}

// TestListingMemory: which volumes count as made while the sweeper
// watched, over sequences of complete listings.
func TestListingMemory(t *testing.T) {
	tests := []struct {
		name     string
		listings [][]string
		wantBorn []string // after the last listing
		wantKnow []string // every volume remembered
	}{
		{name: "in the first listing: there before", listings: [][]string{{"a"}, {"a"}, {"a"}}, wantKnow: []string{"a"}},
		{name: "first in the second listing: there before (the first may have missed it)",
			listings: [][]string{{}, {"a"}, {"a"}}, wantKnow: []string{"a"}},
		{name: "first in the third listing: made since", listings: [][]string{{}, {}, {"a"}}, wantBorn: []string{"a"}, wantKnow: []string{"a"}},
		{name: "a volume there before and then missing is never forgotten",
			listings: [][]string{{"a"}, {}, {}, {}, {"a"}}, wantKnow: []string{"a"}},
		{name: "a volume made since, missing once, is still the same",
			listings: [][]string{{}, {}, {"a"}, {}, {"a"}}, wantBorn: []string{"a"}, wantKnow: []string{"a"}},
		{name: "a volume made since, missing twice, is forgotten",
			listings: [][]string{{}, {}, {"a"}, {}, {}}},
		{name: "forgotten, then listed again: made since",
			listings: [][]string{{}, {}, {"a"}, {}, {}, {"a"}}, wantBorn: []string{"a"}, wantKnow: []string{"a"}},
	}
	for _, tt := range tests {
		m := listingMemory{volumes: map[string]*listedState{}}
		for _, l := range tt.listings {
			ids := map[string]listed{}
			for _, id := range l {
				ids[id] = listed{name: id}
			}
			m.note(ids)
		}
		var born []string
		for id := range m.volumes {
			if m.born(id) {
				born = append(born, id)
			}
		}
		slices.Sort(born)
		if know := slices.Sorted(maps.Keys(m.volumes)); !slices.Equal(born, tt.wantBorn) || !slices.Equal(know, tt.wantKnow) {
			t.Errorf("%s: born %v, known %v; want %v, %v", tt.name, born, know, tt.wantBorn, tt.wantKnow)
		}
	}
}

func TestAccounting(t *testing.T) {
	a := accounting{names: map[string]string{}, handles: map[string]string{}}
	// A record of a format this provisioner does not read still accounts
	// for the volume it names: the sweep never takes that one for an orphan.
	newer := sweepClaim("c", "0c1b2c3d-0000-4000-8000-00000000000c", "pvc-newer")
	newer.Annotations[inflight.AnnFormat] = "2"
	a.accountClaims([]*v1.PersistentVolumeClaim{sweepClaim("a", uidA, ""), sweepClaim("b", uidB, "pvc-renamed"), newer},
		request.Options{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: 8})
	a.accountVolumes(ktesting.NewLogger(t, ktesting.NewConfig()), []*v1.PersistentVolume{sweepPV("p1", driverNm, "h1"), sweepPV("p2", "other.csi", "h2"),
		{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}}, sweepPV("p3", driverNm, "projects/p/zones/z/disks/pvc-disk")}, driverNm)
	tests := []struct {
		id, name string
		tracked  bool
	}{
		{"x", "pvc-0a1b2c3d", true}, // claim a's name, cut to 8
		{"x", "pvc-renamed", true},  // claim b's record
		{"x", "pvc-newer", true},    // claim c's record, of a newer format
		{"x", "pvc-" + uidA, false}, // the uncut name is not claim a's
		{"h1", "x", true},
		{"h2", "x", false}, // another driver's handle
		{"x", "p2", true},  // a PV's name
		{"x", "nfs", true},
		{"projects/p/zones/z/disks/pvc-disk", "x", true},
		{"x", "pvc-disk", true}, // the handle's last element, as a name
	}
	for _, tt := range tests {
		if got := a.tracks(tt.id, tt.name) != ""; got != tt.tracked {
			t.Errorf("tracks(%q, %q) = %v, want %v", tt.id, tt.name, got, tt.tracked)
		}
	}
	if by := a.tracks("x", "pvc-renamed"); by != fmt.Sprintf("claim %s/b (in flight)", testNS) {
		t.Errorf("tracks says %q", by)
	}
}
