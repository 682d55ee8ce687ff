package benchout

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

func TestWriteAppendsRuns(t *testing.T) {
	t.Setenv("TETHER_ARTIFACTS", t.TempDir())
	for i := range 2 {
		if _, err := Write(Run{Bench: "demo", Label: "tether", Started: time.Unix(0, 0), Figures: map[string]any{"n": i}}); err != nil {
			t.Fatal(err)
		}
	}
	dir, _ := Dir()
	data, err := os.ReadFile(dir + "/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	var runs []Run
	if err := json.Unmarshal(data, &runs); err != nil || len(runs) != 2 || runs[1].Figures["n"] != float64(1) {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	if _, err := Write(Run{Bench: "../x"}); err == nil {
		t.Error("a bench name with a slash: want an error")
	}
}
