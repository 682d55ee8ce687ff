// Package diff is a differential test of tether's binder against the
// persistentvolume-binder-controller of kube-controller-manager (KCM): the
// same random scenario of classes, volumes and claims runs on two real
// control planes, one per binder, and the outcomes are compared claim by
// claim.
//
// This file is the scenario generator: a pure function of a seed.
package diff

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// NoProvisioner is the provisioner of classes for static volumes only.
	NoProvisioner = "kubernetes.io/no-provisioner"
	// DefaultClassAnnotation marks the default StorageClass; the API
	// server's DefaultStorageClass admission plugin gives it to claims that
	// name no class.
	DefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
)

// Scenario is one generated test case. Its objects are created in this order:
// classes, then volumes, then claims.
type Scenario struct {
	Seed int64
	// Namespace holds every claim of the scenario.
	Namespace string
	// Prefix starts the name of every cluster-scoped object (classes, PVs).
	Prefix string
	// Classes are created; a claim or volume may also name MissingClass,
	// which is never created.
	Classes      []*storagev1.StorageClass
	MissingClass string
	PVs          []*corev1.PersistentVolume
	Claims       []*corev1.PersistentVolumeClaim
}

// ScenarioNames returns the namespace and name prefix of a seed's scenario.
func ScenarioNames(seed int64) (namespace, prefix string) {
	return fmt.Sprintf("diff-%d", seed), fmt.Sprintf("d%d-", seed)
}

// DefaultClass is the name of the scenario's default class, or "".
func (s *Scenario) DefaultClass() string {
	for _, c := range s.Classes {
		if c.Annotations[DefaultClassAnnotation] == "true" {
			return c.Name
		}
	}
	return ""
}

var (
	pvSizes    = []string{"1Gi", "2Gi", "5Gi", "10Gi"}
	claimSizes = []string{"512Mi", "1Gi", "2Gi", "3Gi", "5Gi", "10Gi"}

	rwo  = corev1.ReadWriteOnce
	rox  = corev1.ReadOnlyMany
	rwx  = corev1.ReadWriteMany
	rwop = corev1.ReadWriteOncePod

	// Weighted access-mode sets. ReadWriteOncePod is always alone: the API
	// refuses it together with other modes.
	pvModes = []weighted[[]corev1.PersistentVolumeAccessMode]{
		{10, []corev1.PersistentVolumeAccessMode{rwo}},
		{3, []corev1.PersistentVolumeAccessMode{rwo, rox}},
		{2, []corev1.PersistentVolumeAccessMode{rwo, rwx}},
		{2, []corev1.PersistentVolumeAccessMode{rwx, rwo, rox}},
		{1, []corev1.PersistentVolumeAccessMode{rox}},
		{1, []corev1.PersistentVolumeAccessMode{rwx}},
		{1, []corev1.PersistentVolumeAccessMode{rox, rwx}},
		{1, []corev1.PersistentVolumeAccessMode{rwop}},
	}
	claimModes = []weighted[[]corev1.PersistentVolumeAccessMode]{
		{12, []corev1.PersistentVolumeAccessMode{rwo}},
		{2, []corev1.PersistentVolumeAccessMode{rox}},
		{2, []corev1.PersistentVolumeAccessMode{rwx}},
		{2, []corev1.PersistentVolumeAccessMode{rwo, rox}},
		{1, []corev1.PersistentVolumeAccessMode{rwo, rwx}},
		{1, []corev1.PersistentVolumeAccessMode{rwop}},
	}

	fs    = corev1.PersistentVolumeFilesystem
	block = corev1.PersistentVolumeBlock
	// nil means "left to the API server's default", which is Filesystem.
	pvVolumeModes    = []weighted[*corev1.PersistentVolumeMode]{{5, nil}, {4, &fs}, {1, &block}}
	claimVolumeModes = []weighted[*corev1.PersistentVolumeMode]{{6, nil}, {4, &fs}, {1, &block}}

	labelKeys   = []string{"tier", "zone"}
	labelValues = map[string][]string{"tier": {"gold", "silver"}, "zone": {"a", "b"}}
)

type weighted[T any] struct {
	weight int
	value  T
}

func pick[T any](r *rand.Rand, choices []weighted[T]) T {
	total := 0
	for _, c := range choices {
		total += c.weight
	}
	n := r.IntN(total)
	for _, c := range choices {
		if n < c.weight {
			return c.value
		}
		n -= c.weight
	}
	panic("unreachable")
}

func oneOf[T any](r *rand.Rand, values []T) T { return values[r.IntN(len(values))] }

func chance(r *rand.Rand, percent int) bool { return r.IntN(100) < percent }

