package integration

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	tcsi "github.com/tether-csi/tether/pkg/csi"
	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/migration"
	"github.com/tether-csi/tether/test/cluster"
)

// ebsDriver is the mock driver's name here: the CSI driver that the
// in-tree kubernetes.io/aws-ebs plugin is migrated to, so that a gp2 class
// is served by it (through CSI migration) as on EKS.
const ebsDriver = "ebs.csi.aws.com"

// migrationWorld is one cluster switched between the upstream pair
// (external-provisioner v6.4.0 + KCM's binder) and tether.
type migrationWorld struct {
	t    *testing.T
	c    *cluster.Cluster
	mock *mockDriver
	// proxy stands in front of the mock and adds MODIFY_VOLUME, so that
	// VolumeAttributesClass claims are served (vac_test.go); both
	// provisioners talk to it.
	proxy    *capsProxy
	upstream []*cluster.Process
	tether   []*cluster.Process
	round    int
}

func (w *migrationWorld) startUpstream() {
	w.t.Helper()
	w.round++
	kcm := w.c.StartControllerManager(w.t, append([]string{"persistentvolume-binder-controller"}, protectionControllers...))
	ep, err := cluster.Tool("csi-provisioner")
	if err != nil {
		w.t.Fatal(err)
	}
	epProc := w.c.Run(w.t, cluster.ProcessOptions{Name: fmt.Sprintf("external-provisioner-%d", w.round), Path: ep,
		Args: []string{"--kubeconfig=" + w.c.Kubeconfig, "--csi-address=" + w.proxy.Socket, "--leader-election=false",
			"--retry-interval-start=200ms", "--retry-interval-max=2s", "-v=3"}})
	w.upstream = []*cluster.Process{kcm, epProc}
}

func (w *migrationWorld) stopUpstream() {
	for _, p := range w.upstream {
		p.Stop(10 * time.Second)
	}
	w.upstream = nil
}

func (w *migrationWorld) startTether() {
	w.t.Helper()
	w.round++
	// KCM keeps only the protection controllers: its binder is replaced.
	kcm := w.c.StartControllerManager(w.t, protectionControllers)
	w.tether = []*cluster.Process{kcm,
		startBinder(w.t, w.c),
		startProvisioner(w.t, w.c, fmt.Sprintf("ebs-%d", w.round), w.proxy.Socket)}
}

func (w *migrationWorld) stopTether() {
	for _, p := range w.tether {
		p.Stop(10 * time.Second)
	}
	w.tether = nil
}

// backend lists the driver's volume IDs made for claims (names pvc-...).
func (w *migrationWorld) backend() []string { return w.mock.Volumes(w.t) }

// handles lists the volume handles of every PV of the driver, in-tree
// (migrated) ones translated.
func (w *migrationWorld) handles() []string {
	w.t.Helper()
	pvs, err := w.c.Client.CoreV1().PersistentVolumes().List(w.t.Context(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Spec.CSI == nil && pv.Spec.AWSElasticBlockStore != nil {
			csiPV, err := migration.ToCSI(klog.Background(), pv)
			if err != nil {
				w.t.Fatal(err)
			}
			pv = csiPV
		}
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == ebsDriver {
			out = append(out, pv.Spec.CSI.VolumeHandle)
		}
	}
	sort.Strings(out)
	return out
}

// accounted checks that every backend volume is tracked by a PV and every
// PV has its backend volume: nothing leaked, nothing wrongly deleted.
func (w *migrationWorld) accounted(what string) int {
	w.t.Helper()
	var backend, handles []string
	eventually(w.t, what+": every backend volume tracked by a PV, every PV backed", func(context.Context) (bool, error) {
		backend, handles = w.backend(), w.handles()
		return slices.Equal(backend, handles), nil
	})
	return len(backend)
}

// staticVolume makes a backend volume by hand and a CSI PV for it,
// pre-bound to the claim of the same name, which it creates too.
func (w *migrationWorld) staticVolume(name string, policy corev1.PersistentVolumeReclaimPolicy) {
	w.t.Helper()
	ctx := w.t.Context()
	conn, err := tcsi.Connect(ctx, tcsi.Options{Address: w.mock.Socket})
	if err != nil {
		w.t.Fatal(err)
	}
	defer conn.Close()
	resp, err := conn.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-" + name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}})
	if err != nil {
		w.t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: policy, StorageClassName: "static",
			ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: ebsDriver, VolumeHandle: resp.Volume.VolumeId}},
		}}
	mustCreate(w.t, w.c.Client.CoreV1().PersistentVolumes().Create, pv)
	cl := claim(name, "static", "1Gi")
	cl.Spec.VolumeName = name
	mustCreate(w.t, w.c.Client.CoreV1().PersistentVolumeClaims("default").Create, cl)
}

