package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/tether-csi/tether/internal/cli"
	"github.com/tether-csi/tether/internal/version"

	tcsi "github.com/tether-csi/tether/pkg/csi"
	"github.com/tether-csi/tether/pkg/provisioner/sweep"
	"github.com/tether-csi/tether/pkg/server"
)

// begin is main's start: it parses args (the program's name first) and
// checks every setting (checkOptions, with getenv's environment). exit is
// true when the process ends here, with status: 0 after the help (on
// stdout) or the version; cli.ExitBadSetting after a bad setting, said on
// stderr. --version prints only once every setting passed.
func begin(args []string, getenv func(string) string, stdout, stderr io.Writer) (o options, fs *flag.FlagSet, status int, exit bool) {
	o = defaultOptions()
	fs, err := parseFlags(&o, args[1:], stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return o, fs, 0, true
	}
	if err == nil {
		o.env = readEnv(getenv)
		if o.nodeDeployment {
			o.node.NodeName = o.env.nodeName
		}
		err = checkOptions(o)
	}
	if err != nil {
		fmt.Fprintln(stderr, "provisioner:", err)
		return o, fs, cli.ExitBadSetting, true
	}
	if o.compat.showVersion {
		fmt.Fprintln(stdout, "provisioner", version.String())
		return o, fs, 0, true
	}
	return o, fs, 0, false
}

// podEnv is what the flags read from the pod's environment (the downward
// API): NODE_NAME for --node-deployment, NAMESPACE and POD_NAME for
// --enable-capacity.
type podEnv struct {
	nodeName, namespace, podName string
}

// readEnv reads podEnv with getenv (os.Getenv).
func readEnv(getenv func(string) string) podEnv {
	return podEnv{nodeName: getenv("NODE_NAME"), namespace: getenv("NAMESPACE"), podName: getenv("POD_NAME")}
}

// checkOptions checks every setting, the flags and the environment they
// need, before --version prints and before the provisioner reads a
// kubeconfig or waits for its driver: whatever it returns is a bad setting
// (exit status 2). What only the cluster or the driver can say (a
// kubeconfig that does not load, a socket that never appears) is left to
// run.
func checkOptions(o options) error {
	c := o.compat
	if err := checkLogging(c.logging); err != nil {
		return err
	}
	switch {
	case c.metricsAddress != "" && o.httpEndpoint != "":
		return fmt.Errorf("only one of --metrics-address and --http-endpoint can be set")
	case len(c.metricsPath) == 0 || c.metricsPath[0] != '/':
		return fmt.Errorf("--metrics-path=%s: must start with /", c.metricsPath)
	case c.capacityQPS < 0 || c.capacityBurst < 0:
		return fmt.Errorf("--kube-api-capacity-qps and --kube-api-capacity-burst must not be negative")
	case c.cloningThreads == 0:
		return fmt.Errorf("--cloning-protection-threads must be at least 1")
	case o.nodeLossGrace <= 0:
		return fmt.Errorf("--node-loss-grace must be positive, got %s", o.nodeLossGrace)
	case o.workers == 0:
		return fmt.Errorf("--worker-threads must be at least 1")
	case o.timeout <= 0:
		return fmt.Errorf("--timeout must be positive, got %s", o.timeout)
	case o.retryStart <= 0 || o.retryMax <= 0:
		return fmt.Errorf("--retry-interval-start and --retry-interval-max must be positive, got %s and %s", o.retryStart, o.retryMax)
	case o.orphans.Interval < 0:
		return fmt.Errorf("--orphan-sweep-interval must not be negative (0 turns the sweep off), got %s", o.orphans.Interval)
	case o.orphans.MinAge < 0:
		return fmt.Errorf("--orphan-min-age must not be negative, got %s", o.orphans.MinAge)
	case o.orphans.Policy != sweep.Report && o.orphans.Policy != sweep.Delete:
		return fmt.Errorf("--orphan-policy=%s: must be report or delete", o.orphans.Policy)
	case o.request.VolumeNamePrefix == "":
		return fmt.Errorf("--volume-name-prefix must not be empty")
	}
	if err := tcsi.CheckAddress(o.csiAddress); err != nil {
		return fmt.Errorf("--csi-address: %w", err)
	}
	if err := o.kube.Validate(); err != nil {
		return err
	}
	if err := (server.HTTPOptions{Addr: o.endpoint(), MetricsPath: c.metricsPath, Secure: o.secure}).Validate(); err != nil {
		return err
	}
	if err := o.leader.Labels.Check(); err != nil {
		return fmt.Errorf("--leader-election-labels: %w", err)
	}
	if o.leader.Enabled {
		// The Lease's name comes from the driver's, later.
		if err := o.leader.CheckTimings(); err != nil {
			return fmt.Errorf("--leader-election: %w", err)
		}
	}
	if o.nodeDeployment {
		if o.env.nodeName == "" {
			return fmt.Errorf("--node-deployment needs this node's name in the NODE_NAME environment variable (the downward API's spec.nodeName)")
		}
		if o.node.BaseDelay <= 0 || o.node.MaxDelay < o.node.BaseDelay {
			return fmt.Errorf("--node-deployment-base-delay must be positive and --node-deployment-max-delay no smaller, got %s and %s", o.node.BaseDelay, o.node.MaxDelay)
		}
	}
	if o.capacity {
		if o.env.namespace == "" {
			return fmt.Errorf("--enable-capacity needs the pod's namespace in the NAMESPACE environment variable")
		}
		if o.capacityOwnerLevel >= 0 && o.env.podName == "" {
			return fmt.Errorf("--enable-capacity needs the pod's name in the POD_NAME environment variable (or --capacity-ownerref-level=-1)")
		}
		if o.capacityPoll <= 0 {
			return fmt.Errorf("--capacity-poll-interval must be positive, got %s", o.capacityPoll)
		}
		if o.capacityThreads == 0 {
			return fmt.Errorf("--capacity-threads must be at least 1")
		}
	}
	return nil
}
