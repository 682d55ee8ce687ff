// Command tether-push uploads a tether release bundle's images to a
// registry. A release ships it for several platforms, static, so that
// pushing needs neither Go nor a container engine: in the unpacked bundle,
//
//	./tether-push_v0.1.0_linux_amd64 -registry registry.example.com/tether
//
// pushes every archive, checks the registry serves the digests tether.yaml
// pins, and writes tether-registry.example.com_tether.yaml naming them
// there. `-h` lists the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/tether-csi/tether/internal/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	prog := filepath.Base(os.Args[0])
	err := release.PushCommand(ctx, prog, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case err != nil:
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		os.Exit(1)
	}
}
