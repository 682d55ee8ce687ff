package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/internal/version"
	"github.com/tether-csi/tether/pkg/handback"
)

// handBackUsageHead starts hand-back's usage, before its flags.
const handBackUsageHead = `kubectl tether hand-back: hand tether's in-flight records back, for the
switch back to external-provisioner and KCM's binder (docs/migration.md).

Usage:
  kubectl tether hand-back [flags] -n NAMESPACE deployment/NAME|daemonset/NAME|pod/NAME

It runs tether's provisioner with --hand-back in the driver's running pod,
as an ephemeral container beside its provisioner container (EP's, once the
image is switched back, or tether's), with that container's arguments,
environment and mounts: the driver's socket is there. In one pod of a
Deployment (controller mode), in every pod of a DaemonSet (node mode).
It needs patch on pods/ephemeralcontainers, and tether's provisioner image
on the nodes (or pullable).

Flags:
`

// handBackUsageTail ends hand-back's usage.
const handBackUsageTail = `
Exit status: 0 no claim holds the in-flight record; 3 claims still wait for
their volume: let EP and KCM's binder provision them, then run it again;
1 a run failed (its log is printed); 2 it could not run (bad arguments, no
running pod, no permission).
`

// handBackOptions are hand-back's command line.
type handBackOptions struct {
	namespace, container, image, target string
	timeout                             time.Duration
	config                              *genericclioptions.ConfigFlags
}

var releaseTag = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$`)

// handBackFlags registers hand-back's flags on o: its own, and kubectl's
// cluster flags (k8s.io/cli-runtime's ConfigFlags), -n among them.
func handBackFlags(o *handBackOptions) *pflag.FlagSet {
	cf := genericclioptions.NewConfigFlags(false)
	cf.CacheDir = nil
	o.config = cf
	fs := pflag.NewFlagSet("kubectl tether hand-back", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.container, "container", "csi-provisioner", "the pod's provisioner container")
	fs.StringVar(&o.image, "image", "", "tether's provisioner image (default ghcr.io/tether-csi/provisioner:<this plugin's version>)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to wait for each run to end")
	cf.AddFlags(fs)
	fs.BoolP("help", "h", false, "this help")
	return fs
}

func handBackUsage() string {
	var o handBackOptions
	return handBackUsageHead + handBackFlags(&o).FlagUsagesWrapped(100) + handBackUsageTail
}

func parseHandBack(args []string) (handBackOptions, error) {
	var o handBackOptions
	fs := handBackFlags(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if h, _ := fs.GetBool("help"); h {
		return o, pflag.ErrHelp
	}
	if fs.NArg() != 1 {
		return o, fmt.Errorf("give one target, deployment/NAME, daemonset/NAME or pod/NAME (got %q)", fs.Args())
	}
	o.target = fs.Arg(0)
	o.namespace = *o.config.Namespace
	if o.image == "" {
		v := version.String()
		if !releaseTag.MatchString(v) {
			return o, fmt.Errorf("this plugin's version %q is not a release: give tether's provisioner image with --image", v)
		}
		o.image = "ghcr.io/tether-csi/provisioner:" + v
	}
	if o.timeout <= 0 {
		return o, fmt.Errorf("--timeout %s: give a positive duration with a unit, e.g. 10m", o.timeout)
	}
	return o, nil
}

// runHandBack is kubectl tether hand-back; it returns the exit status.
func runHandBack(args []string, stdout, stderr io.Writer) int {
	o, err := parseHandBack(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprint(stdout, handBackUsage())
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n(kubectl tether hand-back --help for the usage)\n", err)
		return 2
	}
	loader := o.config.ToRawKubeConfigLoader()
	cfg, err := loader.ClientConfig()
	if err != nil {
		fmt.Fprintln(stderr, "error: kubeconfig:", err)
		return 2
	}
	cfg.UserAgent = "kubectl-tether"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	if o.namespace == "" {
		if o.namespace, _, err = loader.Namespace(); err != nil || o.namespace == "" {
			o.namespace = "default"
		}
	}
	return handBack(context.Background(), client, o, stdout, stderr)
}

// handBack runs the hand-back in each pod of the target, one after the
// other, and returns the exit status.
func handBack(ctx context.Context, client kubernetes.Interface, o handBackOptions, stdout, stderr io.Writer) int {
	pods, err := handback.Pods(ctx, client, o.namespace, o.target)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	failed, waiting := false, false
	for i := range pods {
		pod := &pods[i]
		ec, err := handback.Plan(pod, handback.PlanOptions{Container: o.container, Image: o.image})
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 2
		}
		fmt.Fprintf(stdout, "pod %s/%s: running %s (%s %s)\n", pod.Namespace, pod.Name, ec.Name, o.image, strings.Join(ec.Args, " "))
		res, err := handback.Run(ctx, client, pod, ec, handback.RunOptions{Timeout: o.timeout})
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 2
		}
		switch res.ExitCode {
		case 0:
			fmt.Fprintf(stdout, "pod %s/%s: done, no claim holds the in-flight record\n", pod.Namespace, pod.Name)
		case 3:
			fmt.Fprintf(stdout, "pod %s/%s: claims still wait for their volume; once EP and KCM's binder have provisioned them, run this again\n%s", pod.Namespace, pod.Name, lastLines(res.Log, 5))
			waiting = true
		default:
			fmt.Fprintf(stderr, "pod %s/%s: %s ended with status %d (%s); its log:\n%s", pod.Namespace, pod.Name, ec.Name, res.ExitCode, res.Reason, res.Log)
			failed = true
		}
	}
	switch {
	case failed:
		return 1
	case waiting:
		return 3
	}
	return 0
}

// lastLines is the last n lines of log.
func lastLines(log string, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "") + "\n"
}