// Generate makes the scenario of a seed. It is a pure function: the same seed
// gives the same scenario, object for object.
func Generate(seed int64) *Scenario {
	r := rand.New(rand.NewPCG(uint64(seed), 0x7e7e_c51d))
	ns, prefix := ScenarioNames(seed)
	s := &Scenario{Seed: seed, Namespace: ns, Prefix: prefix}

	// Classes: one to three, all static (no provisioner runs). Sometimes the
	// last one waits for a consumer, so neither binder may bind its claims
	// (except pre-bound ones); sometimes one Immediate class is the default.
	nClasses := pick(r, []weighted[int]{{4, 1}, {4, 2}, {2, 3}})
	wffc := chance(r, 25)
	for i := range nClasses {
		mode := storagev1.VolumeBindingImmediate
		if wffc && i == nClasses-1 {
			mode = storagev1.VolumeBindingWaitForFirstConsumer
		}
		retain := corev1.PersistentVolumeReclaimRetain
		s.Classes = append(s.Classes, &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: fmt.Sprintf("%ssc-%c", prefix, 'a'+i)},
			Provisioner:       NoProvisioner,
			ReclaimPolicy:     &retain,
			VolumeBindingMode: &mode,
		})
	}
	if chance(r, 40) {
		// Only an Immediate class: a default WaitForFirstConsumer class
		// would just leave most claims Pending.
		c := s.Classes[r.IntN(nClasses)]
		if *c.VolumeBindingMode == storagev1.VolumeBindingImmediate {
			c.Annotations = map[string]string{DefaultClassAnnotation: "true"}
		}
	}
	useMissing := chance(r, 20)
	if useMissing {
		s.MissingClass = prefix + "sc-missing"
	}
	classNames := []weighted[string]{{3, ""}}
	for _, c := range s.Classes {
		classNames = append(classNames, weighted[string]{3, c.Name})
	}
	if useMissing {
		classNames = append(classNames, weighted[string]{1, s.MissingClass})
	}

	nPVs := 5 + r.IntN(16)
	nClaims := 5 + r.IntN(16)
	for i := range nPVs {
		s.PVs = append(s.PVs, generatePV(r, s, i, nClaims, classNames))
	}
	for i := range nClaims {
		s.Claims = append(s.Claims, generateClaim(r, s, i, classNames))
	}
	return s
}

func generatePV(r *rand.Rand, s *Scenario, i, nClaims int, classNames []weighted[string]) *corev1.PersistentVolume {
	name := fmt.Sprintf("%spv-%d", s.Prefix, i)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: randomLabels(r)},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              pick(r, classNames),
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(oneOf(r, pvSizes))},
			AccessModes:                   cloneModes(pick(r, pvModes)),
			VolumeMode:                    clonePtr(pick(r, pvVolumeModes)),
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/tether-diff/" + name},
			},
		},
	}
	if chance(r, 15) {
		// Pre-bound by the admin to a claim by name, without UID. The claim
		// may not exist (index past the last claim).
		pv.Spec.ClaimRef = &corev1.ObjectReference{
			Kind:      "PersistentVolumeClaim",
			Namespace: s.Namespace,
			Name:      claimName(r.IntN(nClaims + 2)),
		}
	}
	return pv
}

func generateClaim(r *rand.Rand, s *Scenario, i int, classNames []weighted[string]) *corev1.PersistentVolumeClaim {
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claimName(i), Namespace: s.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: cloneModes(pick(r, claimModes)),
			VolumeMode:  clonePtr(pick(r, claimVolumeModes)),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(oneOf(r, claimSizes))},
			},
		},
	}
	// nil class: the default class if there is one, else "" (no class).
	if !chance(r, 25) {
		class := pick(r, classNames)
		claim.Spec.StorageClassName = &class
	}
	if chance(r, 25) {
		claim.Spec.Selector = randomSelector(r)
	}
	if chance(r, 50) {
		// Half the claims are aimed at a volume, so that most claims have
		// candidates and compete for them.
		aim(r, s, claim, s.PVs[r.IntN(len(s.PVs))])
	}
	if chance(r, 12) {
		if chance(r, 20) {
			claim.Spec.VolumeName = s.Prefix + "pv-missing"
		} else {
			claim.Spec.VolumeName = fmt.Sprintf("%spv-%d", s.Prefix, r.IntN(len(s.PVs)))
		}
	}
	return claim
}

// aim makes a claim that the volume fits: same class (or nil for the class a
// nil class stands for), a request up to its size, some of its access modes,
// its volume mode, and a selector that its labels match, if any.
func aim(r *rand.Rand, s *Scenario, claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	class := pv.Spec.StorageClassName
	claim.Spec.StorageClassName = &class
	if class == s.DefaultClass() && chance(r, 50) {
		claim.Spec.StorageClassName = nil
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	var fit []string
	for _, text := range claimSizes {
		if q := resource.MustParse(text); q.Cmp(size) <= 0 {
			fit = append(fit, text)
		}
	}
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(oneOf(r, fit))
	claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{oneOf(r, pv.Spec.AccessModes)}
	claim.Spec.VolumeMode = clonePtr(pv.Spec.VolumeMode)
	if claim.Spec.VolumeMode == nil && chance(r, 50) {
		claim.Spec.VolumeMode = &fs
	}
	claim.Spec.Selector = nil
	if len(pv.Labels) > 0 && chance(r, 30) {
		key := labelKeys[0]
		if _, ok := pv.Labels[key]; !ok {
			key = labelKeys[1]
		}
		claim.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{key: pv.Labels[key]}}
	}
}

func claimName(i int) string { return fmt.Sprintf("claim-%d", i) }

func randomLabels(r *rand.Rand) map[string]string {
	labels := map[string]string{}
	for _, k := range labelKeys {
		if chance(r, 60) {
			labels[k] = oneOf(r, labelValues[k])
		}
	}
	if len(labels) == 0 {
		return nil
	}
	return labels
}

func randomSelector(r *rand.Rand) *metav1.LabelSelector {
	key := oneOf(r, labelKeys)
	value := oneOf(r, labelValues[key])
	switch r.IntN(5) {
	case 0, 1:
		return &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
	case 2:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: key, Operator: metav1.LabelSelectorOpIn, Values: labelValues[key]},
		}}
	case 3:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: key, Operator: metav1.LabelSelectorOpNotIn, Values: []string{value}},
		}}
	default:
		op := metav1.LabelSelectorOpExists
		if chance(r, 50) {
			op = metav1.LabelSelectorOpDoesNotExist
		}
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op}}}
	}
}

func cloneModes(m []corev1.PersistentVolumeAccessMode) []corev1.PersistentVolumeAccessMode {
	return append([]corev1.PersistentVolumeAccessMode(nil), m...)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