// deleteClaims deletes claims and waits for them to be gone (no finalizer
// of either side left behind).
func (w *migrationWorld) deleteClaims(names ...string) {
	w.t.Helper()
	for _, name := range names {
		if err := w.c.Client.CoreV1().PersistentVolumeClaims("default").Delete(w.t.Context(), name, metav1.DeleteOptions{}); err != nil {
			w.t.Fatal(err)
		}
	}
	for _, name := range names {
		eventually(w.t, "claim "+name+" gone", func(ctx context.Context) (bool, error) {
			_, err := w.c.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
}

// waitPVGone waits for PVs to be deleted (their backend volume with them).
func (w *migrationWorld) waitPVGone(names ...string) {
	w.t.Helper()
	for _, name := range names {
		eventually(w.t, "PV "+name+" gone", func(ctx context.Context) (bool, error) {
			_, err := w.c.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
}

// bound creates claims of classes and waits for them to be Bound; it
// returns their PV names.
func (w *migrationWorld) bound(claims map[string]string) map[string]string {
	w.t.Helper()
	for name, class := range claims {
		mustCreate(w.t, w.c.Client.CoreV1().PersistentVolumeClaims("default").Create, claim(name, class, "1Gi"))
	}
	pvs := map[string]string{}
	for name := range claims {
		pvs[name] = waitClaimBound(w.t, w.c.Client, name).Spec.VolumeName
	}
	return pvs
}

// handBack leaves a claim provisioned by tether but not yet bound (its
// binder stopped first), so that it holds the in-flight record, then stops
// tether and runs `provisioner --hand-back`, which must drop the record and
// exit 0. It returns the claim's PV name.
func (w *migrationWorld) handBack() string {
	w.t.Helper()
	t, c := w.t, w.c
	w.tether[1].Stop(10 * time.Second) // the binder
	cl := claim("handback", "csi-delete", "1Gi")
	cl.Annotations = map[string]string{storagehelpers.AnnStorageProvisioner: ebsDriver, storagehelpers.AnnBetaStorageProvisioner: ebsDriver}
	cl = mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, cl)
	var pvName string
	eventually(t, "a PV for the claim handed back", func(ctx context.Context) (bool, error) {
		pvs, err := c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == cl.UID {
				pvName = pv.Name
			}
		}
		return pvName != "", nil
	})
	w.stopTether()
	// tether leaves the record for the binder for 2 minutes after the PV is
	// saved; on a loaded machine that may have passed already. Put it back
	// as tether holds it in that window, so the hand-back always has one.
	if cur := getClaim(t, c.Client, "handback"); !inflight.Holds(cur) {
		t.Log("the record was settled before tether stopped; writing it back as tether holds it within 2 minutes of the save")
		inflight.Record(cur, ebsDriver, pvName)
		if _, err := c.Client.CoreV1().PersistentVolumeClaims("default").Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.CommandContext(t.Context(), cluster.BuildBinary(t, "./cmd/provisioner"), "--kubeconfig="+c.Kubeconfig,
		"--csi-address="+w.proxy.Socket, "--hand-back").CombinedOutput()
	if err != nil {
		t.Fatalf("provisioner --hand-back: %v\n%s", err, out)
	}
	if inflight.Holds(getClaim(t, c.Client, "handback")) {
		t.Fatalf("--hand-back left the in-flight record:\n%s", out)
	}
	return pvName
}

// TestMigrationBothWays is the brownfield switch: external-provisioner
// v6.4.0 and KCM's binder provision and bind a mix of volumes; tether takes
// over and deletes, binds, provisions and releases them; then the upstream
// pair takes back what tether made. Every backend volume is accounted for
// at each step.
func TestMigrationBothWays(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	w := &migrationWorld{t: t, c: c, mock: startMock(t, c, ebsDriver, "")}
	w.proxy = startCapsProxy(t, w.mock.Socket)
	gold := map[string]string{"iops": "3000"}
	createVAC(t, c, "gold", ebsDriver, gold)
	createCSIClass(t, c, "csi-delete", ebsDriver, "Delete", storagev1.VolumeBindingImmediate)
	createCSIClass(t, c, "csi-retain", ebsDriver, "Retain", storagev1.VolumeBindingImmediate)
	mustCreate(t, c.Client.CoreV1().Secrets("default").Create, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ebs-secret"},
		StringData: map[string]string{"key": "value"}})
	immediate, del := storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete
	mustCreate(t, c.Client.StorageV1().StorageClasses().Create, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi-secret"},
		Provisioner: ebsDriver, VolumeBindingMode: &immediate, ReclaimPolicy: &del, Parameters: map[string]string{
			"csi.storage.k8s.io/provisioner-secret-name": "ebs-secret", "csi.storage.k8s.io/provisioner-secret-namespace": "default"}})
	mustCreate(t, c.Client.StorageV1().StorageClasses().Create, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp2"},
		Provisioner: "kubernetes.io/aws-ebs", VolumeBindingMode: &immediate, ReclaimPolicy: &del, Parameters: map[string]string{"type": "gp2"}})

	// 1. The upstream pair makes and binds a mix.
	w.startUpstream()
	up := w.bound(map[string]string{"up-delete": "csi-delete", "up-retain": "csi-retain", "up-secret": "csi-secret", "up-gp2": "gp2"})
	mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, vacClaim("up-vac", "csi-delete", "gold"))
	checkVACBinding(t, c, w.proxy, "up-vac", "gold", gold)
	up["up-vac"] = getClaim(t, c.Client, "up-vac").Spec.VolumeName
	w.staticVolume("static-delete", corev1.PersistentVolumeReclaimDelete)
	w.staticVolume("static-retain", corev1.PersistentVolumeReclaimRetain)
	waitClaimBound(t, c.Client, "static-delete")
	waitClaimBound(t, c.Client, "static-retain")
	gp2 := getPV(t, c.Client, up["up-gp2"])
	if gp2.Spec.AWSElasticBlockStore == nil || gp2.Annotations[storagehelpers.AnnMigratedTo] != ebsDriver {
		t.Fatalf("EP and KCM did not migrate the gp2 claim: %+v %v", gp2.Spec.PersistentVolumeSource, gp2.Annotations)
	}
	// EP writes the deletion-secret annotations even when empty: tether
	// must read those as "no secret".
	if v, ok := getPV(t, c.Client, up["up-delete"]).Annotations[provisionerDeletionSecretName]; !ok || v != "" {
		t.Errorf("EP's deletion-secret annotation on a class without secrets: %q (present %v), want present and empty", v, ok)
	}
	madeUpstream := w.accounted("upstream")
	w.stopUpstream()

	// 2. tether takes over.
	w.startTether()
	mine := w.bound(map[string]string{"tether-delete": "csi-delete", "tether-gp2": "gp2", "tether-retain": "csi-retain"})
	mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, vacClaim("tether-vac", "csi-delete", "gold"))
	checkVACBinding(t, c, w.proxy, "tether-vac", "gold", gold)
	mine["tether-vac"] = getClaim(t, c.Client, "tether-vac").Spec.VolumeName
	if pv := getPV(t, c.Client, mine["tether-gp2"]); pv.Spec.AWSElasticBlockStore == nil {
		t.Errorf("tether saved the gp2 claim's PV as %+v, not in-tree as EP does", pv.Spec.PersistentVolumeSource)
	}
	w.deleteClaims("up-delete", "up-secret", "up-gp2", "up-vac", "static-delete")
	w.waitPVGone(up["up-delete"], up["up-secret"], up["up-gp2"], up["up-vac"], "static-delete")
	w.deleteClaims("up-retain", "static-retain")
	waitVolumePhase(t, c.Client, up["up-retain"], corev1.VolumeReleased)
	waitVolumePhase(t, c.Client, "static-retain", corev1.VolumeReleased)
	afterTether := w.accounted("tether")
	handed := w.handBack()

	// 3. The way back: the upstream pair takes over what tether made.
	w.startUpstream()
	back := w.bound(map[string]string{"back-delete": "csi-delete"})
	if got := waitClaimBound(t, c.Client, "handback").Spec.VolumeName; got != handed {
		t.Errorf("the claim handed back bound to %s, want its own PV %s", got, handed)
	}
	w.deleteClaims("tether-delete", "tether-gp2", "tether-vac", "back-delete", "handback")
	w.waitPVGone(mine["tether-delete"], mine["tether-gp2"], mine["tether-vac"], back["back-delete"], handed)
	w.deleteClaims("tether-retain")
	waitVolumePhase(t, c.Client, mine["tether-retain"], corev1.VolumeReleased)
	afterBack := w.accounted("back")
	for _, name := range []string{"tether-retain"} {
		if pv := getPV(t, c.Client, mine[name]); pv.Spec.ClaimRef == nil {
			t.Errorf("%s lost its claimRef", pv.Name)
		}
	}
	claims, err := c.Client.CoreV1().PersistentVolumeClaims("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range claims.Items {
		if inflight.Holds(&cl) {
			t.Errorf("claim %s keeps tether's in-flight record under the upstream pair", cl.Name)
		}
	}
	t.Logf("migration: upstream made and bound 7 (5 dynamic: Delete, Retain, with a secret, gp2 through CSI migration, a VolumeAttributesClass; 2 static CSI); "+
		"tether provisioned and bound 4 (Delete, Retain, gp2, VolumeAttributesClass), deleted 5 of the upstream's (dynamic with empty deletion-secret annotations, with a real secret, gp2, VolumeAttributesClass, static CSI Delete) "+
		"and released 2 Retain; --hand-back dropped the record of 1 claim provisioned but not bound; then the upstream pair bound it, provisioned 1 and deleted 5 (4 of tether's, gp2 and the VolumeAttributesClass one among them) and released tether's Retain one; "+
		"backend volumes, each tracked by a PV, after each step: %d, %d, %d; leaked 0, wrongly deleted 0", madeUpstream, afterTether, afterBack)
}

const provisionerDeletionSecretName = "volume.kubernetes.io/provisioner-deletion-secret-name"
