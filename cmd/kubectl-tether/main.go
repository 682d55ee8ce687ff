package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/spf13/pflag"

	"github.com/tether-csi/tether/internal/version"
	"github.com/tether-csi/tether/pkg/explain"
)

// usageHead starts the usage (usage), before the flags.
const usageHead = `kubectl tether: tether's kubectl plugin.

Usage:
  kubectl tether why [flags] NAMESPACE/CLAIM
  kubectl tether why [flags] -n NAMESPACE CLAIM
  kubectl tether why --all-pending [-n NAMESPACE | -A] [flags]
  kubectl tether why -A [flags]
  kubectl tether hand-back [flags] -n NAMESPACE deployment/NAME|daemonset/NAME
  kubectl tether version

why says why a PersistentVolumeClaim is in its state. For a claim that is
not bound it prints first the cause and what to do, and which binder runs
(from the binders' Leases); then the volumes of the claim's class counted by
the first reason the binder passes them over, the nearest few, and the
provisioning path (provisioner, Leases, pods, in-flight record, failures,
capacity). It only reads, and names what it could not read.

`

// usageTail ends the usage, after the flags.
const usageTail = `
Exit status of why: 0 the claim is Bound (with --all-pending: no claim
waits); 1 it is not, and the cause is printed (with --all-pending: some
claim waits); 2 it could not tell: bad arguments, the claim could not be
read, or the cause is CannotTell.
`

// options are the command line.
type options struct {
	namespace, output, binderLease string
	// timeout is --request-timeout: 0 for no limit.
	timeout time.Duration
	// allNamespaces is -A: the table of every namespace.
	allNamespaces           bool
	allPending, showVolumes bool
	claim                   string
	// flags are the flags parsed, the cluster flags among them.
	flags whyFlags
}

// Output formats of -o: text for a person, json and yaml of the same
// structs (explain.Explanation for one claim, pendingReport for the table).
const (
	outputText = "text"
	outputJSON = "json"
	outputYAML = "yaml"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the plugin; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return explain.ExitCannotTell
	}
	switch args[0] {
	case "version", "--version", "-version":
		if len(args) == 2 && (args[1] == "-h" || args[1] == "--help" || args[1] == "-help") {
			fmt.Fprint(stdout, usage())
			return 0
		}
		if len(args) > 1 {
			fmt.Fprintln(stderr, "error: version takes no arguments")
			return explain.ExitCannotTell
		}
		fmt.Fprintln(stdout, "kubectl-tether", version.String())
		return 0
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage())
		return 0
	case "hand-back":
		return runHandBack(args[1:], stdout, stderr)
	case "why":
	default:
		fmt.Fprintf(stderr, "error: unknown command %q: the commands are why, hand-back and version\n\n%s", args[0], usage())
		return explain.ExitCannotTell
	}
	o, err := parse(args[1:])
	if isHelp(err) {
		fmt.Fprint(stdout, usage())
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n(kubectl tether why --help for the usage)\n", err)
		return explain.ExitCannotTell
	}
	cfg, contextNS, err := o.flags.restConfig()
	if err != nil {
		fmt.Fprintln(stderr, "error: kubeconfig:", err)
		return explain.ExitCannotTell
	}
	cfg.UserAgent = "kubectl-tether"
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return explain.ExitCannotTell
	}
	ctx, cancel := context.WithCancel(context.Background())
	if o.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
	}
	defer cancel()
	return execute(ctx, client, o, contextNS, stdout, stderr)
}

// execute reads, explains and prints; it returns the exit status.
func execute(ctx context.Context, client kubernetes.Interface, o options, contextNS string, stdout, stderr io.Writer) int {
	r := &reader{client: client, binderLease: o.binderLease}
	if o.allPending {
		namespace := "" // every namespace
		if !o.allNamespaces {
			namespace = cmp.Or(o.namespace, contextNS)
		}
		rep, err := readPending(ctx, r, namespace, contextNS)
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return explain.ExitCannotTell
		}
		if err := output(stdout, o.output, rep, func(w io.Writer) error { return printPending(w, rep, time.Now()) }); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return explain.ExitCannotTell
		}
		return explain.ExitCodeRows(rep.Claims)
	}
	namespace, name, found := strings.Cut(o.claim, "/")
	if !found {
		name, namespace = o.claim, o.namespace
		if namespace == "" {
			namespace = contextNS
		}
	}
	in, err := read(ctx, r, namespace, name)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return explain.ExitCannotTell
	}
	e := explain.Explain(in)
	if err := output(stdout, o.output, e, func(w io.Writer) error { return printText(w, e, in.Now, o.showVolumes) }); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return explain.ExitCannotTell
	}
	return explain.ExitCode(e)
}

// output writes v as format: text by the given function, json and yaml by
// v's json tags (the YAML has the JSON's field names).
func output(w io.Writer, format string, v any, text func(io.Writer) error) error {
	switch format {
	case outputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return text(w)
}

// parse reads the flags of why, which may come before or after the claim.
// It returns pflag.ErrHelp for -h and --help.
func parse(args []string) (options, error) {
	var o options
	o.flags = newWhyFlags(&o)
	fs := o.flags.all
	fs.SetOutput(io.Discard)
	fs.SetInterspersed(true)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if help, _ := fs.GetBool("help"); help {
		return o, pflag.ErrHelp
	}
	positional := fs.Args()
	o.namespace = o.flags.takeNamespace()
	timeout, err := o.flags.timeout()
	if err != nil {
		return o, err
	}
	o.timeout = timeout
	if o.allNamespaces && len(positional) == 0 {
		o.allPending = true // -A alone: the table of every namespace
	}
	switch {
	case o.allNamespaces && len(positional) > 0:
		return o, fmt.Errorf("-A (all namespaces) takes no claim (got %s): name it NAMESPACE/CLAIM, or use -A for the table of every claim that waits", strings.Join(positional, " "))
	case o.allNamespaces && o.namespace != "":
		return o, fmt.Errorf("-A (all namespaces) and -n %s name different scopes: --all-pending -n %s for the claims that wait in one namespace", o.namespace, o.namespace)
	case o.allPending && len(positional) > 0:
		return o, fmt.Errorf("--all-pending takes no claim (got %s): it lists every claim that waits", strings.Join(positional, " "))
	case o.allPending && o.showVolumes:
		return o, errors.New("--show-volumes is for one claim, not --all-pending")
	case !o.allPending && len(positional) != 1:
		return o, errors.New("name one claim: NAMESPACE/CLAIM, or CLAIM with -n NAMESPACE; or --all-pending (-A for every namespace) for every claim that waits")
	case o.output != outputText && o.output != outputJSON && o.output != outputYAML:
		return o, fmt.Errorf("unknown output %q (text, json or yaml)", o.output)
	case o.binderLease == "" || strings.Count(o.binderLease, "/") > 1:
		return o, fmt.Errorf("--binder-lease %q: want NAME or NAMESPACE/NAME", o.binderLease)
	}
	if !o.allPending {
		o.claim = positional[0]
		ns, name, found := strings.Cut(o.claim, "/")
		switch {
		case found && (ns == "" || name == ""):
			return o, fmt.Errorf("claim %q: want NAMESPACE/CLAIM", o.claim)
		case found && o.namespace != "" && o.namespace != ns:
			return o, fmt.Errorf("-n %s and %s name different namespaces", o.namespace, o.claim)
		}
	}
	return o, nil
}
