package doccheck

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // its flags too, as the provisioner's
	"k8s.io/klog/v2"
)

func TestCodeFlags(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import "flag"

func f(fs *flag.FlagSet, o *opts) {
	fs.StringVar(&o.a, "alpha", "", "")
	fs.Duration("beta", 0, "")
	flag.BoolFunc("gamma", "", nil)
	o.leader.AddFlags(fs, server.LeaderFlagNames{Namespace: "delta-namespace", Name: "delta-name"})
	fs.IntVar(&o.b, name, 0, "")
	m.String("not-a-flag-call-but-counted")
	x := Other{Name: "epsilon"}
	for _, n := range []string{"A", "all-pending"} {
		fs.BoolVar(&o.all, n, false, "")
	}
	for _, n := range []string{"zeta"} {
		use(n)
	}
	pfs.StringVarP(&o.c, "output", "o", "", "")
	pfs.BoolP("help", "h", false, "")
}
`
	p := filepath.Join(dir, "x.go")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := CodeFlags([]string{p})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"A", "all-pending", "alpha", "beta", "delta-name", "delta-namespace", "gamma", "h", "help", "not-a-flag-call-but-counted", "o", "output"}
	if !slices.Equal(names, want) {
		t.Errorf("got %q, want %q", names, want)
	}
}

func TestCheckFlagNames(t *testing.T) {
	known := map[string]bool{"workers": true, "v": true}
	foreign := map[string]string{"controllers": "kube-controller-manager"}
	md := "`--workers=3`, `-v`, `--controllers=*,-x`\n```\n`--in-a-fence`\n```\n`--wokers` and `--gone` (default 1)\n"
	want := []string{
		"d.md:5: --wokers is a flag of no tether program (nor of another program the docs name: foreignFlags)",
		"d.md:5: --gone is a flag of no tether program (nor of another program the docs name: foreignFlags)",
	}
	if got := CheckFlagNames("d.md", md, known, foreign); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// knownFlags are the flags tether's programs register, klog's, and
// component-base's logging flags (the provisioner's, as EP's).
func knownFlags(t *testing.T, r string) map[string]bool {
	t.Helper()
	known, err := CodeFlags(goSources(t, r, "cmd", "pkg", "internal", "examples", "hack", "test"))
	if err != nil {
		t.Fatal(err)
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	klogFlags.VisitAll(func(f *flag.Flag) { known[f.Name] = true })
	logFlags := flag.NewFlagSet("logs", flag.ContinueOnError)
	logsapi.AddGoFlags(logsapi.NewLoggingConfiguration(), logFlags)
	logFlags.VisitAll(func(f *flag.Flag) { known[f.Name] = true })
	// kubectl-tether's cluster flags, kubectl's (cmd/kubectl-tether/flags.go).
	clusterFlags := pflag.NewFlagSet("cluster", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(false).AddFlags(clusterFlags)
	clusterFlags.VisitAll(func(f *pflag.Flag) {
		known[f.Name] = true
		if f.Shorthand != "" {
			known[f.Shorthand] = true
		}
	})
	for _, f := range []string{"h", "help"} { // every Go program's
		known[f] = true
	}
	return known
}

// Every flag a container of deploy/ or examples/ passes to one of
// tether's images (the example driver's too) is one a tether program
// registers, or klog's. (cmd/binder and cmd/provisioner parse their
// containers' args with their own flag sets: TestManifestArgsParse.)
func TestManifestFlagsExist(t *testing.T) {
	r := root(t)
	known := knownFlags(t, r)
	containers, err := ManifestContainers(r)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, cs := range containers {
		for _, c := range cs {
			if ImageProgram(c.Image) == "" {
				continue
			}
			n++
			if unknown := UnknownArgs(c.Args, known); len(unknown) > 0 {
				t.Error(ArgsProblem(path, c, fmt.Errorf("no tether program has %v", unknown)))
			}
		}
	}
	if n < 3 {
		t.Errorf("only %d containers of tether's images in deploy/ and examples/: the reading is broken", n)
	}
}

// foreignFlags are the flags of other programs the docs name, each with
// its program.
var foreignFlags = map[string]string{
	"controllers":                     "kube-controller-manager",
	"pvclaimbinder-sync-period":       "kube-controller-manager",
	"node-monitor-grace-period":       "kube-controller-manager",
	"master":                          "kube-controller-manager, and external-provisioner before v5",
	"max-requests-inflight":           "kube-apiserver",
	"max-mutating-requests-inflight":  "kube-apiserver",
	"etcd-servers":                    "kube-apiserver",
	"endpoint-reconciler-type":        "kube-apiserver",
	"cgroup-root":                     "kubelet",
	"enable-distributed-snapshotting": "csi-snapshotter",
	"manifest":                        "kubectl krew install",
	"archive":                         "kubectl krew install",
	"kubelet-registration-path":       "csi-node-driver-registrar",
	"n":                               "kubectl",
	"o":                               "kubectl",
	"namespace":                       "kubectl",
	"all-namespaces":                  "kubectl",
	"validate":                        "kubectl",
	"trimpath":                        "go build",
	"race":                            "go test",
	"x":                               "go build",
	"flag":                            "a flag in general",
}

// Every flag the Markdown names in a code span is a flag of one of
// tether's programs (the binder, the provisioner, kubectl-tether,
// tether-push, the release tool, the example driver, the test
// harnesses' programs), klog's, or one of foreignFlags.
func TestFlagNamesExist(t *testing.T) {
	r := root(t)
	known := knownFlags(t, r)
	for _, p := range markdownFiles(t, r) {
		for _, problem := range CheckFlagNames(p, read(t, filepath.Join(r, p)), known, foreignFlags) {
			t.Error(problem)
		}
	}
}
