package diff

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

func TestGenerateIsDeterministic(t *testing.T) {
	for _, seed := range []int64{0, 1, 2, 42, 1 << 40, -7} {
		a, b := Generate(seed), Generate(seed)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("seed %d: two scenarios differ:\n%s\n%s", seed, Describe(a), Describe(b))
		}
	}
	if reflect.DeepEqual(Generate(1).PVs, Generate(2).PVs) {
		t.Error("seeds 1 and 2 gave the same volumes")
	}
}

func TestGenerateShape(t *testing.T) {
	var (
		defaults, wffc, prebound, named, selectors, nilClass, emptyClass, block int
	)
	for seed := int64(0); seed < 300; seed++ {
		s := Generate(seed)
		ns, prefix := ScenarioNames(seed)
		if s.Namespace != ns || s.Prefix != prefix {
			t.Fatalf("seed %d: names %s %s", seed, s.Namespace, s.Prefix)
		}
		if n := len(s.PVs); n < 5 || n > 20 {
			t.Errorf("seed %d: %d volumes, want 5-20", seed, n)
		}
		if n := len(s.Claims); n < 5 || n > 20 {
			t.Errorf("seed %d: %d claims, want 5-20", seed, n)
		}
		nDefault := 0
		names := map[string]bool{}
		for _, c := range s.Classes {
			if !strings.HasPrefix(c.Name, prefix) || c.Provisioner != NoProvisioner {
				t.Errorf("seed %d: class %s provisioner %s", seed, c.Name, c.Provisioner)
			}
			if c.Annotations[DefaultClassAnnotation] == "true" {
				nDefault++
				if *c.VolumeBindingMode != storagev1.VolumeBindingImmediate {
					t.Errorf("seed %d: default class %s waits for a consumer", seed, c.Name)
				}
			}
			if *c.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
				wffc++
			}
		}
		if nDefault > 1 {
			t.Errorf("seed %d: %d default classes", seed, nDefault)
		}
		defaults += nDefault
		for _, pv := range s.PVs {
			if !strings.HasPrefix(pv.Name, prefix) || names[pv.Name] {
				t.Errorf("seed %d: bad or repeated volume name %s", seed, pv.Name)
			}
			names[pv.Name] = true
			checkModes(t, seed, pv.Name, pv.Spec.AccessModes)
			if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
				t.Errorf("seed %d: %s reclaim policy %s", seed, pv.Name, pv.Spec.PersistentVolumeReclaimPolicy)
			}
			if ref := pv.Spec.ClaimRef; ref != nil {
				prebound++
				if ref.UID != "" || ref.Namespace != ns {
					t.Errorf("seed %d: %s claimRef %+v", seed, pv.Name, ref)
				}
			}
			if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
				block++
			}
		}
		for _, c := range s.Claims {
			if c.Namespace != ns || names[c.Name] {
				t.Errorf("seed %d: bad or repeated claim %s/%s", seed, c.Namespace, c.Name)
			}
			names[c.Name] = true
			checkModes(t, seed, c.Name, c.Spec.AccessModes)
			switch {
			case c.Spec.StorageClassName == nil:
				nilClass++
			case *c.Spec.StorageClassName == "":
				emptyClass++
			}
			if c.Spec.VolumeName != "" {
				named++
			}
			if c.Spec.Selector != nil {
				selectors++
			}
		}
	}
	// Every feature shows up in a few hundred scenarios.
	for what, n := range map[string]int{
		"default classes": defaults, "WaitForFirstConsumer classes": wffc, "pre-bound volumes": prebound,
		"claims naming a volume": named, "selectors": selectors, "nil classes": nilClass,
		"empty classes": emptyClass, "block volumes": block,
	} {
		if n < 20 {
			t.Errorf("only %d %s in 300 scenarios", n, what)
		}
	}
}

func checkModes(t *testing.T, seed int64, name string, modes []corev1.PersistentVolumeAccessMode) {
	t.Helper()
	if len(modes) == 0 {
		t.Errorf("seed %d: %s has no access mode", seed, name)
	}
	for _, m := range modes {
		if m == corev1.ReadWriteOncePod && len(modes) > 1 {
			t.Errorf("seed %d: %s has ReadWriteOncePod with other modes %v", seed, name, modes)
		}
	}
}

func TestAnalyzeGeneratedScenarios(t *testing.T) {
	// The analysis must leave most outcomes determined, or the differential
	// test compares little.
	known, total := 0, 0
	for seed := int64(0); seed < 300; seed++ {
		for _, e := range Analyze(Generate(seed)).Claims {
			total++
			if e.PhaseKnown {
				known++
			}
		}
	}
	if known*10 < total*8 {
		t.Errorf("only %d of %d claims have a determined phase", known, total)
	}
	t.Logf("%d of %d claims have a determined phase", known, total)
}
