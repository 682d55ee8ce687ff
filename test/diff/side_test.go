package diff

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/test/cluster"
)

const (
	// kcmSyncPeriod is KCM's --pvclaimbinder-sync-period: how often it
	// retries every claim and volume (default 15s, shortened here).
	kcmSyncPeriod = time.Second
	// stableWindow is how long a scenario's outcome must stay unchanged,
	// polled, before it is read. It covers at least two KCM resyncs.
	stableWindow = 3 * time.Second
	pollInterval = 200 * time.Millisecond
	// The API rate limit of both binders.
	binderQPS, binderBurst = "200", "400"
)

// side is one control plane with one binder.
type side struct {
	label  string // "kcm", "tether", "kcm-2"
	c      *cluster.Cluster
	client kubernetes.Interface
	binder *cluster.Process
}

// startSide starts a control plane and a binder: kind "kcm" for KCM's
// persistentvolume-binder-controller, "tether" for ours. It returns once the
// binder has bound a canary claim.
func startSide(t *testing.T, kind, label string, workers int) *side {
	t.Helper()
	c := cluster.Start(t, cluster.Options{})
	s := &side{label: label, c: c, client: c.Client}
	switch kind {
	case "kcm":
		s.binder = c.StartControllerManager(t, []string{"persistentvolume-binder-controller"},
			"--pvclaimbinder-sync-period="+kcmSyncPeriod.String(),
			"--kube-api-qps="+binderQPS, "--kube-api-burst="+binderBurst)
	case "tether":
		path := cluster.BuildBinary(t, "./cmd/binder")
		s.binder = c.Run(t, cluster.ProcessOptions{Name: "binder", Path: path, Args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false",
			fmt.Sprintf("--workers=%d", workers),
			"--kube-api-qps=" + binderQPS,
			"--kube-api-burst=" + binderBurst,
			"-v=2",
		}})
	default:
		t.Fatalf("unknown binder %q (want kcm or tether)", kind)
	}
	if err := s.canary(t.Context()); err != nil {
		t.Fatalf("%s: %v\n--- last lines of %s ---\n%s", label, err, s.binder.LogPath, cluster.Tail(s.binder.LogPath, 40))
	}
	return s
}

// canary binds one claim to one volume, so that scenarios start only once
// the binder watches: a binder that lists objects at start-up would see them
// in name order rather than creation order.
func (s *side) canary(ctx context.Context) error {
	class := ""
	sc := &Scenario{Seed: -1, Namespace: "diff-canary", Prefix: "canary-"}
	sc.PVs = []*corev1.PersistentVolume{{
		ObjectMeta: metav1.ObjectMeta{Name: "canary-pv"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/canary"}},
		},
	}}
	sc.Claims = []*corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "canary", Namespace: sc.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}}
	var notes []string // a volume not Available shows in the scenarios
	if err := s.create(ctx, sc, &notes); err != nil {
		return err
	}
	err := s.poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pvc, err := s.client.CoreV1().PersistentVolumeClaims(sc.Namespace).Get(ctx, "canary", metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, nil
	})
	if err != nil {
		return fmt.Errorf("canary claim not Bound: %w", err)
	}
	return s.cleanup(ctx, sc)
}

// poll is wait.PollUntilContextTimeout that also gives up when the binder
// process has exited.
func (s *side) poll(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if !s.binder.Running() {
			return false, fmt.Errorf("%s binder exited", s.label)
		}
		return cond(ctx)
	})
}

// runScenario creates a scenario, waits for a stable outcome, reads it and
// deletes the scenario. Notes are harness observations worth a log line.
func (s *side) runScenario(ctx context.Context, sc *Scenario) (obs Observed, notes []string, err error) {
	if err := s.create(ctx, sc, &notes); err != nil {
		return obs, notes, err
	}
	obs, err = s.waitStable(ctx, sc)
	if err != nil {
		notes = append(notes, fmt.Sprintf("%s: %v; comparing the last state seen", s.label, err))
	}
	if err := s.cleanup(ctx, sc); err != nil {
		return obs, notes, err
	}
	return obs, notes, nil
}

// create makes the namespace, classes, volumes and claims in scenario order.
// Both sides create the same scenario at once, so each writes copies (the
// client's encoder sets an object's TypeMeta).
// Claims are created only once the API server's default-class admission sees
// exactly this scenario's classes, and once every volume is Available: KCM
// skips volumes that are not Available yet, and would retry those claims at
// its next resync in no fixed order. notes, when not nil, collects a volume
// that never became Available (the claims are created anyway).
func (s *side) create(ctx context.Context, sc *Scenario, notes *[]string) error {
	core := s.client.CoreV1()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sc.Namespace}}
	if _, err := core.Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, c := range sc.Classes {
		if _, err := s.client.StorageV1().StorageClasses().Create(ctx, c.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create class %s: %w", c.Name, err)
		}
	}
	if err := s.waitDefaultClass(ctx, sc); err != nil {
		return err
	}
	for _, pv := range sc.PVs {
		if _, err := core.PersistentVolumes().Create(ctx, pv.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pv %s: %w", pv.Name, err)
		}
	}
	err := s.poll(ctx, 15*time.Second, func(ctx context.Context) (bool, error) {
		obs, err := s.observe(ctx, sc)
		if err != nil {
			return false, err
		}
		for _, pv := range obs.PVs {
			if pv.Phase != corev1.VolumeAvailable {
				return false, nil
			}
		}
		return len(obs.PVs) == len(sc.PVs), nil
	})
	if err != nil {
		if !s.binder.Running() || notes == nil {
			return fmt.Errorf("volumes not Available: %w", err)
		}
		*notes = append(*notes, fmt.Sprintf("%s: not every volume became Available: %v", s.label, err))
	}
	for _, c := range sc.Claims {
		if _, err := core.PersistentVolumeClaims(sc.Namespace).Create(ctx, c.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create claim %s: %w", c.Name, err)
		}
	}
	return nil
}

