package server

import (
	"errors"
	"os"
	"regexp"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/version"
)

func TestNewerMinor(t *testing.T) {
	for _, tt := range []struct {
		major, minor string
		want         bool
	}{
		{"1", "36", false}, {"1", "35", false}, {"1", "37", true}, {"1", "37+", true}, {"1", "36+", false},
		{"1", "", true}, {"2", "0", true}, {"1", "x", true},
	} {
		if got := NewerMinor(&version.Info{Major: tt.major, Minor: tt.minor}, 36); got != tt.want {
			t.Errorf("server %s.%s against client 36: newer %v, want %v", tt.major, tt.minor, got, tt.want)
		}
	}
	if !NewerMinor(nil, 36) {
		t.Error("no version: not newer")
	}
}

func TestAPIMinor(t *testing.T) {
	if m, err := apiMinor("v0.36.3"); err != nil || m != 36 {
		t.Errorf("v0.36.3: %d %v", m, err)
	}
	for _, bad := range []string{"v1.2.3", "v0", "(devel)"} {
		if _, err := apiMinor(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/api (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/api")
	}
	if minor, err := apiMinor(string(m[1])); err != nil || minor != APITypesMinor {
		t.Errorf("go.mod requires k8s.io/api %s (minor %d, %v); APITypesMinor is %d", m[1], minor, err, APITypesMinor)
	}
}

type versions struct {
	info *version.Info
	err  error
}

func (v *versions) ServerVersion() (*version.Info, error) { return v.info, v.err }

func TestWatchSkew(t *testing.T) {
	v := &versions{err: errors.New("unreachable")}
	s := WatchSkew(t.Context(), v, 36, time.Hour)
	if !s.Newer() {
		t.Error("before a first read: not newer")
	}
	v = &versions{info: &version.Info{Major: "1", Minor: "36"}}
	s = WatchSkew(t.Context(), v, 36, time.Hour)
	if s.Newer() {
		t.Error("a server of the client's minor: newer")
	}
}
