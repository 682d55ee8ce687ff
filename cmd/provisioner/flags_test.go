package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tether-csi/tether/internal/doccheck"
	"github.com/tether-csi/tether/internal/flagdoc"
)

// Every flag but klog's is in the docs' flag table, with its default.
func TestDocsListEveryFlag(t *testing.T) {
	o := defaultOptions()
	flagdoc.CheckREADME(t, newFlagSet(&o), "../../docs/provisioner.md")
}

// Every flag of the provisioner the README and the docs name in prose
// (all but the other programs' pages) takes the value they give it, and
// has the default they say.
func TestDocsProseFlags(t *testing.T) {
	flagdoc.CheckProse(t, func() *flag.FlagSet {
		o := defaultOptions()
		return newFlagSet(&o)
	}, "../..", "docs/binder.md", "docs/why.md", "docs/release.md")
}

// epFlags is every flag external-provisioner v6.4.0 accepts, with a value
// in its syntax, derived from its source: cmd/csi-provisioner/csi-provisioner.go
// (its own flags and --feature-gates), csi-lib-utils v0.25.0 standardflags
// (RegisterCommonFlags, AddAutomaxprocs) and component-base v0.36.1
// logs/api/v1 addFlags (with the json format registered). `csi-provisioner
// --help` of the binary built from v6.4.0 lists the same 51 (v6.3.0's
// 51, unchanged).
var epFlags = []struct{ name, arg string }{
	// csi-provisioner.go
	{"master", "--master=https://127.0.0.1:6443"},
	{"volume-name-prefix", "--volume-name-prefix=vol"},
	{"volume-name-uuid-length", "--volume-name-uuid-length=16"},
	{"retry-interval-start", "--retry-interval-start=2s"},
	{"retry-interval-max", "--retry-interval-max=10m"},
	{"worker-threads", "--worker-threads=10"},
	{"cloning-protection-threads", "--cloning-protection-threads=3"},
	{"snapshot-orphan-sweep-interval", "--snapshot-orphan-sweep-interval=1m"},
	{"capacity-threads", "--capacity-threads=2"},
	{"timeout", "--timeout=30s"},
	{"strict-topology", "--strict-topology"},
	{"immediate-topology", "--immediate-topology=false"},
	{"extra-create-metadata", "--extra-create-metadata"},
	{"enable-pprof", "--enable-pprof"},
	{"default-fstype", "--default-fstype=ext4"},
	{"kube-api-capacity-qps", "--kube-api-capacity-qps=1"},
	{"kube-api-capacity-burst", "--kube-api-capacity-burst=5"},
	{"enable-capacity", "--enable-capacity"},
	{"capacity-for-immediate-binding", "--capacity-for-immediate-binding"},
	{"capacity-poll-interval", "--capacity-poll-interval=30s"},
	{"capacity-ownerref-level", "--capacity-ownerref-level=2"},
	{"node-deployment", "--node-deployment"},
	{"node-deployment-immediate-binding", "--node-deployment-immediate-binding=false"},
	{"node-deployment-base-delay", "--node-deployment-base-delay=10s"},
	{"node-deployment-max-delay", "--node-deployment-max-delay=2m"},
	{"controller-publish-readonly", "--controller-publish-readonly"},
	{"prevent-volume-mode-conversion", "--prevent-volume-mode-conversion=false"},
	{"feature-gates", "--feature-gates=Topology=true,CrossNamespaceVolumeDataSource=false"},
	// csi-lib-utils standardflags
	{"version", "--version"},
	{"kubeconfig", "--kubeconfig=/etc/kubeconfig"},
	{"csi-address", "--csi-address=/csi/csi.sock"},
	{"leader-election", "--leader-election"},
	{"leader-election-namespace", "--leader-election-namespace=kube-system"},
	{"leader-election-lease-duration", "--leader-election-lease-duration=20s"},
	{"leader-election-renew-deadline", "--leader-election-renew-deadline=15s"},
	{"leader-election-retry-period", "--leader-election-retry-period=3s"},
	{"leader-election-labels", "--leader-election-labels=app:csi,tier:storage"},
	{"kube-api-qps", "--kube-api-qps=50"},
	{"kube-api-burst", "--kube-api-burst=100"},
	{"http-endpoint", "--http-endpoint=:8080"},
	{"metrics-address", "--metrics-address=:8081"},
	{"metrics-path", "--metrics-path=/custom-metrics"},
	{"automaxprocs", "--automaxprocs"},
	// component-base logs/api/v1
	{"logging-format", "--logging-format=text"},
	{"log-flush-frequency", "--log-flush-frequency=10s"},
	{"v", "-v=5"},
	{"vmodule", "--vmodule=controller*=4"},
	// The alpha options, at values other than their defaults, are refused
	// by EP's ValidateAndApply (the LoggingAlphaOptions gate is off).
	{"log-text-split-stream", "--log-text-split-stream=false"},
	{"log-text-info-buffer-size", "--log-text-info-buffer-size=0"},
	{"log-json-split-stream", "--log-json-split-stream=false"},
	{"log-json-info-buffer-size", "--log-json-info-buffer-size=0"},
}

