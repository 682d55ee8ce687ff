package gogc

import "testing"

func TestPercent(t *testing.T) {
	for _, tt := range []struct {
		gogc      string
		set       bool
		want      int
		wantApply bool
	}{
		{"", false, 50, true},
		{"", true, 50, true}, // GOGC= is unset for the runtime too
		{"100", true, 0, false},
		{"off", true, 0, false},
	} {
		got, apply := Percent(50, tt.gogc, tt.set)
		if got != tt.want || apply != tt.wantApply {
			t.Errorf("Percent(50, %q, %v) = %d, %v; want %d, %v", tt.gogc, tt.set, got, apply, tt.want, tt.wantApply)
		}
	}
}
