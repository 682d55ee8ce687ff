// Command release builds tether's images and release bundle (make images,
// make release) and pushes a bundle's images to a registry:
//
//	go run ./hack/release images  -version v0.1.0 -out _out/images/v0.1.0
//	go run ./hack/release release -version v0.1.0 -out _out/release/v0.1.0
//	go run ./hack/release push    -dir _out/release/v0.1.0 [-registry registry.example.com/tether] [-force]
//	go run ./hack/release check-krew -dir _out/release/v0.1.0
//
// push is also the tether-push binary (cmd/tether-push) a release ships.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tether-csi/tether/internal/cli"
	"github.com/tether-csi/tether/internal/release"
)

const usage = `usage: release images|release|push|check-krew [flags]
  images     build the OCI image archives of binder, provisioner, local-driver
             and their SPDX SBOMs
  release    images, then kubectl-tether's archives and krew manifest,
             tether-push binaries, tether.yaml, tether-production.yaml,
             tether-provisioner-alerts.yaml, tether-binder-alerts.yaml,
             tether-dashboard.json, RELEASE_NOTES.md, SHA256SUMS and
             provenance.intoto.json
  push       upload a release folder's images and indexes to a registry
  check-krew check a release folder's krew manifest against its archives
`

// monitoringFiles are the files of deploy/monitoring a release carries,
// each as tether-<name>.
var monitoringFiles = []string{"provisioner-alerts.yaml", "binder-alerts.yaml", "dashboard.json"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "images", "release":
		var root string
		if root, err = os.Getwd(); err == nil {
			err = build(ctx, root, os.Args[1], os.Args[2:])
		}
	case "push":
		err = push(ctx, os.Args[2:])
	case "check-krew":
		err = checkKrew(os.Args[2:])
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0) // push -h: the help is on stdout
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(cli.ExitCode(err)) // 2 for a bad setting, as tether-push
	}
}

func logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// build runs images or release (what) with args in the module at root.
func build(ctx context.Context, root, what string, args []string) error {
	fs := flag.NewFlagSet(what, flag.ExitOnError)
	version := fs.String("version", "", "the version stamped into the binaries and tagging the images")
	out := fs.String("out", "", "the folder to write into")
	registry := fs.String("registry", "ghcr.io/tether-csi", "the images' registry and path")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	_ = fs.Parse(args)
	if fs.NArg() > 0 || *version == "" || *out == "" {
		return fmt.Errorf("%s: -version and -out are required, and nothing else (got %q)", what, fs.Args())
	}
	// A release's version is checked before anything is built or written:
	// one with no CHANGELOG.md section fails at once and leaves no folder,
	// nor removes an earlier bundle of that version. The folder is then
	// made anew: a bundle never holds files of an earlier build.
	var notes string
	if what == "release" {
		var err error
		if notes, err = release.ReleaseNotes(root, *version); err != nil {
			return err
		}
		if err := os.RemoveAll(*out); err != nil {
			return err
		}
	}
	var plats []v1.Platform
	for _, p := range strings.Split(*platforms, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok {
			return fmt.Errorf("platform %q: want os/arch", p)
		}
		plats = append(plats, v1.Platform{OS: osName, Architecture: arch})
	}
	built, err := release.BuildImages(ctx, release.BuildOptions{Root: root, Version: *version, Registry: *registry,
		Platforms: plats, Out: *out, Log: logf})
	if err != nil {
		return err
	}
	if what == "images" {
		logf("images: %d archives (%d platforms each) in %s", len(built), len(plats), *out)
		return nil
	}
	plugins, err := release.WritePlugins(ctx, release.PluginOptions{Root: root, Version: *version, Out: *out})
	if err != nil {
		return err
	}
	logf("%s", strings.Join(plugins, "\n"))
	// The push command, static, for the machines people push from: in the
	// unpacked bundle it needs neither Go nor a container engine.
	for _, p := range release.PushPlatforms {
		bin, err := release.BuildBinary(ctx, release.BinaryOptions{Root: root, Package: "./cmd/tether-push", Version: *version, Platform: p})
		if err != nil {
			return err
		}
		if err := release.CheckVersionFlag(ctx, bin, p, *version); err != nil {
			return fmt.Errorf("tether-push: %w", err)
		}
		name := release.PushBinaryName(*version, p)
		if err := os.WriteFile(filepath.Join(*out, name), bin, 0o755); err != nil {
			return err
		}
		logf("%s", name)
	}
	for _, b := range release.Bundles {
		manifests, err := release.Render(root, b.Dir, built)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, b.File), manifests, 0o644); err != nil {
			return err
		}
	}
	for _, name := range monitoringFiles {
		data, err := os.ReadFile(filepath.Join(root, "deploy", "monitoring", name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, "tether-"+name), data, 0o644); err != nil {
			return err
		}
	}
	notes += "\n## Images\n\n"
	for _, b := range built {
		notes += fmt.Sprintf("- `%s@%s`\n", b.Ref, b.Digest)
	}
	notes += "\nLoad an archive with `ctr -n k8s.io images import <file>` on each node (every platform is in it),\n" +
		"or, in this folder, push them all with `./tether-push_" + *version + "_<os>_<arch> -registry <your registry>`\n" +
		"and apply the `tether-<your registry>.yaml` it writes (the digests stay the same).\n"
	if err := os.WriteFile(filepath.Join(*out, "RELEASE_NOTES.md"), []byte(notes), 0o644); err != nil {
		return err
	}
	if err := release.WriteSums(*out); err != nil {
		return err
	}
	var platformNames []string
	for _, p := range plats {
		platformNames = append(platformNames, p.OS+"/"+p.Architecture)
	}
	if err := release.WriteProvenance(ctx, root, *out, release.ProvenanceSpec{Version: *version, Registry: *registry,
		Platforms: platformNames}); err != nil {
		return err
	}
	logf("release %s: %s", *version, *out)
	return nil
}

// checkKrew checks the krew manifest of the release folder -dir.
func checkKrew(args []string) error {
	fs := flag.NewFlagSet("check-krew", flag.ExitOnError)
	dir := fs.String("dir", "", "the release folder")
	_ = fs.Parse(args)
	if fs.NArg() > 0 || *dir == "" {
		return fmt.Errorf("check-krew: -dir is required, and nothing else (got %q)", fs.Args())
	}
	n, err := release.CheckKrewManifest(*dir)
	if err != nil {
		return fmt.Errorf("check-krew: %s: %w", *dir, err)
	}
	logf("check-krew: %s parses, and its %d archives have its checksums", release.KrewManifestFile, n)
	return nil
}

func push(ctx context.Context, args []string) error {
	return release.PushCommand(ctx, "release push", args, os.Stdout, os.Stderr)
}