// quietParse parses and checks args in a pod's environment (NODE_NAME,
// NAMESPACE and POD_NAME set), as main does.
func quietParse(args []string) (options, *flag.FlagSet, error) {
	o := defaultOptions()
	fs, err := parseFlags(&o, args, io.Discard, io.Discard)
	if err != nil {
		return o, fs, err
	}
	o.env = podEnv{nodeName: "node-1", namespace: "kube-system", podName: "csi-0"}
	return o, fs, checkOptions(o)
}

func TestEveryEPFlagParses(t *testing.T) {
	if len(epFlags) != 51 {
		t.Fatalf("the list has %d flags; EP v6.4.0 has 51", len(epFlags))
	}
	for _, f := range epFlags {
		t.Run(f.name, func(t *testing.T) {
			if !strings.Contains(f.arg, f.name) {
				t.Fatalf("row %s: argument %q", f.name, f.arg)
			}
			o := defaultOptions()
			if newFlagSet(&o).Lookup(f.name) == nil {
				t.Errorf("--%s is not registered", f.name)
			}
			if _, _, err := quietParse([]string{f.arg}); err != nil {
				t.Errorf("%s: %v", f.arg, err)
			}
		})
	}
	// And all at once (but --metrics-address, which excludes --http-endpoint).
	var all []string
	for _, f := range epFlags {
		if f.name != "metrics-address" {
			all = append(all, f.arg)
		}
	}
	if _, _, err := quietParse(all); err != nil {
		t.Errorf("all EP flags together: %v", err)
	}
}

func TestCompatFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o options)
	}{
		{name: "defaults", check: func(t *testing.T, o options) {
			if o.compat.metricsPath != "/metrics" || o.compat.logging.Format != "text" || o.compat.cloningThreads != 2 || o.httpEndpoint != "" {
				t.Errorf("defaults %+v, endpoint %q", o.compat, o.httpEndpoint)
			}
		}},
		{name: "metrics-address is the http endpoint", args: []string{"--metrics-address=:9000"}, check: func(t *testing.T, o options) {
			if o.endpoint() != ":9000" {
				t.Errorf("endpoint %q", o.endpoint())
			}
		}},
		{name: "metrics-address and http-endpoint exclude each other", args: []string{"--metrics-address=:9000", "--http-endpoint=:8080"}, wantErr: "only one of"},
		{name: "metrics path", args: []string{"--metrics-path=/m"}, check: func(t *testing.T, o options) {
			if o.compat.metricsPath != "/m" {
				t.Errorf("path %q", o.compat.metricsPath)
			}
		}},
		{name: "metrics path must be absolute", args: []string{"--metrics-path=m"}, wantErr: "must start with /"},
		{name: "bad feature gate", args: []string{"--feature-gates=Topology=maybe"}, wantErr: "invalid value"},
		{name: "feature gate without value", args: []string{"--feature-gates=Topology"}, wantErr: "missing bool"},
		{name: "bad lease label", args: []string{"--leader-election-labels=a=b"}, wantErr: "malformed"},
		{name: "lease labels", args: []string{"--leader-election-labels=a:b,c:d"}, check: func(t *testing.T, o options) {
			if len(o.leader.Labels) != 2 || o.leader.Labels["a"] != "b" || o.leader.Labels["c"] != "d" {
				t.Errorf("labels %v", o.leader.Labels)
			}
		}},
		{name: "a lease label the API server refuses", args: []string{"--leader-election-labels=a:b c"}, wantErr: "labels"},
		{name: "automaxprocs=false", args: []string{"--automaxprocs=false"}},
		{name: "automaxprocs=nonsense", args: []string{"--automaxprocs=x"}, wantErr: "invalid"},
		{name: "a positional argument is refused, not a silent stop", args: []string{"--leader-election", "true", "--timeout=1s"}, wantErr: "unexpected argument"},
		{name: "capacity threads", args: []string{"--capacity-threads=4"}, check: func(t *testing.T, o options) {
			if o.capacityThreads != 4 {
				t.Errorf("capacity threads %d", o.capacityThreads)
			}
		}},
		{name: "capacity client limits", args: []string{"--kube-api-capacity-qps=1", "--kube-api-capacity-burst=5"}, check: func(t *testing.T, o options) {
			if o.compat.capacityQPS != 1 || o.compat.capacityBurst != 5 {
				t.Errorf("capacity %v %d", o.compat.capacityQPS, o.compat.capacityBurst)
			}
		}},
		{name: "controller-publish-readonly reaches the request options", args: []string{"--controller-publish-readonly"}, check: func(t *testing.T, o options) {
			if !o.request.ControllerPublishReadOnly {
				t.Error("ControllerPublishReadOnly not set")
			}
		}},
		{name: "zero cloning workers", args: []string{"--cloning-protection-threads=0"}, wantErr: "at least 1"},
		{name: "log flush", args: []string{"--log-flush-frequency=1s"}, check: func(t *testing.T, o options) {
			if o.compat.logging.FlushFrequency.Duration.Duration != time.Second {
				t.Errorf("flush %v", o.compat.logging.FlushFrequency)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, err := quietParse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, o)
			}
		})
	}
}

func TestGivenIgnored(t *testing.T) {
	_, fs, err := quietParse([]string{"--capacity-threads=2", "--feature-gates=Topology=true", "--timeout=5s", "--snapshot-orphan-sweep-interval=1m", "--prevent-volume-mode-conversion"})
	if err != nil {
		t.Fatal(err)
	}
	got := givenIgnored(fs)
	var names []string
	for _, g := range got {
		names = append(names, strings.Fields(g)[0])
	}
	want := []string{"--feature-gates", "--snapshot-orphan-sweep-interval"} // --capacity-threads is honoured
	if !reflect.DeepEqual(names, want) {
		t.Errorf("ignored %v, want %v", got, want)
	}
	// Every ignored flag is registered, so none is listed by mistake.
	o := defaultOptions()
	all := newFlagSet(&o)
	for name := range ignoredFlags {
		if all.Lookup(name) == nil {
			t.Errorf("ignored flag --%s is not registered", name)
		}
	}
}

func TestCapacityConfig(t *testing.T) {
	o, _, err := quietParse([]string{"--kubeconfig=x"})
	if err != nil {
		t.Fatal(err)
	}
	if o.compat.capacityConfig(nil) != nil {
		t.Error("no capacity limits should share the main client")
	}
}

// Every container of deploy/ and examples/ that runs the provisioner passes it
// args its own flag parser takes, and no stray argument.
func TestManifestArgsParse(t *testing.T) {
	containers, err := doccheck.ManifestContainers("../..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, cs := range containers {
		for _, c := range cs {
			if doccheck.ImageProgram(c.Image) != "provisioner" {
				continue
			}
			n++
			o := defaultOptions()
			fs := newFlagSet(&o)
			fs.SetOutput(io.Discard)
			err := fs.Parse(c.Args)
			if err == nil && fs.NArg() > 0 {
				err = fmt.Errorf("stray arguments %q", fs.Args())
			}
			if err != nil {
				t.Error(doccheck.ArgsProblem(path, c, err))
			}
		}
	}
	if n == 0 {
		t.Error("no container of deploy/ or examples/ runs the provisioner: the reading is broken")
	}
}
