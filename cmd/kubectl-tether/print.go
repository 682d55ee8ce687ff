package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tether-csi/tether/pkg/explain"
)

// driverNodesShown is how many of the driver's nodes the text names.
const driverNodesShown = 10

// printText writes the explanation for a person: the state, the cause and
// what to do first, which binder runs; then the volumes counted by reason,
// the nearest few (every one with showVolumes), and the provisioning path.
func printText(out io.Writer, e explain.Explanation, now time.Time, showVolumes bool) error {
	w := &errWriter{w: out}
	w.printf("Claim %s: %s\n", e.Claim, e.State)
	if c := e.Cause; c != nil {
		w.printf("Why: %s: %s\n", c.Reason, c.Message)
		if c.Action != "" {
			w.printf("What to do: %s\n", c.Action)
		}
	}
	kcm := printBinder(w, e.BinderRunning)
	if a := e.AnotherBinder; a != nil {
		w.printf("  another binder: %s (%d time(s), last %s ago)\n", a.Message, a.Count, now.Sub(a.Last).Round(time.Second))
	}
	if e.StorageClass != "" || e.Request != "" {
		class := e.StorageClass
		if class == "" {
			class = `""`
		}
		w.printf("  class %s, request %s, %s, %s\n", class, e.Request, strings.Join(e.AccessModes, ","), e.VolumeMode)
	}
	for _, h := range e.Finalizers {
		w.printf("  held by %s: %s\n", h.Finalizer, h.Why)
	}
	printNodeLoss(w, e.NodeLoss)
	if e.Binder != "" && e.Phase != "Bound" {
		if kcm {
			w.printf("  the binder now (tether's reading of KCM's rules): %s\n", e.Binder)
		} else {
			w.printf("  the binder now: %s\n", e.Binder)
		}
	}
	printVolumes(w, e, showVolumes)
	if p := e.Provisioning; p != nil {
		printProvisioning(w, p, now)
	}
	printGaps(w, e.Unreadable)
	return w.err
}

// printBinder writes which binder runs; true when it is KCM's.
func printBinder(w *errWriter, s *explain.BinderStatus) bool {
	if s == nil {
		return false
	}
	switch s.Running {
	case explain.BinderTether:
		w.printf("Binder: tether's: %s\n", s.Evidence)
	case explain.BinderKCM:
		w.printf("Binder: kube-controller-manager's: %s\n", s.Evidence)
	case explain.BinderNone:
		w.printf("Binder: none leads: %s\n", s.Evidence)
	default:
		w.printf("Binder: cannot tell: %s\n", s.Evidence)
	}
	if s.Note != "" {
		w.printf("  note: %s\n", s.Note)
	}
	return s.Running == explain.BinderKCM
}

func printVolumes(w *errWriter, e explain.Explanation, all bool) {
	if len(e.Candidates) == 0 && len(e.VolumesOfOtherClasses) == 0 {
		return
	}
	if len(e.Candidates) == 0 {
		w.printf("\nVolumes of class %q: none\n", e.StorageClass)
	} else {
		w.printf("\nVolumes of class %q: %d: %s\n", e.StorageClass, len(e.Candidates), explain.CountsText(e.ReasonCounts))
	}
	list, title := e.BestCandidates, "nearest (the first reason the binder passes each over):"
	if all {
		list, title = e.Candidates, "every one (the first reason the binder passes each over):"
	}
	if len(list) > 0 {
		w.printf("  %s\n", title)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for _, c := range list {
			reason, msg := c.Reason, c.Message
			if c.Match {
				reason, msg = "match", "fits the claim"
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\n", c.Volume, c.Capacity, reason, msg)
		}
		_ = tw.Flush()
	} else if len(e.Candidates) > 0 {
		w.printf("  none is free: every one is claimed by another claim\n")
	}
	switch {
	case e.BestMatch != "":
		w.printf("  best match: %s\n", e.BestMatch)
	case e.BestMatchOnceScheduled != "":
		w.printf("  best match once a node is selected: %s\n", e.BestMatchOnceScheduled)
	case len(e.Candidates) > 0:
		w.printf("  best match: none\n")
	}
	if len(e.VolumesOfOtherClasses) > 0 {
		w.printf("  other classes: %s\n", countByClass(e.VolumesOfOtherClasses))
	}
	if !all && len(e.Candidates) > len(list) {
		w.printf("  (--show-volumes lists all %d)\n", len(e.Candidates))
	}
}

func printGaps(w *errWriter, gaps []explain.Gap) {
	if len(gaps) == 0 {
		return
	}
	var s []string
	for _, g := range gaps {
		s = append(s, g.Resource+" ("+g.Error+")")
	}
	w.printf("\nCould not read: %s. The answer above is partial where it needed them.\n", strings.Join(s, ", "))
}

// messageWidth is where the --all-pending table cuts a cause's message.
const messageWidth = 110

// printPending writes the --all-pending table.
func printPending(out io.Writer, rep pendingReport, now time.Time) error {
	w := &errWriter{w: out}
	for _, n := range rep.Notes {
		w.printf("Note: %s\n", n)
	}
	if len(rep.Claims) == 0 {
		w.printf("No claim waits (%s): every one is Bound.\n", rep.Scope)
	} else {
		w.printf("%s (%s).\n", explain.RowsSummary(rep.Claims), rep.Scope)
	}
	printBinder(w, rep.BinderRunning)
	if len(rep.Claims) > 0 {
		w.printf("\n")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "NAMESPACE\tCLAIM\tCLASS\tAGE\tCAUSE\tMESSAGE\n")
		for _, r := range rep.Claims {
			age, reason, msg := "-", "-", ""
			if r.Since != nil {
				age = shortAge(now.Sub(*r.Since))
			}
			if r.Cause != nil {
				reason, msg = r.Cause.Reason, r.Cause.Message
			}
			if r.Phase != "Pending" {
				reason = r.Phase + ": " + reason
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Namespace, r.Name, orDash(r.Class), age, reason, cut(msg, messageWidth))
		}
		_ = tw.Flush()
		w.printf("\nkubectl tether why NAMESPACE/CLAIM says what to do about one.\n")
	}
	printGaps(w, rep.Unreadable)
	return w.err
}

