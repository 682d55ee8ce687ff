// Command binder is tether's persistent-volume binder: it binds claims to
// volumes in place of kube-controller-manager's persistentvolume-binder-controller.
//
// Exit status: 0 when stopped by a signal, and after --help (printed on
// stdout) or --version; 2 for a bad setting (a flag or an argument), found
// by checkOptions before --version prints and before any connection; 1 for
// a failure once started.
//
// The files:
//   - main.go: the flags and their defaults (kubeconfig and client
//     limits, leader election, --workers, --resync-period,
//     --http-endpoint, --node-loss-grace), checkOptions, and run: the
//     metrics and health endpoint, the binder.Controller, whose caches
//     fill while the replica waits for the lease and whose workers start
//     once it leads. Writes are patches while the API server is newer
//     than the binder's API types.
//   - gc.go: gcPercent, the binder's GOGC unless the environment sets
//     one.
package main
