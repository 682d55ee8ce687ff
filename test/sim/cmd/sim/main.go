// Command sim runs the deterministic simulator for many schedules (make
// sim SIM_SCHEDULES=N SIM_SEED=S): it prints the violations and trace of
// the first failing schedule, the first seed of each kind of violation,
// and last the line "sim: <N> schedules, <M> steps, <V> invariant
// violations" (it exits 0 either way, so that this line stays the last;
// make test's TestSim fails on a violation).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"

	"github.com/tether-csi/tether/test/sim"
)

func main() {
	schedules := flag.Int("schedules", 10000, "schedules to run")
	seed := flag.Int64("seed", 1, "seed of the first schedule")
	traces := flag.Int("traces", 1, "failing schedules whose trace is printed")
	without := flag.String("without", "", "actors to leave out, comma-separated (see sim.Disabled)")
	with := flag.String("with", "", "faults to add to the plan, comma-separated (see sim.With)")
	show := flag.Bool("show", false, "print the trace of the first schedule, failing or not, and stop")
	outcomes := flag.String("outcomes", "", "write each schedule's outcome line (sim.Outcome) to this file instead of the summary")
	flag.Parse()
	for _, a := range strings.Split(*without, ",") {
		if a != "" {
			sim.Disabled[a] = true
		}
	}
	for _, f := range strings.Split(*with, ",") {
		if f != "" {
			sim.With[f] = true
		}
	}
	if *show {
		fmt.Println(strings.Join(sim.RunSchedule(*seed).Trace, "\n"))
		return
	}
	if *outcomes != "" {
		writeOutcomes(*outcomes, *seed, *schedules)
		return
	}
	s := sim.Run(*seed, *schedules)
	for i, r := range s.Failed {
		fmt.Printf("seed %d: %d violations:\n  %s\n", r.Seed, len(r.Violations), strings.Join(r.Violations, "\n  "))
		if i < *traces {
			fmt.Printf("trace (make sim SIM_SEED=%d SIM_SCHEDULES=1):\n%s\n", r.Seed, strings.Join(r.Trace, "\n"))
		}
	}
	for _, k := range s.KindOrder {
		f := s.Kinds[k]
		fmt.Printf("kind %q: %d schedules, first at seed %d (schedule %d of the run)\n", k, f.Schedules, f.FirstSeed, f.FirstSeed-*seed+1)
	}
	for _, k := range sortedKeys(s.Counts) {
		fmt.Printf("count %q: %d in %d schedules\n", k, s.Counts[k], s.Reached[k])
	}
	fmt.Printf("sim: %d schedules, %d steps, %d invariant violations\n", *schedules, s.Steps, s.Violations)
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// writeOutcomes writes one outcome line per schedule, in seed order, and
// says so last.
func writeOutcomes(file string, first int64, n int) {
	f, err := os.Create(file)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriter(f)
	violations := 0
	for i := 0; i < n; i++ {
		r := sim.RunSchedule(first + int64(i))
		violations += len(r.Violations)
		fmt.Fprintln(w, sim.Outcome(r))
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("sim: outcomes of %d schedules from seed %d in %s, %d invariant violations\n", n, first, file, violations)
}
