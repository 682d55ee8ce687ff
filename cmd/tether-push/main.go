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
