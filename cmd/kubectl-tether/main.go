// Command kubectl-tether is a kubectl plugin (kubectl tether ...). Its one
// command, why, says why a PersistentVolumeClaim is in its state: the
// volumes the binder passes over and why, the provisioning path, and what
// to do. It only reads (get and list), and says what it could not read.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tether-csi/tether/internal/version"
	"github.com/tether-csi/tether/pkg/explain"
)

const usage = `Usage: kubectl tether why [-n NAMESPACE] [-o text|json] NAMESPACE/CLAIM | CLAIM
       kubectl tether version

Says why a PersistentVolumeClaim is in its state: for an unbound claim,
every volume of its class with the first reason tether's binder passes it
over, the best match, the provisioning path (provisioner, Leases, pods,
in-flight record, failures, capacity), and what to do. It only reads.

Flags:
`

// options are the command line.
type options struct {
	namespace, output, kubeconfig, context string
	timeout                                time.Duration
	claim                                  string
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "version" || args[0] == "--version") {
		fmt.Fprintln(stdout, "kubectl-tether", version.String())
		return nil
	}
	if len(args) == 0 || args[0] != "why" {
		fmt.Fprint(stderr, usage)
		return errors.New(`the commands are "why" and "version"`)
	}
	o, err := parse(args[1:], stderr)
	if err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-tether"
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	namespace, name, found := strings.Cut(o.claim, "/")
	if !found {
		name, namespace = o.claim, o.namespace
		if namespace == "" {
			if namespace, _, err = cc.Namespace(); err != nil || namespace == "" {
				namespace = "default"
			}
		}
	} else if o.namespace != "" && o.namespace != namespace {
		return fmt.Errorf("-n %s and %s name different namespaces", o.namespace, o.claim)
	}
	ctx, cancel := contextWithTimeout(o.timeout)
	defer cancel()
	in, err := read(ctx, reader{client: client}, namespace, name)
	if err != nil {
		return err
	}
	e := explain.Explain(in)
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	return printText(stdout, e, in.Now)
}

// parse reads the flags, which may come before or after the claim.
func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("kubectl tether why", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	for _, n := range []string{"n", "namespace"} {
		fs.StringVar(&o.namespace, n, "", "namespace of the claim (default: the kubeconfig context's)")
	}
	for _, n := range []string{"o", "output"} {
		fs.StringVar(&o.output, n, "text", "output format: text or json")
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context")
	fs.DurationVar(&o.timeout, "request-timeout", 30*time.Second, "time limit for all reads")
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return o, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 {
		fs.Usage()
		return o, errors.New("name one claim: NAMESPACE/CLAIM, or CLAIM with -n NAMESPACE")
	}
	if o.output != "text" && o.output != "json" {
		return o, fmt.Errorf("unknown output %q (text or json)", o.output)
	}
	o.claim = positional[0]
	return o, nil
}
