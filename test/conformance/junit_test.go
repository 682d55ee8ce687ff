package conformance

import (
	"regexp"
	"strings"
	"testing"
)

// A JUnit report as e2e.test writes it (ginkgo v2), cut down.
const sampleReport = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="6" disabled="0" errors="0" failures="1" time="60">
  <testsuite name="Kubernetes e2e suite" package="/" tests="6" disabled="0" skipped="3" errors="0" failures="1" time="60">
    <testcase name="[It] External Storage [Driver: local.csi.tether.dev] [Testpattern: Dynamic PV (default fs)] volumes should store data" classname="Kubernetes e2e suite" status="passed" time="20.5"></testcase>
    <testcase name="[It] External Storage [Driver: local.csi.tether.dev] [Testpattern: Dynamic PV (block volmode)] volumes should store data" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped - Driver local.csi.tether.dev doesn&#39;t support Block -- skipping&#xA;more"></skipped>
    </testcase>
    <testcase name="[It] External Storage [Driver: local.csi.tether.dev] [Testpattern: Dynamic PV (default fs)] subPath should support existing directory" classname="Kubernetes e2e suite" status="failed" time="30">
      <failure message="timed out waiting for the condition" type="failed"></failure>
    </testcase>
    <testcase name="[It] External Storage [Driver: local.csi.tether.dev] [Testpattern: Dynamic PV (default fs)] capacity provides storage capacity information" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[It] External Storage [Driver: other.example.com] [Testpattern: Dynamic PV (default fs)] volumes should store data" classname="Kubernetes e2e suite" status="passed" time="9"></testcase>
    <testcase name="[It] [sig-storage] PersistentVolumes should do something" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
  </testsuite>
</testsuites>`

func TestCountReport(t *testing.T) {
	c, err := countReport(strings.NewReader(sampleReport), "[Driver: local.csi.tether.dev]")
	if err != nil {
		t.Fatal(err)
	}
	if c.Specs != 4 || c.Ran != 2 || c.Passed != 1 || c.Failed != 1 || c.SkippedTotal() != 2 || c.Seconds != 50.5 {
		t.Errorf("counts %+v: want 4 specs, 2 ran, 1 passed, 1 failed, 2 skipped, 50.5 s", c)
	}
	for reason, n := range map[string]int{"Driver local.csi.tether.dev doesn't support Block -- skipping": 1, notSelected: 1} {
		if c.Skipped[reason] != n {
			t.Errorf("skipped %q: %d, want %d (all: %v)", reason, c.Skipped[reason], n, c.Skipped)
		}
	}
	if len(c.FailedNames) != 1 || !strings.Contains(c.FailedNames[0], "subPath should support existing directory") {
		t.Errorf("failed names %v", c.FailedNames)
	}
	if s := c.String(); !strings.Contains(s, "ran 2, passed 1, failed 1, skipped 2") || !strings.Contains(s, "FAILED: ") {
		t.Errorf("summary:\n%s", s)
	}
}

func TestCountReportRejectsGarbage(t *testing.T) {
	if _, err := countReport(strings.NewReader("not xml"), "x"); err == nil {
		t.Error("no error for a report that is not XML")
	}
}

func TestFocusExpr(t *testing.T) {
	for _, tc := range []struct {
		name, user string
		full       bool
		match      []string
		miss       []string
	}{
		{name: "full", full: true,
			match: []string{"External Storage [Driver: local.csi.tether.dev] [Testpattern: Dynamic PV (default fs)] volumes should store data"},
			miss:  []string{"External Storage [Driver: hostpath.csi.k8s.io] [Testpattern: Dynamic PV (default fs)] volumes should store data"}},
		{name: "short",
			match: []string{"External Storage [Driver: local.csi.tether.dev] [Testpattern: Dynamic PV (default fs)] volumes should store data"},
			miss:  []string{"External Storage [Driver: local.csi.tether.dev] [Testpattern: Dynamic PV (block volmode)] volumes should store data"}},
		{name: "user", user: "subPath",
			match: []string{"External Storage [Driver: local.csi.tether.dev] [Testpattern: Dynamic PV (default fs)] subPath should support existing directory"},
			miss:  []string{"External Storage [Driver: local.csi.tether.dev] [Testpattern: Dynamic PV (default fs)] volumes should store data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			re := regexp.MustCompile(focusExpr(tc.full, tc.user))
			for _, s := range tc.match {
				if !re.MatchString(s) {
					t.Errorf("%s does not select %q", re, s)
				}
			}
			for _, s := range tc.miss {
				if re.MatchString(s) {
					t.Errorf("%s selects %q", re, s)
				}
			}
		})
	}
}

func TestSkipExpr(t *testing.T) {
	re := regexp.MustCompile(skipExpr())
	prefix := "External Storage [Driver: local.csi.tether.dev] "
	for name, want := range map[string]bool{
		"[Testpattern: Dynamic PV (default fs)] subPath should unmount if pod is force deleted while kubelet is down [Disruptive] [Slow] [LinuxOnly]": true,
		"[Testpattern: Dynamic PV (filesystem volmode)] volumeMode should not mount / map unused volumes in a pod [LinuxOnly]":                        true,
		"[Testpattern: Dynamic PV (default fs)] provisioning should provision storage with any volume data source [Serial]":                           true,
		"[Testpattern: Dynamic PV (default fs)] volumes should store data":                                                                            false,
		"[Testpattern: Dynamic PV (filesystem volmode)] volumeMode should fail to use a volume in a pod with mismatched mode [Slow]":                  false,
	} {
		if got := re.MatchString(prefix + name); got != want {
			t.Errorf("skip %q: %v, want %v", name, got, want)
		}
	}
}
