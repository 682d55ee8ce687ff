package diff

import "fmt"

// PreboundDivergence names the claims for which the scenario shows
// tether's deliberate divergence from KCM (README, "Where the binder
// differs from KCM"): tether bound the claim to a volume the scenario
// pre-bound to it by claimRef, while KCM gave the claim something else,
// having found a free volume in an access-mode group it searches earlier.
// Every other difference in such a scenario may be a knock-on effect (the
// volume KCM used is then free for a later claim), so the test counts the
// whole scenario as explained rather than as failing. It returns nothing
// for a scenario where the divergence did not show.
func PreboundDivergence(s *Scenario, kcm, ours Observed) []string {
	var out []string
	for _, claim := range s.Claims {
		got := ours.Claims[claim.Name].Volume
		if got == "" || kcm.Claims[claim.Name].Volume == got {
			continue
		}
		for _, pv := range s.PVs {
			if pv.Name == got && preboundTo(pv, claim) {
				out = append(out, fmt.Sprintf("claim %s: tether honoured volume %s pre-bound to it; KCM bound %q",
					claim.Name, got, kcm.Claims[claim.Name].Volume))
			}
		}
	}
	return out
}
