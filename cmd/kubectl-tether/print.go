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

// printText writes the explanation for a person.
func printText(out io.Writer, e explain.Explanation, now time.Time) error {
	w := &errWriter{w: out}
	w.printf("Claim %s: %s\n", e.Claim, e.State)
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
	if e.Binder != "" && e.Phase != "Bound" {
		w.printf("  the binder now: %s\n", e.Binder)
	}
	if len(e.Candidates) > 0 || len(e.VolumesOfOtherClasses) > 0 {
		w.printf("\nVolumes of class %q (the first reason the binder passes each over):\n", e.StorageClass)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for _, c := range e.Candidates {
			reason, msg := c.Reason, c.Message
			if c.Match {
				reason, msg = "match", "fits the claim"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Volume, c.Capacity, reason, msg)
		}
		_ = tw.Flush()
		if len(e.Candidates) == 0 {
			w.printf("  none\n")
		}
		if len(e.VolumesOfOtherClasses) > 0 {
			w.printf("  other classes: %s\n", countByClass(e.VolumesOfOtherClasses))
		}
	}
	switch {
	case e.BestMatch != "":
		w.printf("  best match: %s\n", e.BestMatch)
	case e.BestMatchOnceScheduled != "":
		w.printf("  best match once a node is selected: %s\n", e.BestMatchOnceScheduled)
	case len(e.Candidates) > 0:
		w.printf("  best match: none\n")
	}
	if p := e.Provisioning; p != nil {
		printProvisioning(w, p, now)
	}
	if c := e.Cause; c != nil {
		w.printf("\nWhy: %s: %s\n", c.Reason, c.Message)
		if c.Action != "" {
			w.printf("What to do: %s\n", c.Action)
		}
	}
	if len(e.Unreadable) > 0 {
		var gaps []string
		for _, g := range e.Unreadable {
			gaps = append(gaps, g.Resource+" ("+g.Error+")")
		}
		w.printf("\nCould not read: %s. The answer above is partial where it needed them.\n", strings.Join(gaps, ", "))
	}
	return w.err
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
	if len(p.DriverNodes) > 0 {
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
