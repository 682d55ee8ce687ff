// Package csi is the provisioner's connection to a CSI driver over a unix
// socket: it waits for the driver to be ready, learns its name and
// capabilities, and makes the controller calls with a per-call timeout.
// Every call is timed into EP's csi_sidecar_operations_seconds histogram.
//
// The files:
//   - conn.go: Options, Capabilities and Conn, safe for concurrent use.
//     Connect dials the socket, probes until the driver is ready (only
//     Unimplemented, a server that is no CSI driver, is not retried) and
//     reads its name and capabilities; Watch follows the connection and,
//     once it comes back, reads them again and returns an error wrapping
//     ErrDriverChanged if they differ. The controller calls (CreateVolume,
//     DeleteVolume, ListVolumes, GetCapacity) and Probe return the
//     driver's gRPC status unwrapped; RequireProvisioning says what a
//     driver lacks to provision, CheckAddress checks an address without
//     dialing.
//   - outlive.go: the CreateVolume or DeleteVolume that outlives its
//     caller's timeout goes on, bounded; the next call for the same
//     volume with an equal request waits for its answer, one with another
//     request is refused with Aborted, so the driver sees one call per
//     volume at a time. An answer a caller waits for is handed over and
//     forgotten; only one nobody waited for is held, for a while.
//   - metrics.go: the histogram, with EP's name, labels and buckets, and
//     the interceptor that times every call and, at verbosity 5, logs it
//     with its secrets stripped.
//   - strip.go: StripSecrets, a message as JSON for a log line with every
//     secret field's value replaced (the spec's csi_secret option, or a
//     field named secrets or ..._secrets); the message is not changed.
//   - hint.go: what to do when the socket refuses this process's user.
package csi
