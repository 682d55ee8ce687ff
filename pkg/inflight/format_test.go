package inflight

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// withFormat is claim(volume, finalizers...) whose annotations name format
// f ("" for none).
func withFormat(f, volume string, finalizers ...string) *v1.PersistentVolumeClaim {
	c := claim(volume, finalizers...)
	if f != "" {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[AnnFormat] = f
	}
	return c
}

func TestFormat(t *testing.T) {
	tests := []struct {
		name       string
		value      string
		wantFormat int
		wantRead   bool
	}{
		{"no annotation: a record written before formats were named", "", 1, true},
		{"format 1", "1", 1, true},
		{"a newer release's format", "2", 2, false},
		{"far newer", "40", 40, false},
		{"zero is no format", "0", 0, false},
		{"negative", "-1", 0, false},
		{"leading zero: not the number's own spelling", "01", 0, false},
		{"plus sign", "+1", 0, false},
		{"not a number", "v1", 0, false},
		{"empty value", " ", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := claim(testVolume, Finalizer)
			if tt.value != "" {
				c.Annotations[AnnFormat] = tt.value
			}
			f, read := Format(c)
			if f != tt.wantFormat || read != tt.wantRead {
				t.Errorf("Format = %d, %v; want %d, %v", f, read, tt.wantFormat, tt.wantRead)
			}
			if got, want := Unread(c), !tt.wantRead; got != want {
				t.Errorf("Unread = %v, want %v", got, want)
			}
		})
	}
}

// A format annotation without the record's finalizer is no record: nothing
// to leave alone.
func TestUnreadNeedsTheRecord(t *testing.T) {
	if Unread(withFormat("9", testVolume)) {
		t.Error("Unread without the finalizer")
	}
	if !Unread(withFormat("9", testVolume, "other", Finalizer)) {
		t.Error("not Unread with the finalizer among others")
	}
}

func TestRecordWritesItsFormat(t *testing.T) {
	c := claim("")
	if !Record(c, testDriver, testVolume) {
		t.Fatal("Record reported no change")
	}
	if got := c.Annotations[AnnFormat]; got != "1" {
		t.Errorf("format annotation %q, want 1", got)
	}
	// A record of format 1 without the annotation (an earlier version's)
	// is the same record: no write.
	old := claim(testVolume, Finalizer)
	if Record(old, testDriver, testVolume) {
		t.Error("Record rewrote an earlier version's record of the same volume")
	}
	if _, ok := old.Annotations[AnnFormat]; ok {
		t.Error("Record added a format to an unchanged record")
	}
	// A record this version does not read is never taken for its own.
	newer := withFormat("2", testVolume, Finalizer)
	if !Record(newer, testDriver, testVolume) || newer.Annotations[AnnFormat] != "1" {
		t.Errorf("Record on an unread record: format %q", newer.Annotations[AnnFormat])
	}
}

func TestForgetRemovesTheFormat(t *testing.T) {
	c := withFormat("1", testVolume, Finalizer)
	if !Forget(c) {
		t.Fatal("Forget reported no change")
	}
	if _, ok := c.Annotations[AnnFormat]; ok {
		t.Error("the format annotation stayed")
	}
	// One left by an earlier binder, which knew no format, goes too.
	left := withFormat("1", "")
	if !Forget(left) || left.Annotations != nil {
		t.Errorf("a left format annotation: %v", left.Annotations)
	}
}

// A record of a format this version does not read is never settled by a
// PV, whatever the PV: the binder leaves it to a provisioner that reads it.
func TestSettleLeavesAnUnreadRecord(t *testing.T) {
	for _, f := range []string{"2", "x"} {
		c := withFormat(f, testVolume, Finalizer)
		if Tracks(pv(testVolume, testDriver, "uid-1"), c) || Settle(c, pv(testVolume, testDriver, "uid-1")) {
			t.Errorf("format %q: settled", f)
		}
		if !Holds(c) || c.Annotations[AnnFormat] != f {
			t.Errorf("format %q: the record changed: %v %v", f, c.Finalizers, c.Annotations)
		}
	}
	if !Settle(withFormat("1", testVolume, Finalizer), pv(testVolume, testDriver, "uid-1")) {
		t.Error("format 1 not settled")
	}
}
