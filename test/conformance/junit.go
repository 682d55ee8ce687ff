// Package conformance runs Kubernetes' own External Storage e2e suites
// (k8s.io/kubernetes/test/e2e/storage/external, the e2e.test binary that
// make tools builds) against tether's binder and provisioner and the example
// local driver, deployed from deploy/csi on real kubelet nodes. See
// docs/conformance.md.
package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// junitReport is the part of e2e.test's JUnit report (ginkgo's) we read.
type junitReport struct {
	Suites []struct {
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Message string `xml:"message,attr"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
	} `xml:"error"`
}

// Counts sums up one run of the driver's tests.
type Counts struct {
	// Specs is how many of the suite's specs name the driver.
	Specs int
	// Ran = Passed + Failed: the specs that ran to an outcome.
	Ran, Passed, Failed int
	// Skipped are the driver's specs that did not run, by reason: "not
	// selected" for those the run's focus or skip left out, else the
	// suite's own message (a capability the driver does not declare, ...).
	Skipped map[string]int
	// FailedNames are the failed specs.
	FailedNames []string
	// Seconds is the time spent in the specs.
	Seconds float64
}

// SkippedTotal is the number of skipped specs.
func (c Counts) SkippedTotal() int {
	n := 0
	for _, v := range c.Skipped {
		n += v
	}
	return n
}

// String is the summary printed after a run.
func (c Counts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d specs for the driver: ran %d, passed %d, failed %d, skipped %d (%.0f s in specs)\n",
		c.Specs, c.Ran, c.Passed, c.Failed, c.SkippedTotal(), c.Seconds)
	for _, reason := range slices.SortedFunc(maps.Keys(c.Skipped), func(a, b string) int { return c.Skipped[b] - c.Skipped[a] }) {
		fmt.Fprintf(&b, "  skipped %4d: %s\n", c.Skipped[reason], reason)
	}
	for _, name := range c.FailedNames {
		fmt.Fprintf(&b, "  FAILED: %s\n", name)
	}
	return b.String()
}

// notSelected is the reason given to specs left out by the focus and skip
// expressions of the run.
const notSelected = "not selected by this run's focus and skip"

// countReport reads a JUnit report and counts the specs whose name contains
// driver.
func countReport(r io.Reader, driver string) (Counts, error) {
	var rep junitReport
	if err := xml.NewDecoder(r).Decode(&rep); err != nil {
		return Counts{}, fmt.Errorf("reading the JUnit report: %w", err)
	}
	c := Counts{Skipped: map[string]int{}}
	for _, s := range rep.Suites {
		for _, tc := range s.Cases {
			if !strings.Contains(tc.Name, driver) {
				continue
			}
			c.Specs++
			c.Seconds += tc.Time
			switch {
			case tc.Failure != nil || tc.Error != nil || tc.Status == "failed" || tc.Status == "panicked" ||
				tc.Status == "timedout" || tc.Status == "interrupted" || tc.Status == "aborted":
				c.Ran++
				c.Failed++
				c.FailedNames = append(c.FailedNames, tc.Name)
			case tc.Skipped != nil || tc.Status == "skipped" || tc.Status == "pending":
				c.Skipped[skipReason(tc)]++
			default:
				c.Ran++
				c.Passed++
			}
		}
	}
	slices.Sort(c.FailedNames)
	return c, nil
}

// skipReason is the first line of a spec's skip message, without ginkgo's
// "skipped - " prefix; a spec skipped without a message was not selected.
func skipReason(tc junitCase) string {
	msg := ""
	if tc.Skipped != nil {
		msg = tc.Skipped.Message
	}
	msg, _, _ = strings.Cut(msg, "\n")
	msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(msg), "skipped"))
	msg = strings.TrimSpace(strings.TrimPrefix(msg, "-"))
	if msg == "" {
		return notSelected
	}
	return msg
}
