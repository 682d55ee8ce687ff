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
//
// The divergence also shows as a "decision" difference when KCM happened
// to reach the same volume for its own reasons (an earlier claim had taken
// the volume its rules prefer) while, replayed on tether's run, KCM's rules
// prefer another one.
func PreboundDivergence(s *Scenario, kcm, ours Observed, diffs []Difference) []string {
	decided := map[string]bool{}
	for _, d := range diffs {
		if d.Field == "decision" {
			decided[d.Object] = true
		}
	}
	var out []string
	for _, claim := range s.Claims {
		got := ours.Claims[claim.Name].Volume
		if got == "" || (kcm.Claims[claim.Name].Volume == got && !decided["claim "+s.Namespace+"/"+claim.Name]) {
			continue
		}
		for _, pv := range s.PVs {
			if pv.Name == got && preboundTo(pv, claim) {
				kcmGot := fmt.Sprintf("KCM bound %q", kcm.Claims[claim.Name].Volume)
				if kcm.Claims[claim.Name].Volume == got {
					kcmGot = "KCM's rules, replayed on tether's run, prefer another volume"
				}
				out = append(out, fmt.Sprintf("claim %s: tether honoured volume %s pre-bound to it; %s", claim.Name, got, kcmGot))
			}
		}
	}
	return out
}
