// Command tether-push uploads a tether release bundle's images to a
// registry. A release ships it for several platforms, static, so that
// pushing needs neither Go nor a container engine: in the unpacked bundle,
//
//	./tether-push_v0.1.0_linux_amd64 -registry registry.example.com/tether
//
// pushes every archive, checks the registry serves the digests tether.yaml
// pins, and writes tether-registry.example.com_tether.yaml naming them
// there. `-h` lists the flags, on stdout.
//
// Exit status: 0 once pushed, and after -h or -version (printed only once
// every setting passed); 2 for a bad setting (a flag, an argument, a
// -registry no image can be named in), before anything is read or sent; 1
// when the push fails (no bundle in -dir, a registry that refuses).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tether-csi/tether/internal/cli"
	"github.com/tether-csi/tether/internal/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is tether-push with args (the program's name first, which the
// usage, -version and the errors do not use: a release names the file
// per platform); it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const prog = "tether-push"
	err := release.PushCommand(ctx, prog, args[1:], stdout, stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	}
	return cli.ExitCode(err)
}