// waitDefaultClass polls a dry-run claim without class until the API
// server's DefaultStorageClass admission gives it this scenario's default
// class, or none: its class cache lags behind creations and deletions.
func (s *side) waitDefaultClass(ctx context.Context, sc *Scenario) error {
	want := sc.DefaultClass()
	probe := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-class-probe", Namespace: sc.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
	var got string
	err := s.poll(ctx, 15*time.Second, func(ctx context.Context) (bool, error) {
		out, err := s.client.CoreV1().PersistentVolumeClaims(sc.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		got = ""
		if out.Spec.StorageClassName != nil {
			got = *out.Spec.StorageClassName
		}
		return got == want, nil
	})
	if err != nil {
		return fmt.Errorf("admission gives class %q to claims without class, want %q: %w", got, want, err)
	}
	return nil
}

// waitStable polls the scenario's outcome until it has not changed for
// stableWindow, and returns it.
func (s *side) waitStable(ctx context.Context, sc *Scenario) (Observed, error) {
	var (
		last      Observed
		lastSig   string
		changedAt = time.Now()
	)
	quiet := max(stableWindow, 2*kcmSyncPeriod)
	err := s.poll(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		obs, err := s.observe(ctx, sc)
		if err != nil {
			return false, err
		}
		if sig := obs.Signature(); sig != lastSig {
			last, lastSig, changedAt = obs, sig, time.Now()
			return false, nil
		}
		return time.Since(changedAt) >= quiet, nil
	})
	return last, err
}

// observe reads the scenario's claims and volumes.
func (s *side) observe(ctx context.Context, sc *Scenario) (Observed, error) {
	obs := Observed{Claims: map[string]ClaimState{}, PVs: map[string]PVState{}}
	claims, err := s.client.CoreV1().PersistentVolumeClaims(sc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return obs, err
	}
	for _, c := range claims.Items {
		obs.Claims[c.Name] = ClaimState{Phase: c.Status.Phase, Volume: c.Spec.VolumeName, UID: string(c.UID)}
	}
	pvs, err := s.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return obs, err
	}
	for _, pv := range pvs.Items {
		if !strings.HasPrefix(pv.Name, sc.Prefix) {
			continue
		}
		st := PVState{Phase: pv.Status.Phase}
		if ref := pv.Spec.ClaimRef; ref != nil {
			st.ClaimRef, st.ClaimUID = ref.Namespace+"/"+ref.Name, string(ref.UID)
		}
		obs.PVs[pv.Name] = st
	}
	return obs, nil
}

// cleanup deletes a scenario's claims, volumes and classes, and waits until
// they are gone. Volumes and classes are cluster-wide, and a volume or a
// default class left behind would take part in the next scenario: the empty
// class "" and the default class are shared by every namespace. Deleting
// everything is simpler than keeping scenarios apart by name. Nothing here
// runs the protection controllers, so the finalizers that the API server's
// StorageObjectInUseProtection admission added are removed by hand. The
// namespace stays (no namespace controller runs either); it is empty.
func (s *side) cleanup(ctx context.Context, sc *Scenario) error {
	core := s.client.CoreV1()
	claims := core.PersistentVolumeClaims(sc.Namespace)
	noFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	ignoreNotFound := func(err error) error {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	for _, c := range sc.Claims {
		if err := ignoreNotFound(claims.Delete(ctx, c.Name, metav1.DeleteOptions{})); err != nil {
			return err
		}
	}
	for _, pv := range sc.PVs {
		if err := ignoreNotFound(core.PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})); err != nil {
			return err
		}
	}
	for _, c := range sc.Classes {
		if err := ignoreNotFound(s.client.StorageV1().StorageClasses().Delete(ctx, c.Name, metav1.DeleteOptions{})); err != nil {
			return err
		}
	}
	// Strip finalizers of what is left until nothing is.
	return s.poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		left := 0
		cl, err := claims.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range cl.Items {
			left++
			if _, err := claims.Patch(ctx, c.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{}); ignoreNotFound(err) != nil {
				return false, err
			}
		}
		pvs, err := core.PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, pv := range pvs.Items {
			if !strings.HasPrefix(pv.Name, sc.Prefix) {
				continue
			}
			left++
			if _, err := core.PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{}); ignoreNotFound(err) != nil {
				return false, err
			}
		}
		classes, err := s.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range classes.Items {
			if strings.HasPrefix(c.Name, sc.Prefix) {
				left++
			}
		}
		return left == 0, nil
	})
}
