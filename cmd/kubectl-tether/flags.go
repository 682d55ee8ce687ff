package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tether-csi/tether/pkg/explain"
)

// defaultTimeout is --request-timeout's default: each read's limit and
// the limit of all of them together.
const defaultTimeout = "30s"

// whyFlags are the flags of why: its own, and the cluster flags kubectl
// takes (k8s.io/cli-runtime's ConfigFlags: --kubeconfig, --context,
// --server, --token, --as, --request-timeout, ...), -n among them.
type whyFlags struct {
	// own are why's own flags and -n; cluster the rest of kubectl's. All
	// holds both, for parsing; the two halves are for the usage.
	own, cluster, all *pflag.FlagSet
	config            *genericclioptions.ConfigFlags
}

// newWhyFlags registers every flag of why on o.
func newWhyFlags(o *options) whyFlags {
	cf := genericclioptions.NewConfigFlags(false)
	cf.CacheDir = nil // no discovery: nothing is cached
	cf.Timeout = ptr(defaultTimeout)
	cluster := pflag.NewFlagSet("cluster", pflag.ContinueOnError)
	cf.AddFlags(cluster)
	cluster.Lookup("request-timeout").Usage = "time limit of each read and of all of them together, as a duration (1s, 2m) or whole seconds; 0 for none"

	own := pflag.NewFlagSet("why", pflag.ContinueOnError)
	ns := cluster.Lookup("namespace")
	ns.Usage = "namespace of the claim, or of --all-pending's table (default: the kubeconfig context's)"
	own.AddFlag(ns)
	own.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "every namespace, as in kubectl: --all-pending's table of all namespaces (-A alone implies --all-pending); not with -n or a claim")
	own.BoolVar(&o.allPending, "all-pending", false, "a table of every claim that is not Bound, with its cause: in -n's namespace, or with -A in every one")
	own.BoolVar(&o.showVolumes, "show-volumes", false, "list every volume of the claim's class, not the nearest few")
	own.StringVarP(&o.output, "output", "o", outputText, "`FORMAT` of the output: text, json or yaml")
	own.StringVar(&o.binderLease, "binder-lease", explain.BinderLeaseName, "tether's binder Lease: NAME in any namespace, or NAMESPACE/NAME")

	shown := pflag.NewFlagSet("cluster", pflag.ContinueOnError)
	cluster.VisitAll(func(f *pflag.Flag) {
		if f.Name != ns.Name {
			shown.AddFlag(f)
		}
	})
	all := pflag.NewFlagSet("kubectl tether why", pflag.ContinueOnError)
	all.AddFlagSet(own)
	all.AddFlagSet(shown)
	all.BoolP("help", "h", false, "this help")
	own.AddFlag(all.Lookup("help"))
	return whyFlags{own: own, cluster: shown, all: all, config: cf}
}

// takeNamespace moves -n's value out of the cluster flags: the claim's
// namespace is checked by parse, and the context's is still needed.
func (w whyFlags) takeNamespace() string {
	ns := *w.config.Namespace
	*w.config.Namespace = ""
	return ns
}

// timeout is --request-timeout, read as kubectl reads it; 0 is no limit.
func (w whyFlags) timeout() (time.Duration, error) {
	d, err := clientcmd.ParseTimeout(*w.config.Timeout)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("--request-timeout %q: want a duration with a unit (30s, 2m) or whole seconds, 0 for none", *w.config.Timeout)
	}
	return d, nil
}

// restConfig is the client configuration the cluster flags give (from the
// kubeconfig they name, or $KUBECONFIG, or ~/.kube/config, or the pod's
// service account, with their overrides) and the namespace of its context
// ("default" if none). It is called after takeNamespace.
func (w whyFlags) restConfig() (*rest.Config, string, error) {
	loader := w.config.ToRawKubeConfigLoader()
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := loader.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return cfg, ns, nil
}

// usage is the help of every command, with why's flags as parsed.
func usage() string {
	var o options
	w := newWhyFlags(&o)
	var b strings.Builder
	b.WriteString(usageHead)
	b.WriteString("Flags of why:\n")
	b.WriteString(w.own.FlagUsagesWrapped(100))
	b.WriteString("\nCluster flags, as kubectl's:\n")
	b.WriteString(w.cluster.FlagUsagesWrapped(100))
	b.WriteString(usageTail)
	return b.String()
}

// isHelp is whether err is help asked for.
func isHelp(err error) bool { return errors.Is(err, pflag.ErrHelp) }
