package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/tether-csi/tether/pkg/explain"
	"github.com/tether-csi/tether/test/cluster"
)

// whyCase is a claim left Pending for one reason, and what
// `kubectl tether why` must say about it.
type whyCase struct {
	claim  *corev1.PersistentVolumeClaim
	pod    bool   // a pod uses the claim
	reason string // the cause's reason
	// bestOnceScheduled is the volume named as the best match once a node
	// is selected, "" for none; best is the best match now.
	best, bestOnceScheduled string
	words                   []string // fragments of the cause or action
}

// TestWhy leaves claims Pending for each of the main reasons, on a real
// control plane with kube-scheduler, tether's binder (leading on its Lease
// in tether-system, as deploy/csi runs it), the local driver with
// node-deployment provisioners publishing capacity, and a driver that
// refuses every volume, and checks that `kubectl tether why` names the
// reason, the best match and the binder, with the exit status of each.
func TestWhy(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Scheduler: true, Controllers: protectionControllers})
	cs := c.Client
	mustCreate(t, cs.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tether-system"}})
	cluster.StartLocalStack(t, c, cluster.StackOptions{BinderArgs: []string{"--leader-elect=true", "--leader-elect-resource-namespace=tether-system"}})
	createCSIClass(t, c, "local", localDriver, "Delete", storagev1.VolumeBindingWaitForFirstConsumer)
	const broken, ghost = "broken.csi.tether.dev", "ghost.csi.tether.dev"
	mock := startMock(t, c, broken, "createVolumeStart: INVALIDARGUMENT\n")
	startProvisioner(t, c, "broken", mock.Socket)
	createCSIClass(t, c, "broken", broken, "Delete", storagev1.VolumeBindingImmediate)
	createCSIClass(t, c, "ghost", ghost, "Delete", storagev1.VolumeBindingImmediate)
	for _, name := range []string{"empty", "small", "modes", "labels", "block", "ok"} {
		createClass(t, cs, name, "kubernetes.io/no-provisioner", storagev1.VolumeBindingImmediate, false)
	}
	for _, name := range []string{"pinned", "static-wffc"} {
		createClass(t, cs, name, "kubernetes.io/no-provisioner", storagev1.VolumeBindingWaitForFirstConsumer, false)
	}
	pinnedPV := func(name, class, size, node string) *corev1.PersistentVolume {
		pv := localPV(name, class, size, node)
		pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Key = localKey
		return pv
	}
	silver := hostPathPV("pv-labels-silver", "labels", "5Gi")
	silver.Labels = map[string]string{"tier": "silver"}
	for _, pv := range []*corev1.PersistentVolume{
		hostPathPV("pv-small-1gi", "small", "1Gi"), hostPathPV("pv-small-2gi", "small", "2Gi"),
		hostPathPV("pv-modes-rwo", "modes", "5Gi"), silver, hostPathPV("pv-block-fs", "block", "5Gi"),
		hostPathPV("pv-ok", "ok", "1Gi"),
		pinnedPV("pv-pinned-node-1", "pinned", "5Gi", "node-1"),
		pinnedPV("pv-wffc-1gi", "static-wffc", "1Gi", "node-1"), pinnedPV("pv-wffc-3gi", "static-wffc", "3Gi", "node-1"),
		pinnedPV("pv-wffc-10gi", "static-wffc", "10Gi", "node-2"),
	} {
		mustCreate(t, cs.CoreV1().PersistentVolumes().Create, pv)
	}

	rwx := claim("wrong-mode", "modes", "1Gi")
	rwx.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	gold := claim("selector", "labels", "1Gi")
	gold.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	blockClaim := claim("volume-mode", "block", "1Gi")
	blockClaim.Spec.VolumeMode = ptrTo(corev1.PersistentVolumeBlock)
	affinity := claim("affinity", "pinned", "1Gi")
	affinity.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-2"}
	cases := []whyCase{
		{claim: claim("no-pv", "empty", "1Gi"), reason: explain.CauseNoVolumeOfClass, words: []string{`create a PV of class "empty"`}},
		{claim: claim("too-small", "small", "5Gi"), reason: "TooSmall", words: []string{"at most 2Gi (pv-small-2gi"}},
		{claim: rwx, reason: "AccessModes", words: []string{"claim ReadWriteMany"}},
		{claim: gold, reason: "Selector", words: []string{"tier=gold"}},
		{claim: blockClaim, reason: "VolumeMode", words: []string{"volume Filesystem, claim Block"}},
		{claim: affinity, reason: "NodeAffinity", words: []string{"node node-2"}},
		{claim: claim("no-provisioner", "ghost", "1Gi"), reason: explain.CauseNoProvisioner, words: []string{`start the provisioner for driver "ghost.csi.tether.dev"`}},
		{claim: claim("no-pod", "local", "1Gi"), reason: explain.CauseWaitForFirstConsumer, words: []string{"create a pod that uses claim no-pod"}},
		{claim: claim("wffc-static", "static-wffc", "2Gi"), reason: explain.CauseWaitForFirstConsumer, bestOnceScheduled: "pv-wffc-3gi",
			words: []string{"volume pv-wffc-3gi would then be bound"}},
		{claim: claim("driver-error", "broken", "1Gi"), reason: explain.CauseProvisioningFailed, words: []string{"InvalidArgument"}},
		{claim: claim("too-big", "local", "20Gi"), pod: true, reason: explain.CauseNoCapacity, words: []string{"no topology segment has room for 20Gi"}},
	}
	for _, tc := range cases {
		mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, tc.claim)
		if tc.pod {
			mustCreate(t, cs.CoreV1().Pods("default").Create, podWithClaim(tc.claim.Name+"-app", tc.claim.Name))
		}
	}
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("fits", "ok", "1Gi"))
	waitClaimBound(t, cs, "fits")

	bin := cluster.BuildBinary(t, "./cmd/kubectl-tether")
	for _, tc := range cases {
		t.Run(tc.claim.Name, func(t *testing.T) {
			var e explain.Explanation
			// The claim reaches its final state over a few syncs (the
			// binder's annotation, the scheduler's attempt, a failure
			// event): ask until the answer is the expected one.
			err := wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
				e = whyJSON(t, bin, c.Kubeconfig, "default/"+tc.claim.Name)
				return e.Cause != nil && e.Cause.Reason == tc.reason, nil
			})
			text := runWhyStatus(t, bin, c.Kubeconfig, 1, "-n", "default", tc.claim.Name)
			if err != nil {
				t.Fatalf("cause %+v, want %s\n%s", e.Cause, tc.reason, text)
			}
			if e.Phase != "Pending" || e.BestMatch != tc.best || e.BestMatchOnceScheduled != tc.bestOnceScheduled {
				t.Errorf("phase %s, best match %q, once scheduled %q; want Pending, %q, %q", e.Phase, e.BestMatch, e.BestMatchOnceScheduled, tc.best, tc.bestOnceScheduled)
			}
			all := e.Cause.Message + " " + e.Cause.Action
			for _, w := range tc.words {
				if !strings.Contains(all, w) {
					t.Errorf("%q not in the cause: %s", w, all)
				}
			}
			// The cause and what to do come first, then the binder.
			lines := strings.Split(text, "\n")
			if len(lines) < 4 || !strings.HasPrefix(lines[1], "Why: "+tc.reason) || (e.Cause.Action != "" && !strings.HasPrefix(lines[2], "What to do: ")) {
				t.Errorf("the cause and the action are not lines 2 and 3:\n%s", text)
			}
			if !strings.Contains(text, "\nBinder: tether's: Lease tether-system/tether-binder is held by ") {
				t.Errorf("the binder is not named:\n%s", text)
			}
			t.Logf("kubectl tether why default/%s\n%s", tc.claim.Name, text)
		})
	}

	t.Run("bound claim", func(t *testing.T) {
		e := whyJSON(t, bin, c.Kubeconfig, "default/fits")
		if e.Phase != "Bound" || e.Volume != "pv-ok" || !strings.HasPrefix(e.State, "Bound to pv-ok") || e.Cause != nil {
			t.Errorf("explanation %+v, want Bound to pv-ok and no cause", e)
		}
		if b := e.BinderRunning; b == nil || b.Running != explain.BinderTether {
			t.Errorf("binder %+v, want tether's", b)
		}
		t.Logf("kubectl tether why default/fits\n%s", runWhyStatus(t, bin, c.Kubeconfig, 0, "default/fits"))
		// -o yaml: the same struct, by the same field names.
		var y explain.Explanation
		if err := yaml.UnmarshalStrict([]byte(runWhyStatus(t, bin, c.Kubeconfig, 0, "-o", "yaml", "default/fits")), &y); err != nil {
			t.Fatalf("-o yaml: %v", err)
		}
		if y.Claim != e.Claim || y.State != e.State || y.Volume != e.Volume || y.BinderRunning == nil || y.BinderRunning.Running != explain.BinderTether {
			t.Errorf("-o yaml %+v, -o json %+v", y, e)
		}
	})

	t.Run("exit status 2 and help", func(t *testing.T) {
		for _, args := range [][]string{{"default/no-such-claim"}, {"-o", "wide", "default/fits"}, {"a", "b"},
			{"-A", "default/fits"}, {"-A", "-n", "default"}} {
			runWhyStatus(t, bin, c.Kubeconfig, 2, args...)
		}
		out, err := exec.CommandContext(t.Context(), bin, "why", "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Exit status of why") {
			t.Errorf("why --help: %v\n%s", err, out)
		}
		out, err = exec.CommandContext(t.Context(), bin).CombinedOutput()
		if code := exitCode(err); code != 2 || !strings.Contains(string(out), "--all-pending") {
			t.Errorf("bare kubectl-tether: status %d\n%s", code, out)
		}
	})

	t.Run("every claim that waits", func(t *testing.T) {
		text := runWhyStatus(t, bin, c.Kubeconfig, 1, "-A")
		for _, tc := range cases {
			if !regexp.MustCompile(`(?m)^default +` + tc.claim.Name + ` .* ` + tc.reason + ` `).MatchString(text) {
				t.Errorf("no row for %s with %s:\n%s", tc.claim.Name, tc.reason, text)
			}
		}
		if regexp.MustCompile(`(?m)^default +fits `).MatchString(text) {
			t.Errorf("a Bound claim is in the table:\n%s", text)
		}
		t.Logf("kubectl tether why -A\n%s", text)
	})

	t.Run("through kubectl", func(t *testing.T) {
		kubectl, err := cluster.Tool("kubectl")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.Symlink(bin, filepath.Join(dir, "kubectl-tether")); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), kubectl, "tether", "why", "default/too-small")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if exitCode(err) != 1 || !strings.Contains(string(out), "Why: TooSmall") {
			t.Fatalf("kubectl tether why: %v (want exit status 1)\n%s", err, out)
		}
		t.Logf("kubectl tether why default/too-small\n%s", out)
	})

	t.Run("a namespace user is told what it could not read", func(t *testing.T) {
		ctx := t.Context()
		mustCreate(t, cs.CoreV1().ServiceAccounts("default").Create, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}})
		mustCreate(t, cs.RbacV1().Roles("default").Create, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "claim-viewer"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "pods", "events"}, Verbs: []string{"get", "list"}}}})
		mustCreate(t, cs.RbacV1().RoleBindings("default").Create, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "claim-viewer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "claim-viewer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "viewer"}}})
		kubeconfig, _ := c.ServiceAccountKubeconfig(t, "default", "viewer")
		var text string
		// The RoleBinding may take a moment to reach the authorizer's cache.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
			var code int
			text, code = runWhyCode(t, bin, kubeconfig, "too-small")
			return code == 2 && strings.Contains(text, "Claim default/too-small"), nil
		})
		if err != nil {
			t.Fatalf("kubectl tether why as a namespace user: %v (want exit status 2)\n%s", err, text)
		}
		for _, want := range []string{"Claim default/too-small: Pending", "Could not read: storageclasses (forbidden",
			"persistentvolumes (forbidden", "binder leases (forbidden", "Why: " + explain.CauseUnknown, "Binder: cannot tell"} {
			if !strings.Contains(text, want) {
				t.Errorf("%q not in:\n%s", want, text)
			}
		}
		t.Logf("kubectl tether why too-small (as default/viewer)\n%s", text)

		// -A: the user may not list claims in every namespace, so it is
		// shown its own (the kubeconfig context's), and told so;
		// --all-pending -n gives the same table without the note.
		all := runWhyStatus(t, bin, kubeconfig, 1, "-A")
		for _, want := range []string{"Note: claims of every namespace could not be read (forbidden (list, all namespaces)): only namespace default is shown",
			"claims wait: ", "(namespace default)", "NAMESPACE  CLAIM", "Could not read: "} {
			if !strings.Contains(all, want) {
				t.Errorf("%q not in:\n%s", want, all)
			}
		}
		for _, tc := range cases {
			if !regexp.MustCompile(`(?m)^default +` + tc.claim.Name + ` `).MatchString(all) {
				t.Errorf("no row for %s:\n%s", tc.claim.Name, all)
			}
		}
		t.Logf("kubectl tether why -A (as default/viewer)\n%s", all)
		if one := runWhyStatus(t, bin, kubeconfig, 1, "--all-pending", "-n", "default"); strings.Contains(one, "Note:") || !strings.Contains(one, "(namespace default)") {
			t.Errorf("--all-pending -n default as default/viewer:\n%s", one)
		}
	})
}

// runWhyCode runs kubectl-tether why and returns its output (stdout, then
// stderr) and exit status.
func runWhyCode(t *testing.T, bin, kubeconfig string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"why", "--kubeconfig=" + kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := exitCode(err)
	if code < 0 {
		t.Fatalf("kubectl-tether why %v: %v", args, err)
	}
	return stdout.String() + stderr.String(), code
}

// exitCode is a finished command's exit status, -1 if it did not run.
func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	return -1
}

// runWhyStatus runs kubectl-tether why and wants the given exit status.
func runWhyStatus(t *testing.T, bin, kubeconfig string, want int, args ...string) string {
	t.Helper()
	out, code := runWhyCode(t, bin, kubeconfig, args...)
	if code != want {
		t.Fatalf("kubectl-tether why %v: exit status %d, want %d\n%s", args, code, want, out)
	}
	return out
}

func whyJSON(t *testing.T, bin, kubeconfig, claim string) explain.Explanation {
	t.Helper()
	out, code := runWhyCode(t, bin, kubeconfig, "-o", "json", claim)
	if code < 0 || code > 2 {
		t.Fatalf("kubectl-tether why -o json %s: exit status %d\n%s", claim, code, out)
	}
	var e explain.Explanation
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out)
	}
	return e
}
