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
//
// The files:
//   - main.go: main, which runs internal/release's PushCommand with a
//     context that SIGINT and SIGTERM cancel, prints its error (but for
//     help asked for), and exits with the status internal/cli gives it.
package main
