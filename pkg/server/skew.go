package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// Skew says whether the API server is of a newer minor release than the
// API types this program was built with (k8s.io/api). A newer server may
// hold fields those types do not know, which a full update would drop: a
// writer that must keep them patches instead while Newer is true.
type Skew struct {
	newer atomic.Bool
}

// Newer reports whether the API server was last seen newer than the
// program's API types, or could not be read yet.
func (s *Skew) Newer() bool { return s.newer.Load() }

// WatchSkew reads the API server's version now and then every interval
// until ctx ends (a control plane is upgraded under running controllers).
// Until a first read succeeds, and for a version it cannot parse, it
// reports newer: a patch keeps every field, an update only the known ones.
func WatchSkew(ctx context.Context, versions discovery.ServerVersionInterface, clientMinor int, interval time.Duration) *Skew {
	s := &Skew{}
	s.newer.Store(true)
	check := func() {
		info, err := versions.ServerVersion()
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Could not read the API server's version; writes patch until it is read", "err", err)
			return
		}
		newer := NewerMinor(info, clientMinor)
		if s.newer.Swap(newer) != newer || newer {
			klog.FromContext(ctx).V(1).Info("API server version read", "server", info.GitVersion, "clientMinor", clientMinor, "newer", newer)
		}
	}
	check()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				check()
			}
		}
	}()
	return s
}

// NewerMinor reports whether the server's minor release is above
// clientMinor; a minor it cannot read counts as newer. It is pure.
func NewerMinor(server *version.Info, clientMinor int) bool {
	if server == nil || server.Major != "1" {
		return true
	}
	minor, err := strconv.Atoi(strings.TrimRight(server.Minor, "+"))
	if err != nil {
		return true
	}
	return minor > clientMinor
}

// APITypesMinor is the Kubernetes minor release of the API types tether is
// built with: that of its k8s.io/api module (go.mod, v0.36.x; a test holds
// the two together).
const APITypesMinor = 36

// apiMinor reads the minor of a k8s.io/api version (v0.MINOR.PATCH).
func apiMinor(v string) (int, error) {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 || parts[0] != "0" {
		return 0, fmt.Errorf("k8s.io/api version %q is not v0.MINOR.PATCH", v)
	}
	return strconv.Atoi(parts[1])
}
