package flagdoc

import (
	"flag"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// testFlags has a flag of each kind the commands use, with defaults like
// theirs.
func testFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	klog.InitFlags(fs)
	fs.String("kubeconfig", "", "")
	fs.String("csi-address", "/run/csi/socket", "")
	fs.String("orphan-policy", "report", "")
	fs.Int("workers", 100, "")
	fs.Int("uuid-length", -1, "")
	fs.Float64("kube-api-qps", 1000, "")
	fs.Int("kube-api-burst", 2000, "")
	fs.Duration("max-delay", time.Minute, "")
	fs.Duration("min-age", time.Hour, "")
	fs.Bool("leader-elect", true, "")
	fs.Bool("enable-pprof", false, "")
	fs.BoolFunc("automaxprocs", "", func(string) error { return nil })
	return fs
}

const goodDoc = "# x\n\n" +
	"| flag | default | meaning |\n" +
	"|---|---|---|\n" +
	"| `--kubeconfig` | in-cluster | kubeconfig file, a, b |\n" +
	"| `--csi-address` | `/run/csi/socket` | the socket |\n" +
	"| `--orphan-policy` | `report` | `report`, or `delete` |\n" +
	"| `--workers`, `--uuid-length` | 100, -1 | workers |\n" +
	"| `--kube-api-qps`, `--kube-api-burst` | 1000, 2000 | limits |\n" +
	"| `--max-delay`, `--min-age` | 1m, 1h0m0s | delays |\n" +
	"| `--leader-elect`, `--enable-pprof`, `--automaxprocs` | true, false, false | switches |\n" +
	"| klog flags (`-v`, `--vmodule`) | | logging |\n"

func TestCheck(t *testing.T) {
	if p := Check(testFlags(), goodDoc); len(p) != 0 {
		t.Fatalf("the good document: %q", p)
	}
	for _, tc := range []struct {
		name, old, new string
		want           string // in a problem
	}{
		{"a changed number", "| 100, -1 |", "| 16, -1 |", "--workers: documented default 16 is another number"},
		{"a changed negative number", "| 100, -1 |", "| 100, 0 |", "--uuid-length"},
		{"a changed duration", "| 1m, 1h0m0s |", "| 2m, 1h0m0s |", "--max-delay: documented default 2m is another duration"},
		{"a changed bool", "| true, false, false |", "| false, false, false |", "--leader-elect"},
		{"BoolFunc is false", "| true, false, false |", "| true, false, true |", "--automaxprocs"},
		{"a changed string", "`report` | `report`, or", "`delete` | `report`, or", "--orphan-policy: documented default `delete` differs"},
		{"a string default in words", "`report` | `report`, or", "report | `report`, or", "--orphan-policy: documented default report is in words"},
		{"words for a value of its own", "| `/run/csi/socket` |", "| off |", "--csi-address: documented default off is in words"},
		{"a value for an empty default", "| in-cluster |", "| `~/.kube/config` |", "--kubeconfig"},
		{"a default missing", "| 100, -1 |", "| 100 |", "2 flags (workers, uuid-length) but 1 defaults"},
		{"a default cell empty", "| 1000, 2000 |", "| |", "2 flags (kube-api-qps, kube-api-burst) but 0 defaults"},
		{"a flag in no row", "| `--max-delay`, `--min-age` | 1m, 1h0m0s |", "| `--max-delay` | 1m |", "--min-age is in no row"},
		{"a flag that is not one", "`--workers`, `--uuid-length`", "`--worker`, `--uuid-length`", "--worker is documented but is not a flag"},
		{"a flag in two rows", "| `--csi-address` |", "| `--csi-address`, `--workers` |", "--workers is already in the row"},
		{"a non-duration for a duration", "| 1m, 1h0m0s |", "| `1m`, 1h0m0s |", "--max-delay: documented default `1m` differs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(goodDoc, tc.old) {
				t.Fatalf("the document has no %q", tc.old)
			}
			doc := strings.Replace(goodDoc, tc.old, tc.new, 1)
			problems := Check(testFlags(), doc)
			for _, p := range problems {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("no problem says %q; got %q", tc.want, problems)
		})
	}
}

// The rules for an empty default: `""`, "" and words match it; a value
// does not.
func TestMatchEmpty(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("s", "", "")
	f := fs.Lookup("s")
	for _, d := range []string{`""`, "`\"\"`", "off", "in-cluster", "the pod's namespace (else `kube-system`)", "UID of `kube-system`"} {
		if err := Match(f, d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	for _, d := range []string{"`x`", "0", "1m", "false", ""} {
		if err := Match(f, d); err == nil {
			t.Errorf("%s matched an empty default", d)
		}
	}
}

func TestSplitTop(t *testing.T) {
	got := SplitTop("`a,b`, the pod's namespace (else `x`, or y), 5s")
	want := []string{"`a,b`", "the pod's namespace (else `x`, or y)", "5s"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}
