package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tether-csi/tether/internal/doccheck"
)

// runMainEnv makes the test binary run main instead of the tests.
const runMainEnv = "LOCAL_DRIVER_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Issue 51: --version names the program, not the file it runs from (here
// local-driver.test).
func TestVersionName(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "--version")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "local-driver ") || strings.Count(string(out), "\n") != 1 {
		t.Errorf("--version: %q, %v; want one line, local-driver and the version", out, err)
	}
}

func TestSocketPath(t *testing.T) {
	for in, want := range map[string]string{
		"unix:///run/csi/csi.sock": "/run/csi/csi.sock",
		"unix:/run/csi.sock":       "/run/csi.sock",
		"/run/csi.sock":            "/run/csi.sock",
		"":                         "",
		"tcp://1.2.3.4:5":          "",
		"unix://":                  "",
	} {
		got, err := socketPath(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("socketPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestQuantity(t *testing.T) {
	for in, want := range map[string]int64{"10Gi": 10 << 30, "1G": 1e9, "512Mi": 512 << 20, "0": 0, "-1Gi": -1, "abc": -1, "1.5": -1, "100Ti": 100 << 40, "9Ei": -1} {
		got, err := quantity("--capacity", in)
		if (want < 0) != (err != nil) || (err == nil && got != want) {
			t.Errorf("quantity(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

// Every container of deploy/ and examples/ that runs the local driver
// passes it args its own flag parser takes, and no stray argument.
func TestManifestArgsParse(t *testing.T) {
	containers, err := doccheck.ManifestContainers("../..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, cs := range containers {
		for _, c := range cs {
			if doccheck.ImageProgram(c.Image) != "local-driver" {
				continue
			}
			n++
			var s settings
			fs := newFlagSet(&s, os.Getenv, "host")
			fs.Init(fs.Name(), flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			err := fs.Parse(c.Args)
			if err == nil && fs.NArg() > 0 {
				err = fmt.Errorf("stray arguments %q", fs.Args())
			}
			if err != nil {
				t.Error(doccheck.ArgsProblem(path, c, err))
			}
		}
	}
	if n == 0 {
		t.Error("no container of deploy/ or examples/ runs the local driver: the reading is broken")
	}
}
