package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/tether-csi/tether/test/cluster"
)

// The manifests of external-provisioner v6.4.0, copied unchanged (see
// test/testdata/ep-v6.4.0/README.md), with the release's SHA-256.
var epManifests = map[string]string{
	"rbac.yaml":             "0ee8427b746a1d3b695705b74c2d7fb165121110b1a10c0b6e204918d93e814f",
	"deployment.yaml":       "64c7b5b67c1f5c403f7ed113736957a81052217d721748eacaae3fc671bfdfa1",
	"storage-capacity.yaml": "5834b0ba01c29b99289a4a5c14c2baa5c52508e4b8a4a9eee4d99f3584bb89ec",
}

func epManifest(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "ep-v6.4.0", name))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != epManifests[name] {
		t.Fatalf("%s is not external-provisioner v6.4.0's (SHA-256 %x)", name, sum)
	}
	return data
}

func kubectl(t *testing.T, c *cluster.Cluster, stdin []byte, args ...string) string {
	t.Helper()
	path, err := cluster.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), path, append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestEPRBACIsEnough runs tether's provisioner as EP's ServiceAccount, with
// EP v6.4.0's ClusterRole and Role exactly as shipped, and EP's Deployment
// arguments (leader election, the HTTP endpoint): a volume is provisioned
// and deleted (its PV's finalizer removed), the liveness probe's path
// answers, and nothing is refused.
func TestEPRBACIsEnough(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	kubectl(t, c, epManifest(t, "rbac.yaml"), "apply", "-f", "-")
	saKubeconfig, _ := c.ServiceAccountKubeconfig(t, "default", "csi-provisioner")

	mock := startMock(t, c, mockName, "")
	endpoint := cluster.FreeAddr(t)
	// As EP's Deployment (whose pod would run in "default", the
	// namespace of its Role): leader election and the HTTP endpoint.
	prov := startProvisioner(t, c, "ep-rbac", mock.Socket, "--kubeconfig="+saKubeconfig,
		"--leader-election", "--leader-election-namespace=default", "--http-endpoint="+endpoint)
	startBinder(t, c)

	createCSIClass(t, c, "ep-rbac", mockName, "Delete", storagev1.VolumeBindingImmediate)
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	mustCreate(t, pvcs.Create, claim("ep-rbac", "ep-rbac", "1Gi"))
	pvc := waitClaimBound(t, cs, "ep-rbac")
	pv := getPV(t, cs, pvc.Spec.VolumeName)
	if !slices.Contains(pv.Finalizers, "external-provisioner.volume.kubernetes.io/finalizer") {
		t.Errorf("finalizers %v lack external-provisioner's", pv.Finalizers)
	}

	eventually(t, "the liveness probe's path answers", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+"/healthz/leader-election", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})

	deleteClaim(t, cs, "ep-rbac")
	waitGone(t, func(ctx context.Context) error {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err
	})
	if slices.Contains(mock.Volumes(t), pv.Spec.CSI.VolumeHandle) {
		t.Errorf("the driver still lists %s", pv.Spec.CSI.VolumeHandle)
	}

	data, err := os.ReadFile(prov.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("refused with EP's RBAC: %s", line)
		}
	}
}

// TestEPDeploymentRunsTether: EP v6.4.0's Deployment with only the image
// changed is accepted by the API server (server-side dry run), and tether's
// binary accepts the csi-provisioner container's arguments, with their
// $(VAR) references expanded from the container's env as the kubelet does.
func TestEPDeploymentRunsTether(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	data := epManifest(t, "deployment.yaml")
	_, container := epProvisioner(t, "deployment.yaml")

	const image = "tether/provisioner:test"
	changed := regexp.MustCompile(`(?m)^(\s+image: )gcr\.io/k8s-staging-sig-storage/csi-provisioner:canary$`).ReplaceAll(data, []byte("${1}"+image))
	if bytes.Equal(changed, data) {
		t.Fatal("the csi-provisioner image was not found")
	}
	out := kubectl(t, c, changed, "apply", "--dry-run=server", "-n", "default", "-f", "-")
	if !strings.Contains(out, "deployment.apps/csi-provisioner created (server dry run)") {
		t.Errorf("dry run: %s", out)
	}

	args := expandArgs(container, nil)
	if len(args) == 0 || args[0] != "--csi-address=/var/lib/csi/sockets/pluginproxy/mock.socket" {
		t.Fatalf("arguments %q", args)
	}
	// Under EP's file name: --version names the program, not the file.
	bin := filepath.Join(t.TempDir(), "csi-provisioner")
	if err := os.Symlink(cluster.BuildBinary(t, "./cmd/provisioner"), bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, append(args, "--version")...)
	got, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(got), "provisioner ") {
		t.Errorf("provisioner %s --version: %v\n%s", strings.Join(args, " "), err, got)
	}
	// And a wrong argument is not accepted the same way.
	if out, err := exec.CommandContext(t.Context(), bin, "--no-such-flag", "--version").CombinedOutput(); err == nil {
		t.Errorf("an unknown flag was accepted: %s", out)
	}
}

// epProvisioner is the Deployment in one of EP's manifests and its
// csi-provisioner container.
func epProvisioner(t *testing.T, name string) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(epManifest(t, name), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dep, ok := obj.(*appsv1.Deployment)
	if !ok {
		t.Fatalf("%s holds a %T", name, obj)
	}
	i := slices.IndexFunc(dep.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "csi-provisioner" })
	if i < 0 {
		t.Fatalf("%s: no csi-provisioner container", name)
	}
	return dep, &dep.Spec.Template.Spec.Containers[i]
}

// expandArgs is the container's command and args with each $(VAR) expanded
// as the kubelet does, from the container's env values, or from values
// where it names the variable (what a fieldRef would give in a pod, or a
// value a test must change).
func expandArgs(c *corev1.Container, values map[string]string) []string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	maps.Copy(env, values)
	var args []string
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		args = append(args, regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		}))
	}
	return args
}
