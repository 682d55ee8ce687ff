package capacity

import (
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
)

// object is the metadata of an object in namespace ns (none for "")
// controlled by owner, if set.
func object(apiVersion, kind, ns, name string, owner *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
	if owner != nil {
		yes := true
		o.OwnerReferences = []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "not-the-controller", UID: "uid-other"},
			{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: &yes},
		}
	}
	return o
}

func TestLookupOwner(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Pod"}, {Group: "apps", Version: "v1", Kind: "ReplicaSet"}, {Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "batch", Version: "v1", Kind: "Job"}, {Group: "batch", Version: "v1", Kind: "CronJob"},
	} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Pool"}, meta.RESTScopeRoot)

	deploy := object("apps/v1", "Deployment", "ns", "deploy", nil)
	rs := object("apps/v1", "ReplicaSet", "ns", "rs", deploy)
	cron := object("batch/v1", "CronJob", "ns", "cron", nil)
	job := object("batch/v1", "Job", "ns", "job", cron)
	pool := object("example.com/v1", "Pool", "", "pool", nil)
	tenant := object("example.com/v1", "Tenant", "ns", "tenant", nil) // no mapping
	objects := []runtime.Object{
		object("v1", "Pod", "ns", "of-rs", rs), rs, deploy,
		object("v1", "Pod", "ns", "of-job", job), job, cron,
		object("v1", "Pod", "ns", "alone", nil),
		object("v1", "Pod", "ns", "of-ds", object("apps/v1", "DaemonSet", "ns", "ds", nil)),
		object("v1", "Pod", "ns", "of-pool-job", object("batch/v1", "Job", "ns", "pool-job", pool)), object("batch/v1", "Job", "ns", "pool-job", pool), pool,
		object("v1", "Pod", "ns", "of-tenant-job", object("batch/v1", "Job", "ns", "tenant-job", tenant)),
		object("batch/v1", "Job", "ns", "tenant-job", tenant),
		object("v1", "Pod", "ns", "of-secret-job", object("batch/v1", "Job", "ns", "secret-job", cron)), object("batch/v1", "Job", "ns", "secret-job", cron),
	}
	for _, tt := range []struct {
		name      string
		pod       string
		level     int
		want      string // apiVersion/kind/name/uid
		wantReads []string
		wantErr   string
	}{
		{name: "no owner", pod: "of-rs", level: -1},
		{name: "the pod", pod: "of-rs", level: 0, want: "v1/Pod/of-rs/uid-of-rs", wantReads: []string{"pods ns/of-rs"}},
		{name: "its ReplicaSet", pod: "of-rs", level: 1, want: "apps/v1/ReplicaSet/rs/uid-rs", wantReads: []string{"pods ns/of-rs"}},
		{name: "the Deployment", pod: "of-rs", level: 2, want: "apps/v1/Deployment/deploy/uid-deploy", wantReads: []string{"pods ns/of-rs", "replicasets ns/rs"}},
		{name: "a DaemonSet, not read", pod: "of-ds", level: 1, want: "apps/v1/DaemonSet/ds/uid-ds", wantReads: []string{"pods ns/of-ds"}},
		{name: "the CronJob of a Job", pod: "of-job", level: 2, want: "batch/v1/CronJob/cron/uid-cron", wantReads: []string{"pods ns/of-job", "jobs ns/job"}},
		{name: "above the top", pod: "of-job", level: 3, wantErr: "CronJob ns/cron, at level 2, has no controller",
			wantReads: []string{"pods ns/of-job", "jobs ns/job", "cronjobs ns/cron"}},
		{name: "a pod of no controller", pod: "alone", level: 1, wantErr: "has no controller", wantReads: []string{"pods ns/alone"}},
		{name: "a cluster-scoped owner", pod: "of-pool-job", level: 3, wantErr: "Pool ns/pool, at level 2, has no controller",
			wantReads: []string{"pods ns/of-pool-job", "jobs ns/pool-job", "pools /pool"}},
		{name: "a kind without a resource", pod: "of-tenant-job", level: 3, wantErr: "example.com/v1 Tenant ns/tenant",
			wantReads: []string{"pods ns/of-tenant-job", "jobs ns/tenant-job"}},
		{name: "a read refused", pod: "of-secret-job", level: 2, wantErr: "needs get on Job",
			wantReads: []string{"pods ns/of-secret-job", "jobs ns/secret-job"}},
		{name: "no pod", pod: "gone", level: 0, wantErr: "not found", wantReads: []string{"pods ns/gone"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			scheme := metadatafake.NewTestScheme()
			if err := metav1.AddMetaToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			client := metadatafake.NewSimpleMetadataClient(scheme, objects...)
			client.PrependReactor("get", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if name := a.(k8stesting.GetAction).GetName(); name == "secret-job" {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, name, nil)
				}
				return false, nil, nil
			})
			ref, err := LookupOwner(t.Context(), MetadataGetter(client, mapper), "ns", tt.pod, tt.level)
			var reads []string
			for _, a := range client.Actions() {
				reads = append(reads, a.GetResource().Resource+" "+a.GetNamespace()+"/"+a.(k8stesting.GetAction).GetName())
			}
			if !slices.Equal(reads, tt.wantReads) {
				t.Errorf("reads %q, want %q", reads, tt.wantReads)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if ref != nil {
				got = strings.Join([]string{ref.APIVersion, ref.Kind, ref.Name, string(ref.UID)}, "/")
				if ref.Controller == nil || !*ref.Controller {
					t.Error("the reference is not a controller's")
				}
			}
			if got != tt.want {
				t.Errorf("owner %q, want %q", got, tt.want)
			}
		})
	}
}
