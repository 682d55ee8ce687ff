package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/tether-csi/tether/internal/cli"
)

// Issues 25 and 38: every bad setting, the flags' values and the
// environment they need, is found by checkOptions, before the provisioner
// waits for its driver.
func TestCheckOptions(t *testing.T) {
	pod := podEnv{nodeName: "node-1", namespace: "kube-system", podName: "csi-0"}
	for _, tc := range []struct {
		name string
		args []string
		env  podEnv
		want string // a fragment of the error; "" for none
	}{
		{"defaults", nil, podEnv{}, ""},
		{"no worker", []string{"--worker-threads=0"}, pod, "--worker-threads"},
		{"no timeout", []string{"--timeout=0s"}, pod, "--timeout must be positive"},
		{"no first retry interval", []string{"--retry-interval-start=0s"}, pod, "--retry-interval-start"},
		{"no longest retry interval", []string{"--retry-interval-max=0s"}, pod, "--retry-interval-max must be positive"},
		{"a longest retry shorter than the first (EP takes it: every retry waits the longest)", []string{"--retry-interval-start=10s", "--retry-interval-max=2s"}, pod, ""},
		{"a negative sweep interval", []string{"--orphan-sweep-interval=-1m"}, pod, "--orphan-sweep-interval"},
		{"no sweep", []string{"--orphan-sweep-interval=0s"}, pod, ""},
		{"a negative orphan age", []string{"--orphan-min-age=-1h"}, pod, "--orphan-min-age"},
		{"an unknown orphan policy", []string{"--orphan-policy=keep"}, pod, "--orphan-policy=keep"},
		{"no volume name prefix", []string{"--volume-name-prefix="}, pod, "--volume-name-prefix"},
		{"no CSI address", []string{"--csi-address=unix://"}, pod, "--csi-address"},
		{"no queries", []string{"--kube-api-qps=0"}, pod, "--kube-api-qps"},
		{"no burst with --master", []string{"--master=https://127.0.0.1:6443", "--kube-api-burst=0"}, pod, "--kube-api-burst"},
		{"an endpoint that is no host:port", []string{"--http-endpoint=8080"}, pod, "--http-endpoint"},
		{"metrics under /healthz", []string{"--http-endpoint=:8080", "--metrics-path=/healthz/m"}, pod, "/healthz"},
		{"metrics path without /", []string{"--metrics-path=m"}, pod, "must start with /"},
		{"metrics-address and http-endpoint", []string{"--metrics-address=:9000", "--http-endpoint=:8080"}, pod, "only one of"},
		{"secure metrics", []string{"--http-endpoint=:8443", "--metrics-secure"}, pod, ""},
		{"secure metrics on EP's address", []string{"--metrics-address=:8443", "--metrics-secure"}, pod, ""},
		{"secure metrics without an address", []string{"--metrics-secure"}, pod, "needs an address"},
		{"a key without its certificate", []string{"--http-endpoint=:8443", "--metrics-secure", "--tls-private-key-file=k"}, pod, "go together"},
		{"a certificate without secure metrics", []string{"--http-endpoint=:8080", "--tls-cert-file=c", "--tls-private-key-file=k"}, pod, "need --metrics-secure"},
		{"json logs", []string{"--logging-format=json"}, pod, ""},
		{"an unknown log format", []string{"--logging-format=xml"}, pod, "Unsupported log format"},
		{"no log flush", []string{"--log-flush-frequency=0s"}, pod, "flushFrequency"},
		{"vmodule with json", []string{"--logging-format=json", "--vmodule=main*=4"}, pod, "Only supported for text"},
		{"an alpha logging option (EP's LoggingAlphaOptions gate is off)", []string{"--log-text-split-stream"}, pod, "LoggingAlphaOptions"},
		{"a json alpha logging option", []string{"--logging-format=json", "--log-json-info-buffer-size=1Mi"}, pod, "LoggingAlphaOptions"},
		{"a lease label the API server refuses", []string{"--leader-election-labels=a:-x-"}, pod, "--leader-election-labels"},
		{"lease labels", []string{"--leader-election", "--leader-election-labels=a:b,example.com/c:d"}, pod, ""},
		{"negative capacity qps", []string{"--kube-api-capacity-qps=-1"}, pod, "must not be negative"},
		{"no cloning worker", []string{"--cloning-protection-threads=0"}, pod, "at least 1"},
		{"no node-loss grace", []string{"--node-loss-grace=0s"}, pod, "--node-loss-grace"},
		{"lease shorter than the renewal", []string{"--leader-election", "--leader-election-lease-duration=5s"}, pod, "lease duration"},
		{"lease timings unchecked without election", []string{"--leader-election-lease-duration=5s"}, pod, ""},
		{"no retry period", []string{"--leader-election", "--leader-election-retry-period=0s"}, pod, "retry period"},
		{"node mode without NODE_NAME", []string{"--node-deployment"}, podEnv{}, "NODE_NAME"},
		{"node mode with NODE_NAME", []string{"--node-deployment"}, podEnv{nodeName: "node-1"}, ""},
		{"node mode's delays", []string{"--node-deployment", "--node-deployment-max-delay=1s"}, pod, "--node-deployment-max-delay"},
		{"node mode's delays unchecked elsewhere", []string{"--node-deployment-base-delay=0s"}, podEnv{}, ""},
		{"capacity without NAMESPACE", []string{"--enable-capacity"}, podEnv{podName: "csi-0"}, "NAMESPACE"},
		{"capacity owner without POD_NAME", []string{"--enable-capacity"}, podEnv{namespace: "kube-system"}, "POD_NAME"},
		{"capacity without an owner", []string{"--enable-capacity", "--capacity-ownerref-level=-1"}, podEnv{namespace: "kube-system"}, ""},
		{"capacity never polled", []string{"--enable-capacity", "--capacity-poll-interval=0s"}, pod, "--capacity-poll-interval"},
		{"capacity without threads", []string{"--enable-capacity", "--capacity-threads=0"}, pod, "--capacity-threads"},
		{"capacity threads unused", []string{"--capacity-threads=0"}, pod, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOptions()
			if _, err := parseFlags(&o, tc.args, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
			o.env = tc.env
			err := checkOptions(o)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// Issue 38: --version prints only after every setting passed; a bad
// setting exits 2 whoever finds it; help is on stdout with status 0.
// Issue 51: a bad setting is one line, without the usage; --version names
// the program, whatever the file is called (EP's manifests name it
// csi-provisioner).
func TestBegin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		status int
		exit   bool
		stdout string // a fragment; "" for nothing
		stderr string
	}{
		{"version", []string{"--version"}, nil, 0, true, "provisioner ", ""},
		{"version after a bad policy", []string{"--orphan-policy=bogus", "--version"}, nil, cli.ExitBadSetting, true, "", "--orphan-policy=bogus"},
		{"version after no worker", []string{"--worker-threads=0", "--version"}, nil, cli.ExitBadSetting, true, "", "--worker-threads"},
		{"version in node mode without NODE_NAME", []string{"--node-deployment", "--version"}, nil, cli.ExitBadSetting, true, "", "NODE_NAME"},
		{"version in node mode", []string{"--node-deployment", "--version"}, map[string]string{"NODE_NAME": "n"}, 0, true, "provisioner ", ""},
		{"an unknown flag", []string{"--no-such-flag", "--version"}, nil, cli.ExitBadSetting, true, "", "provisioner: unknown flag --no-such-flag (provisioner --help lists the flags)\n"},
		{"a misspelt flag", []string{"--worker-thread=3"}, nil, cli.ExitBadSetting, true, "", "provisioner: unknown flag --worker-thread: did you mean --worker-threads? (provisioner --help lists the flags)\n"},
		{"a duration without a unit", []string{"--timeout=30"}, nil, cli.ExitBadSetting, true, "", "provisioner: invalid value \"30\" for flag --timeout: a duration needs a unit, e.g. 30s\n"},
		{"version after an unknown log format", []string{"--logging-format=xml", "--version"}, nil, cli.ExitBadSetting, true, "", "Unsupported log format"},
		{"version with json logs", []string{"--logging-format=json", "-v=5", "--version"}, nil, 0, true, "provisioner ", ""},
		{"a bad value", []string{"--worker-threads=x"}, nil, cli.ExitBadSetting, true, "", "provisioner: invalid value \"x\" for flag --worker-threads: a whole number, 0 or more\n"},
		{"an argument", []string{"--version", "x"}, nil, cli.ExitBadSetting, true, "", "unexpected argument"},
		{"-h", []string{"-h"}, nil, 0, true, "Usage: provisioner", ""},
		{"--help after a bad value", []string{"--worker-threads=0", "--help"}, nil, 0, true, "--orphan-policy", ""},
		{"runs", []string{"--worker-threads=3"}, nil, 0, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			o, _, status, exit := begin(append([]string{"/csi/csi-provisioner"}, tc.args...), func(k string) string { return tc.env[k] }, &stdout, &stderr)
			if status != tc.status || exit != tc.exit {
				t.Errorf("status %d, exit %v; want %d, %v\nstderr: %s", status, exit, tc.status, tc.exit, stderr.String())
			}
			for _, w := range []struct{ name, got, want string }{{"stdout", stdout.String(), tc.stdout}, {"stderr", stderr.String(), tc.stderr}} {
				if (w.want == "") != (w.got == "") || !strings.Contains(w.got, w.want) {
					t.Errorf("%s %q, want %q", w.name, w.got, w.want)
				}
			}
			if slices.Contains(tc.args, "--version") && status == 0 && !strings.HasPrefix(stdout.String(), tc.stdout) {
				t.Errorf("%q: stdout %q does not start with %q", tc.args, stdout.String(), tc.stdout)
			}
			if status == cli.ExitBadSetting && (strings.Count(stderr.String(), "\n") != 1 || !strings.HasPrefix(stderr.String(), "provisioner: ")) {
				t.Errorf("a bad setting in more than one line, or not the provisioner's: %q", stderr.String())
			}
			if tc.name == "runs" && o.workers != 3 {
				t.Errorf("workers %d", o.workers)
			}
		})
	}
}
