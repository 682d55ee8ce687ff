package scope_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-csi/tether/pkg/provisioner/scope"
)

const (
	propertyDriver = "local.csi.tether.dev"
	propertySeed   = 49
	// propertyCases is how many claims and how many PVs are drawn for
	// each scope; propertySequences how many objects are followed through
	// a Keeper, each over propertyVersions versions.
	propertyCases     = 5000
	propertySequences = 400
	propertyVersions  = 12
)

// misses counts, per scope and reader, the objects a reader acts on that
// the scope does not keep, with the first of them described.
type misses struct {
	count map[string]int
	first map[string]string
	acted map[string]int // how often each reader acted, kept or not
}

func newMisses() *misses {
	return &misses{count: map[string]int{}, first: map[string]string{}, acted: map[string]int{}}
}

func (m *misses) note(scopeName, reader string, kept bool, what func() string) {
	m.acted[reader]++
	if kept {
		return
	}
	key := scopeName + ": " + reader
	if m.count[key] == 0 {
		m.first[key] = what()
	}
	m.count[key]++
}

// report fails t for every miss, and for a reader that never acted (the
// generator would then not test it).
func (m *misses) report(t *testing.T, readers []string) {
	t.Helper()
	keys := make([]string, 0, len(m.count))
	for k := range m.count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Errorf("%s acts on %d objects the scope does not keep whole; the first: %s", k, m.count[k], m.first[k])
	}
	for _, r := range readers {
		t.Logf("%s acted on %d objects", r, m.acted[r])
		if m.acted[r] == 0 {
			t.Errorf("the generator never made %s act", r)
		}
	}
}

func pvReaderNames() []string {
	var out []string
	for _, r := range pvReaders {
		out = append(out, r.name)
	}
	return out
}

func claimReaderNames() []string {
	var out []string
	for _, r := range claimReaders {
		out = append(out, r.name)
	}
	return out
}

// TestScopeKeepsWhatReadersActOn draws claims and PVs (seed 49, 5,000 of
// each per scope: centralised, migrating an in-tree plugin, node mode with
// the node's labels known and not yet known) and asks every reader of the
// caches whether it would act on each: whenever one would, the scope must
// keep the object whole (Scope.Claim, Scope.Volume), or the reader never
// finds it.
func TestScopeKeepsWhatReadersActOn(t *testing.T) {
	pvMisses, claimMisses := newMisses(), newMisses()
	for i, ts := range testScopes(propertyDriver) {
		r := rand.New(rand.NewPCG(propertySeed, uint64(i)))
		for n := range propertyCases {
			pv := newPVGen(r, ts.s.Driver).build(fmt.Sprintf("pv-%d", n), types.UID(fmt.Sprintf("pv-uid-%d", n)))
			kept := ts.s.Volume(pv)
			for _, rd := range pvReaders {
				if rd.acts(ts, pv) {
					pvMisses.note(ts.name, rd.name, kept, func() string { return describePV(pv) })
				}
			}
			c := newClaimGen(r, ts.s.Driver, ts.s.Migrated).build(fmt.Sprintf("c-%d", n), types.UID(fmt.Sprintf("c-uid-%d", n)), ts.s.Driver)
			kept = ts.s.Claim(c)
			for _, rd := range claimReaders {
				if rd.acts(ts, c, r) {
					claimMisses.note(ts.name, rd.name, kept, func() string { return describeClaim(c) })
				}
			}
		}
	}
	pvMisses.report(t, pvReaderNames())
	claimMisses.report(t, claimReaderNames())
}

// TestScopeKeepsWhatReadersActOnThroughAKeeper follows claims and PVs
// through the scope's Keepers, one field drawn anew at each version (seed
// 49, 400 objects of each kind per scope, 12 versions each): at every
// version a reader would act on, the Keeper must keep it (Keep, never Skip
// or Forget), whether the scope would keep it fresh or it stays kept
// (KeepClaim, KeepVolume).
func TestScopeKeepsWhatReadersActOnThroughAKeeper(t *testing.T) {
	pvMisses, claimMisses := newMisses(), newMisses()
	for i, ts := range testScopes(propertyDriver) {
		r := rand.New(rand.NewPCG(propertySeed, 100+uint64(i)))
		volumes := ts.s.VolumeKeeper()
		claims := ts.s.ClaimKeeper(func(uid string) string { return ownVolume(types.UID(uid)) })
		for n := range propertySequences {
			name, uid := fmt.Sprintf("pv-%d", n), types.UID(fmt.Sprintf("pv-uid-%d", n))
			g := newPVGen(r, ts.s.Driver)
			for v := range propertyVersions {
				if v > 0 {
					pvFields[r.IntN(len(pvFields))](r, &g, ts.s.Driver)
				}
				pv := g.build(name, uid)
				action := volumes.Modified(pv)
				if v == 0 {
					action = volumes.Added(pv)
				}
				for _, rd := range pvReaders {
					if rd.acts(ts, pv) {
						pvMisses.note(ts.name, rd.name, action == scope.Keep,
							func() string { return fmt.Sprintf("version %d (%v): %s", v, action, describePV(pv)) })
					}
				}
			}
			volumes.Deleted(g.build(name, uid))

			name, uid = fmt.Sprintf("c-%d", n), types.UID(fmt.Sprintf("c-uid-%d", n))
			cg := newClaimGen(r, ts.s.Driver, ts.s.Migrated)
			for v := range propertyVersions {
				if v > 0 {
					claimFields[r.IntN(len(claimFields))](r, &cg, ts.s.Driver, ts.s.Migrated)
				}
				c := cg.build(name, uid, ts.s.Driver)
				action := claims.Modified(c)
				if v == 0 {
					action = claims.Added(c)
				}
				for _, rd := range claimReaders {
					if rd.acts(ts, c, r) {
						claimMisses.note(ts.name, rd.name, action == scope.Keep,
							func() string { return fmt.Sprintf("version %d (%v): %s", v, action, describeClaim(c)) })
					}
				}
			}
			claims.Deleted(cg.build(name, uid, ts.s.Driver))
		}
	}
	pvMisses.report(t, pvReaderNames())
	claimMisses.report(t, claimReaderNames())
}
