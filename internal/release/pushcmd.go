package release

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tether-csi/tether/internal/cli"
	"github.com/tether-csi/tether/internal/version"
)

// PushUsage is the push command's help.
const PushUsage = `usage: %s [-dir FOLDER] [-registry REGISTRY/PATH] [-force]

Uploads an unpacked release bundle's images (its *.oci.tar archives and
images.json) to a registry, with the credentials of ~/.docker/config.json,
and checks that the registry serves the digests tether.yaml pins. With
-registry, it also writes tether-<registry>.yaml: tether.yaml with the images
named in that registry. It refuses to move a tag that names other bytes
unless -force; a tag that names the bundle's images already is left alone.

`

// PushCommand runs push's command line (args without the program's name):
// hack/release's push and the tether-push binary a release ships. It
// reports progress on stdout. Help asked for (-h, -help) is printed on
// stdout and returns flag.ErrHelp; a bad setting (the flag package's error,
// an argument, a -registry no image can be named in: checkPush) returns an
// error marked cli.ErrBadSetting, for the caller to print (the flag
// package's in one line, by cli.Explain), before -version prints and
// before anything is read or sent.
func PushCommand(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), PushUsage, prog)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", ".", "the unpacked release (or make images) folder")
	registry := fs.String("registry", "", "push to this registry and path instead of the one built in (ghcr.io/tether-csi)")
	force := fs.Bool("force", false, "move a tag that already names other bytes (a published tether.yaml pinning them stops matching it)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := checkPush(fs.Args(), *registry); err != nil {
		return cli.BadSetting(err)
	}
	if *showVersion {
		_, err := fmt.Fprintln(stdout, prog, version.String())
		return err
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	return Push(ctx, PushOptions{Dir: *dir, Registry: *registry, Force: *force, Log: logf})
}

// checkPush checks push's settings that the flag package does not: no
// argument but flags, and a -registry under which Push can name every
// component's image (Target).
func checkPush(args []string, registry string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q: push takes flags only", args)
	}
	if registry == "" {
		return nil
	}
	ref := Target(Built{Component: "binder", Ref: "ghcr.io/tether-csi/binder:v0.0.0"}, registry)
	if _, err := name.NewTag(ref); err != nil {
		return fmt.Errorf("-registry %q: %w", registry, err)
	}
	return nil
}

// PushPlatforms are the platforms a release ships tether-push for: the
// machines people push from.
var PushPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"},
	{OS: "darwin", Architecture: "amd64"}, {OS: "darwin", Architecture: "arm64"},
	{OS: "windows", Architecture: "amd64"},
}

// PushBinaryName names tether-push's binary for a platform in a release.
func PushBinaryName(version string, p v1.Platform) string {
	name := fmt.Sprintf("tether-push_%s_%s_%s", version, p.OS, p.Architecture)
	if p.OS == "windows" {
		name += ".exe"
	}
	return name
}
