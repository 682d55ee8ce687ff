// Package cluster starts a real Kubernetes control plane for tests: etcd and
// kube-apiserver (through controller-runtime's envtest) on free loopback
// ports, with RBAC on, and on request kube-scheduler and
// kube-controller-manager as child processes. Everything it starts is stopped
// when the test ends, on failure too.
package cluster

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options say what to start besides etcd and kube-apiserver.
type Options struct {
	// Controllers, when not empty, starts kube-controller-manager with exactly
	// these controllers (its --controllers flag).
	Controllers []string
	// ControllerManagerArgs are extra kube-controller-manager flags.
	ControllerManagerArgs []string
	// Scheduler starts kube-scheduler.
	Scheduler bool
	// APIServerArgs are extra kube-apiserver flags, by name without dashes.
	APIServerArgs map[string][]string
	// RealNodes serves the API server on the host's address (pods of real
	// nodes reach it there; its certificate covers it) with the flags real
	// nodes need (RealNodeArgs) and ServiceAccount admission. See
	// StartRealNode.
	RealNodes bool
	// EtcdDelay, when set, puts a DelayProxy between kube-apiserver and
	// etcd that adds this much to each direction: every etcd round trip
	// takes twice EtcdDelay longer, as a commit to disk and replication
	// do in a real cluster. Benchmarks use it (BENCH_ETCD_DELAY).
	EtcdDelay time.Duration
}

// Cluster is a running control plane.
type Cluster struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for the same identity.
	Kubeconfig string
	// Dir holds the kubeconfig and the components' logs.
	Dir string
	// Client is a clientset for Config.
	Client kubernetes.Interface

	env     *envtest.Environment
	certDir string
}

// delayEtcd fixes etcd's client address and points kube-apiserver at a
// DelayProxy to it, which stops after the control plane (clean-ups run last
// first).
func delayEtcd(t T, env *envtest.Environment, delay time.Duration) {
	t.Helper()
	etcdAddr := FreeAddr(t)
	env.ControlPlane.Etcd = &envtest.Etcd{URL: &url.URL{Scheme: "http", Host: etcdAddr}}
	proxy, err := StartDelayProxy(etcdAddr, delay)
	if err != nil {
		t.Fatalf("etcd delay proxy: %v", err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	env.ControlPlane.GetAPIServer().Configure().Set("etcd-servers", "http://"+proxy.Addr)
}

// Start brings up a control plane, or fails the test. It is stopped by t.Cleanup.
func Start(t T, opts Options) *Cluster {
	t.Helper()
	binDir, err := ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if _, err := Tool(name); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	var c *Cluster
	t.Cleanup(func() { saveArtifacts(t, dir) })
	env := &envtest.Environment{
		BinaryAssetsDirectory:    binDir,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	api := env.ControlPlane.GetAPIServer()
	for name, values := range opts.APIServerArgs {
		api.Configure().Set(name, values...)
	}
	if opts.RealNodes {
		if api.SecureServing.Address, api.SecureServing.Port, err = apiHostPort(); err != nil {
			t.Fatal(err)
		}
		for name, values := range RealNodeArgs {
			api.Configure().Set(name, values...)
		}
		// envtest turns ServiceAccount admission off; pods that talk to
		// the API server need it (their token volume).
		api.Configure().Disable("disable-admission-plugins")
	} else {
		// A control plane on loopback advertises a loopback address, which
		// kube-apiserver 1.37 refuses while it keeps the kubernetes
		// Service's endpoints; without nodes no pod reads them.
		api.Configure().Set("endpoint-reconciler-type", "none")
	}
	if opts.EtcdDelay > 0 {
		delayEtcd(t, env, opts.EtcdDelay)
	}
	// An audit log of RBACCheckedKubeconfig's users only (see rbac.go).
	if err := configureAudit(api, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Start(); err != nil {
		_ = env.Stop()
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	guardAgainstOrphans(t, env.ControlPlane.Etcd.DataDir, api.CertDir)

	admin, err := env.AddUser(envtest.User{Name: "tether-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("add admin user: %v", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatalf("admin kubeconfig: %v", err)
	}
	t.Cleanup(func() {
		// Before the control plane stops: the objects tell what went wrong.
		if t.Failed() && c != nil {
			c.dump(dir)
		}
	})
	c = &Cluster{
		Config:     rest.CopyConfig(admin.Config()),
		Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		Dir:        dir,
		env:        env,
		certDir:    api.CertDir,
	}
	if err := os.WriteFile(c.Kubeconfig, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	c.Config.QPS, c.Config.Burst = 1000, 2000
	c.Client = kubernetes.NewForConfigOrDie(c.Config)

	if opts.Scheduler {
		c.StartScheduler(t)
	}
	if len(opts.Controllers) > 0 {
		c.StartControllerManager(t, opts.Controllers, opts.ControllerManagerArgs...)
	}
	return c
}

// StartControllerManager runs kube-controller-manager with the given
// controllers, leader election off and no serving port.
func (c *Cluster) StartControllerManager(t T, controllers []string, extraArgs ...string) *Process {
	t.Helper()
	path, err := Tool("kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + filepath.Join(c.certDir, "sa-signer.key"),
		"--root-ca-file=" + filepath.Join(c.certDir, "apiserver.crt"),
		"--v=2",
	}
	return StartProcess(t, ProcessOptions{
		Name: "kube-controller-manager",
		Path: path,
		Args: append(args, extraArgs...),
		Dir:  c.Dir,
	})
}

// StartScheduler runs kube-scheduler with leader election off.
func (c *Cluster) StartScheduler(t T, extraArgs ...string) *Process {
	t.Helper()
	path, err := Tool("kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=2",
	}
	return StartProcess(t, ProcessOptions{
		Name: "kube-scheduler",
		Path: path,
		Args: append(args, extraArgs...),
		Dir:  c.Dir,
	})
}

// Run starts any other binary (our own components, a CSI driver) with its
// log in the cluster's folder.
func (c *Cluster) Run(t T, opts ProcessOptions) *Process {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = c.Dir
	}
	return StartProcess(t, opts)
}

// String describes the cluster for logs.
func (c *Cluster) String() string {
	return fmt.Sprintf("cluster(%s, kubeconfig %s)", c.Config.Host, c.Kubeconfig)
}

// saveArtifacts copies a failed test's logs and kubeconfig (any test's,
// with TETHER_KEEP_LOGS set) to
// $TETHER_ARTIFACTS/<test> (default _artifacts/ in the repository), with a
// dump of the storage objects and events.
func saveArtifacts(t T, dir string) {
	if !t.Failed() && os.Getenv("TETHER_KEEP_LOGS") == "" {
		return
	}
	root := os.Getenv("TETHER_ARTIFACTS")
	if root == "" {
		repo, err := RepoRoot()
		if err != nil {
			return
		}
		root = filepath.Join(repo, "_artifacts")
	}
	dst := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Logf("saving artifacts: %v", err)
		return
	}
	t.Logf("logs saved in %s", dst)
}
