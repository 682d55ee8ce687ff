package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/pkg/provisioner/scope"
	"github.com/tether-csi/tether/test/cluster"
)

const scopeDriver = "scope.csi.tether.dev"

var cacheGauge = regexp.MustCompile(`(?m)^tether_provisioner_cached_(objects|names)\{resource="([a-z]+)"\} (\d+)`)

// cached reads the provisioner's cache gauges: "objects claims" and the
// like; nil while the endpoint is not up.
func cached(addr string) map[string]int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]int{}
	for _, m := range cacheGauge.FindAllStringSubmatch(string(body), -1) {
		n, _ := strconv.Atoi(m[3])
		out[m[1]+" "+m[2]] = n
	}
	return out
}

// TestProvisionerCachesWhatItAnswersFor: on a real API server, the
// provisioner keeps whole only the claims and PVs it answers for, and the
// names of the others. Claims of another provisioner and PVs of another
// kind stay out of its cache; its own claims come in when the binder hands
// them over (created without the annotation, so the watch shows each first
// as another's), and leave it once bound; its PVs leave it once bound, and
// come back when released. It provisions and deletes its own as ever.
func TestProvisionerCachesWhatItAnswersFor(t *testing.T) {
	const others, staticPVs, ours = 30, 10, 5
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	mock := startMock(t, c, scopeDriver, "")
	mustCreate(t, cs.StorageV1().CSIDrivers().Create, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: scopeDriver}})
	addr := cluster.FreeAddr(t)
	startProvisioner(t, c, "scope", mock.Socket, "--http-endpoint="+addr)
	startBinder(t, c)
	createCSIClass(t, c, "scope", scopeDriver, "Delete", storagev1.VolumeBindingImmediate)
	createCSIClass(t, c, "elsewhere", "other.csi.example.com", "Delete", storagev1.VolumeBindingImmediate)

	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	for i := range others {
		mustCreate(t, pvcs.Create, claim(fmt.Sprintf("other-%d", i), "elsewhere", "1Gi"))
	}
	for i := range staticPVs {
		mustCreate(t, cs.CoreV1().PersistentVolumes().Create, hostPathPV(fmt.Sprintf("static-%d", i), "static", "1Gi"))
	}
	for i := range ours {
		mustCreate(t, pvcs.Create, claim(fmt.Sprintf("ours-%d", i), "scope", "1Gi"))
	}
	var pvNames []string
	for i := range ours {
		pvNames = append(pvNames, waitClaimBound(t, cs, fmt.Sprintf("ours-%d", i)).Spec.VolumeName)
	}
	// Every claim named (35), every PV named by name and, for CSI PVs, by
	// handle (10 + 5 + 5); whole: nothing (ours are bound, with no record
	// left, and their PVs bound with the library's finalizer: settled; the
	// others are another driver's).
	want := map[string]int{"objects persistentvolumeclaims": 0, "objects persistentvolumes": 0,
		"names persistentvolumeclaims": others + ours, "names persistentvolumes": staticPVs + 2*ours}
	var got map[string]int
	eventually(t, "the cache gauges", func(context.Context) (bool, error) {
		got = cached(addr)
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})

	for i := range ours {
		if err := pvcs.Delete(t.Context(), fmt.Sprintf("ours-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range pvNames {
		eventually(t, "PV "+name+" deleted", func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	want = map[string]int{"objects persistentvolumeclaims": 0, "objects persistentvolumes": 0,
		"names persistentvolumeclaims": others, "names persistentvolumes": staticPVs}
	eventually(t, "the cache gauges after the deletions", func(context.Context) (bool, error) {
		got = cached(addr)
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	for i := range others {
		if pvc := getClaim(t, cs, fmt.Sprintf("other-%d", i)); pvc.Spec.VolumeName != "" || len(pvc.Finalizers) > 1 {
			t.Errorf("claim %s of another driver: volume %q, finalizers %v; want untouched", pvc.Name, pvc.Spec.VolumeName, pvc.Finalizers)
		}
	}
}

// pageClaims creates n claims page-00, page-01 and so on, every tenth from
// the fourth handed to scopeDriver, and returns their UIDs by name.
func pageClaims(t *testing.T, pvcs typedcorev1.PersistentVolumeClaimInterface, n int) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	for i := range n {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("page-%02d", i)},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if i%10 == 3 {
			pvc.Annotations = map[string]string{"volume.kubernetes.io/storage-provisioner": scopeDriver}
		}
		created, err := pvcs.Create(t.Context(), pvc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[created.Name] = created.UID
	}
	return uids
}

// TestScopeStreamsPages: on a real API server, a scoped listing in pages
// (here of 10) reads every page, one object at a time, in protobuf: the
// claims it keeps come whole, and Seen holds every claim's volume name.
func TestScopeStreamsPages(t *testing.T) {
	const claims = 25
	c := cluster.Start(t, cluster.Options{})
	pvcs := c.Client.CoreV1().PersistentVolumeClaims("default")
	uids := pageClaims(t, pvcs, claims)
	k := scope.Scope{Driver: scopeDriver}.ClaimKeeper(func(uid string) string { return "pvc-" + uid })
	var streamed int
	pages := scope.StreamPages[corev1.PersistentVolumeClaim](c.Client.CoreV1().RESTClient(), "persistentvolumeclaims")
	lw := &scope.ListerWatcher{Keeper: k, PageSize: 10,
		ListPage: func(ctx context.Context, o metav1.ListOptions, each func(runtime.Object)) (metav1.ListMeta, error) {
			streamed++
			return pages(ctx, o, each)
		},
		NewList: func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		Empty:   func() runtime.Object { return &corev1.PersistentVolumeClaim{} }}
	out, err := lw.ListWithContext(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list := out.(*corev1.PersistentVolumeClaimList)
	if streamed != 3 || len(list.Items) != 3 || list.ResourceVersion == "" {
		t.Fatalf("%d pages, %d claims kept, resourceVersion %q: want 3 pages, 3 claims and a version", streamed, len(list.Items), list.ResourceVersion)
	}
	for _, pvc := range list.Items {
		if pvc.Spec.Resources.Requests.Storage().String() != "1Gi" || pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != scopeDriver {
			t.Errorf("claim %s not whole: %+v", pvc.Name, pvc)
		}
	}
	for _, uid := range uids {
		if !k.Seen().Has("pvc-" + string(uid)) {
			t.Errorf("Seen misses the claim %s", uid)
		}
	}
}

// TestScopeListsBehindTheWatch: on a real API server, an informer whose
// first listing runs behind the watch syncs on the first page, serves the
// watch's events while the rest waits, and reads the rest at the first
// page's resourceVersion: a claim bound or deleted since is left at the
// watch's word, and once caught up the store holds exactly the claims
// kept and Seen every claim's volume name.
func TestScopeListsBehindTheWatch(t *testing.T) {
	const claims = 25
	c := cluster.Start(t, cluster.Options{})
	pvcs := c.Client.CoreV1().PersistentVolumeClaims("default")
	uids := pageClaims(t, pvcs, claims)
	k := scope.Scope{Driver: scopeDriver}.ClaimKeeper(func(uid string) string { return "pvc-" + uid })
	hold := make(chan struct{})
	pages := scope.StreamPages[corev1.PersistentVolumeClaim](c.Client.CoreV1().RESTClient(), "persistentvolumeclaims")
	all := c.Client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll)
	lw := &scope.ListerWatcher{Keeper: k, PageSize: 10, FirstPageSize: 10, Behind: true,
		ListPage: func(ctx context.Context, o metav1.ListOptions, each func(runtime.Object)) (metav1.ListMeta, error) {
			if o.Continue != "" {
				select {
				case <-hold:
				case <-ctx.Done():
					return metav1.ListMeta{}, ctx.Err()
				}
			}
			return pages(ctx, o, each)
		},
		WatchAll: all.Watch,
		NewList:  func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		Empty:    func() runtime.Object { return &corev1.PersistentVolumeClaim{} }}
	inf := cache.NewSharedIndexInformer(lw, &corev1.PersistentVolumeClaim{}, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	if keys := inf.GetStore().ListKeys(); len(keys) != 1 || keys[0] != "default/page-03" || k.Seen().Complete() {
		t.Fatalf("synced holding %v, Seen complete %v: want the first page's default/page-03, Seen open", keys, k.Seen().Complete())
	}
	// While the rest waits: page-13 (ours, second page) bound, page-23
	// (ours, third page) deleted, a new claim of ours.
	bound, err := pvcs.Get(ctx, "page-13", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound.Spec.VolumeName = "pv-elsewhere"
	if _, err := pvcs.Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server's protection finalizer first, or the deletion would
	// wait for a controller this cluster does not run.
	gone, err := pvcs.Get(ctx, "page-23", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gone.Finalizers = nil
	if _, err := pvcs.Update(ctx, gone, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pvcs.Delete(ctx, "page-23", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh, err := pvcs.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "page-new", Annotations: map[string]string{"volume.kubernetes.io/storage-provisioner": scopeDriver}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	poll("the new claim, served while the listing waits", func() bool {
		_, ok, _ := inf.GetStore().GetByKey("default/page-new")
		return ok && !k.Seen().Complete()
	})
	close(hold)
	poll("the listing to catch up", k.Seen().Complete)
	keys := inf.GetStore().ListKeys()
	slices.Sort(keys)
	if want := []string{"default/page-03", "default/page-new"}; !slices.Equal(keys, want) {
		t.Errorf("the store holds %v, want %v", keys, want)
	}
	for name, uid := range uids {
		if got, want := k.Seen().Has("pvc-"+string(uid)), name != "page-23"; got != want {
			t.Errorf("Seen.Has(%s's volume) = %v, want %v", name, got, want)
		}
	}
	if !k.Seen().Has("pvc-"+string(fresh.UID)) || k.Seen().Len() != claims {
		t.Errorf("Seen has the new claim %v, holds %d names: want true, %d", k.Seen().Has("pvc-"+string(fresh.UID)), k.Seen().Len(), claims)
	}
}