// shortAge is an age as kubectl prints it: 45s, 12m, 3h, 5d.
func shortAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// cut shortens s to n runes, marking the cut.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func printProvisioning(w *errWriter, p *explain.Provisioning, now time.Time) {
	w.printf("\nProvisioning by %q:\n", p.Provisioner)
	w.printf("  handed to it by the binder (storage-provisioner annotation): %s\n", yesNo(p.Annotated))
	w.printf("  provisioner running: %s: %s\n", p.ProvisionerRunning, p.Evidence)
	for _, l := range p.Leases {
		node := ""
		if l.Node != "" {
			node = " (node " + l.Node + ")"
		}
		w.printf("    lease %s/%s%s: holder %q, held %s\n", l.Namespace, l.Name, node, l.Holder, yesNo(l.Held))
	}
	if n := len(p.DriverNodes); n > driverNodesShown {
		w.printf("  driver registered on %d nodes: %s, …\n", n, strings.Join(p.DriverNodes[:driverNodesShown], ", "))
	} else if n > 0 {
		w.printf("  driver registered on nodes: %s\n", strings.Join(p.DriverNodes, ", "))
	}
	if p.WaitForFirstConsumer {
		sel := p.SelectedNode
		if sel == "" {
			sel = "none yet"
		}
		w.printf("  WaitForFirstConsumer: selected node %s\n", sel)
		if len(p.Pods) == 0 {
			w.printf("  pods using the claim: none\n")
		}
	}
	for _, pod := range p.Pods {
		if pod.Scheduled {
			w.printf("  pod %s: scheduled to %s\n", pod.Name, pod.Node)
		} else {
			w.printf("  pod %s: not scheduled: %s\n", pod.Name, cmp.Or(pod.Scheduler, "no word from the scheduler yet"))
		}
	}
	if p.NodeProvisioner != "" {
		w.printf("  provisioner on node %s: %s\n", p.SelectedNode, p.NodeProvisioner)
	}
	if f := p.InFlight; f != nil {
		since := ""
		if f.Since != nil {
			since = ", first attempt " + now.Sub(*f.Since).Round(time.Second).String() + " ago"
		}
		w.printf("  in-flight record: volume %q of driver %q%s\n", f.Volume, f.Driver, since)
	} else {
		w.printf("  in-flight record: none\n")
	}
	if f := p.LastFailure; f != nil {
		w.printf("  last ProvisioningFailed: %s\n  retry: %s\n", f.Message, f.Retry)
	}
	if len(p.Capacity) > 0 {
		w.printf("  capacity of the class (CSIStorageCapacity):\n")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for _, c := range p.Capacity {
			enough := "enough"
			if !c.Enough {
				enough = "too little"
			}
			mark := ""
			if c.SelectedNode {
				mark = "  (selected node)"
			}
			max := ""
			if c.MaximumVolumeSize != "" {
				max = ", max volume " + c.MaximumVolumeSize
			}
			fmt.Fprintf(tw, "    %s\t%s%s\t%s%s\n", c.Segment, orDash(c.Capacity), max, enough, mark)
		}
		_ = tw.Flush()
	}
	if n := len(p.Events); n > 0 {
		w.printf("  recent events on the claim:\n")
		for _, ev := range p.Events[max(0, n-5):] {
			w.printf("    %s %s (%s, x%d, %s ago): %s\n", ev.Type, ev.Reason, ev.From, ev.Count,
				now.Sub(ev.Last).Round(time.Second), ev.Message)
		}
	}
}

func countByClass(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		name := k
		if name == "" {
			name = `""`
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", name, m[k]))
	}
	return strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }

// printNodeLoss writes the binder's release for node loss, if any.
func printNodeLoss(w *errWriter, n *explain.NodeLoss) {
	if n == nil {
		return
	}
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	who := "this claim"
	if n.EarlierClaim != "" {
		who = "the earlier claim of this name (uid " + n.EarlierClaim + ")"
	}
	w.printf("  node loss: node %s lost since %s; %s released at %s (release after %s); PV %s, reclaim policy %s\n",
		n.Node, at(n.Since), who, at(n.ReleasedAt), at(n.ReleaseAfter), n.Volume, n.Reclaim)
}
