package main

import (
	"os"
	"path/filepath"
	"testing"
)

// A renamed or removed decision file must leave make mutate's list too.
func TestTargetsExist(t *testing.T) {
	for _, tg := range targets {
		for _, f := range tg.Files {
			if _, err := os.Stat(filepath.Join("..", "..", tg.Dir, f)); err != nil {
				t.Errorf("%s/%s: %v", tg.Dir, f, err)
			}
		}
		_, err := os.Stat(filepath.Join("..", "..", tg.Dir, "mutate_sim_test.go"))
		switch {
		case tg.NoSim == "" && err != nil:
			t.Errorf("%s has no mutate_sim_test.go (the short simulator run): %v", tg.Dir, err)
		case tg.NoSim != "" && err == nil:
			t.Errorf("%s has a mutate_sim_test.go but says it has none: %s", tg.Dir, tg.NoSim)
		}
	}
}
