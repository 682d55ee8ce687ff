package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/pkg/capacity"
	"github.com/tether-csi/tether/test/cluster"
)

// sizedDriver answers every GetCapacity with 1Gi.
type sizedDriver struct{}

func (sizedDriver) DriverName() string { return "owner.csi.tether.dev" }
func (sizedDriver) GetCapacity(context.Context, *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	return &csi.GetCapacityResponse{AvailableCapacity: 1 << 30}, nil
}

// TestCapacityOwnerAnyKind: --capacity-ownerref-level walks controllers
// of any kind on a real API server, as external-provisioner does: a pod
// of a Job of a CronJob (made by hand, no controller runs) has the
// CronJob at level 2, which then owns the published CSIStorageCapacity
// objects, in the publisher and in the provisioner run with
// --capacity-ownerref-level=2 and POD_NAME naming that pod. With
// external-provisioner's Role (get on pods and replicasets) level 1 works
// and level 2 is refused, naming the kind.
func TestCapacityOwnerAnyKind(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	ctx, cs, ns := t.Context(), c.Client, "default"
	yes := true
	podSpec := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "example.com/c"}}}
	cron, err := cs.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "cron"},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: podSpec}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "job",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cron.Name, UID: cron.UID, Controller: &yes}}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "provisioner",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: &yes}}},
		Spec: podSpec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(t *testing.T, cfg *rest.Config, level int) (*metav1.OwnerReference, error) {
		t.Helper()
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		meta, err := metadata.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
		return capacity.LookupOwner(ctx, capacity.MetadataGetter(meta, mapper), ns, pod.Name, level)
	}

	for _, tt := range []struct {
		level                int
		apiVersion, kind, id string
	}{
		{0, "v1", "Pod", string(pod.UID)},
		{1, "batch/v1", "Job", string(job.UID)},
		{2, "batch/v1", "CronJob", string(cron.UID)},
	} {
		owner, err := lookup(t, c.Config, tt.level)
		if err != nil {
			t.Fatalf("level %d: %v", tt.level, err)
		}
		if owner.APIVersion != tt.apiVersion || owner.Kind != tt.kind || string(owner.UID) != tt.id {
			t.Errorf("level %d: owner %+v, want %s %s %s", tt.level, owner, tt.apiVersion, tt.kind, tt.id)
		}
	}
	if _, err := lookup(t, c.Config, 3); err == nil || !strings.Contains(err.Error(), "has no controller") {
		t.Errorf("level 3: %v, want the CronJob's missing controller", err)
	}

	t.Run("external-provisioner's Role", func(t *testing.T) {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "capacity"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "capacity"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get"}},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "capacity"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "capacity", Namespace: ns}},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "capacity"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, cfg := c.ServiceAccountKubeconfig(t, ns, "capacity")
		// The Role is in force once level 1 (a GET of the pod) passes.
		eventually(t, "the Role grants get on pods", func(context.Context) (bool, error) {
			owner, err := lookup(t, cfg, 1)
			return err == nil && owner.Kind == "Job", nil
		})
		_, err := lookup(t, cfg, 2)
		if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "needs get on Job") {
			t.Errorf("level 2 with external-provisioner's Role: %v, want a refusal naming Job", err)
		}
	})

	t.Run("the provisioner", func(t *testing.T) {
		// Its own Role would need get on jobs: the admin's identity.
		cluster.StartLocalStack(t, c, cluster.StackOptions{Nodes: 1,
			ProvisionerArgs: []string{"--capacity-ownerref-level=2", "--capacity-threads=2"},
			ProvisionerEnv:  []string{"POD_NAME=" + pod.Name}})
		createCSIClass(t, c, "owned", localDriver, "Delete", storagev1.VolumeBindingWaitForFirstConsumer)
		eventually(t, "capacity owned by the CronJob", func(ctx context.Context) (bool, error) {
			list, err := cs.StorageV1().CSIStorageCapacities(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, o := range list.Items {
				if o.StorageClassName == "owned" {
					return len(o.OwnerReferences) == 1 && o.OwnerReferences[0].UID == cron.UID, nil
				}
			}
			return false, nil
		})
	})

	t.Run("published objects", func(t *testing.T) {
		owner, err := lookup(t, c.Config, 2)
		if err != nil {
			t.Fatal(err)
		}
		wffc := storagev1.VolumeBindingWaitForFirstConsumer
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		for _, sc := range []*storagev1.StorageClass{
			{ObjectMeta: metav1.ObjectMeta{Name: "everywhere"}, Provisioner: sizedDriver{}.DriverName(), VolumeBindingMode: &wffc},
			{ObjectMeta: metav1.ObjectMeta{Name: "zone-a"}, Provisioner: sizedDriver{}.DriverName(), VolumeBindingMode: &wffc,
				AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
					{Key: "zone", Values: []string{"a"}}}}}},
		} {
			if err := idx.Add(sc); err != nil {
				t.Fatal(err)
			}
		}
		p, err := capacity.New(capacity.Options{Client: cs, Driver: sizedDriver{}, Namespace: ns, Owner: owner, ManagedBy: "owner-test",
			Segments: func() ([]map[string]string, error) { return []map[string]string{{"zone": "a"}, {"zone": "b"}}, nil },
			Classes:  storagelisters.NewStorageClassLister(idx), PollInterval: time.Hour, Threads: 2,
			DriverParams: func(m map[string]string) (map[string]string, error) { return m, nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		list, err := cs.StorageV1().CSIStorageCapacities(ns).List(ctx, metav1.ListOptions{LabelSelector: capacity.LabelManagedBy + "=owner-test"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range list.Items {
			got = append(got, o.StorageClassName+"/"+o.NodeTopology.MatchLabels["zone"])
			if len(o.OwnerReferences) != 1 || o.OwnerReferences[0].UID != cron.UID || o.OwnerReferences[0].Kind != "CronJob" {
				t.Errorf("%s: owners %+v, want the CronJob", o.Name, o.OwnerReferences)
			}
		}
		slices.Sort(got)
		if want := []string{"everywhere/a", "everywhere/b", "zone-a/a"}; !slices.Equal(got, want) {
			t.Errorf("objects %v, want %v", got, want)
		}
	})
}
