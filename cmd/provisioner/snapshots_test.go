package main

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// The snapshot API is used only with a driver that has
// CREATE_DELETE_SNAPSHOT and a cluster that serves VolumeSnapshots.
func TestNewSnapshots(t *testing.T) {
	served := []*metav1.APIResourceList{{GroupVersion: "snapshot.storage.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "volumesnapshots"}, {Name: "volumesnapshotcontents"}}}}
	tests := []struct {
		name      string
		driver    bool
		resources []*metav1.APIResourceList
		want      bool
	}{
		{name: "a driver without snapshots", driver: false, resources: served},
		{name: "no snapshot CRDs", driver: true},
		{name: "a group without volumesnapshots", driver: true, resources: []*metav1.APIResourceList{{GroupVersion: "snapshot.storage.k8s.io/v1"}}},
		{name: "both", driver: true, resources: served, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disc := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: tt.resources}}
			s, err := newSnapshots(t.Context(), &rest.Config{Host: "https://127.0.0.1:1"}, disc, tt.driver)
			if err != nil {
				t.Fatal(err)
			}
			if (s != nil) != tt.want || (s.Client() != nil) != tt.want {
				t.Errorf("snapshots %v, want %v", s != nil, tt.want)
			}
		})
	}
}

// flakyDiscovery fails its first calls as a busy API server does.
type flakyDiscovery struct {
	*fakediscovery.FakeDiscovery
	failures int
}

func (d *flakyDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if d.failures > 0 {
		d.failures--
		return nil, apierrors.NewServiceUnavailable("the API server is starting")
	}
	return d.FakeDiscovery.ServerResourcesForGroupVersion(gv)
}

// Issue 25: a transient error looking for the VolumeSnapshot API at start
// is retried, not fatal.
func TestNewSnapshotsRetriesTransientErrors(t *testing.T) {
	defer func(b wait.Backoff) { snapshotDiscoveryBackoff = b }(snapshotDiscoveryBackoff)
	snapshotDiscoveryBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 10}
	served := []*metav1.APIResourceList{{GroupVersion: "snapshot.storage.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "volumesnapshots"}}}}
	disc := &flakyDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: served}}, failures: 3}
	s, err := newSnapshots(t.Context(), &rest.Config{Host: "https://127.0.0.1:1"}, disc, true)
	if err != nil || s == nil {
		t.Fatalf("after 3 transient failures: snapshots %v, err %v; want the API found", s != nil, err)
	}
}
